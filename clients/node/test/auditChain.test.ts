// verifyAuditChain: the audit hash chain checked from the adjudicator's auditLog() entries, on
// the client, against a real referee process (server.ts), as the Python client's
// verify_audit_chain (tests/test_audit_log_review.py).

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { describe, test } from "node:test";

import {
  GENESIS_HASH,
  RefereeClient,
  RefereeError,
  verifyAuditChain,
  type AuditEntry,
  type Session,
} from "../src/index";
import { useServer } from "./server";

let client: RefereeClient;
useServer((started) => ({ client } = started));

async function refused(promise: Promise<unknown>): Promise<void> {
  const caught: unknown = await promise.then(
    () => undefined,
    (error: unknown) => error,
  );
  assert.ok(caught instanceof RefereeError, `not a RefereeError: ${String(caught)}`);
}

/** The whole log, read in pages of `pageSize` until an empty one. */
async function wholeLog(session: Session, pageSize: number): Promise<AuditEntry[]> {
  const entries: AuditEntry[] = [];
  for (;;) {
    const page = await session.auditLog(entries.at(-1)?.seq ?? 0, pageSize);
    if (page.length === 0) return entries;
    entries.push(...page);
  }
}

/** A copy of the entries with `index`'s changed by `change`. */
function changed(
  entries: AuditEntry[],
  index: number,
  change: (entry: AuditEntry) => AuditEntry,
): AuditEntry[] {
  return entries.map((entry, at) => (at === index ? change({ ...entry }) : entry));
}

describe("verifyAuditChain", () => {
  test("checks the adjudicator's log read in pages, and finds each tampering's seq", async () => {
    // Accepted and refused requests from seats, the spectator and a caller with no valid
    // token, one with text beyond ASCII in its request id (escaped in the hashed content).
    const game = await client.createGame({ variant: "partnership", seed: "node-chain" });
    const seats = game.seatTokens.map((token) => client.seat(game.gameId, token));
    await seats[1]!.submit({ type: "pass" }, { requestId: "premi\u00e8re \u2660" });
    await refused(seats[3]!.submit({ type: "pass" }));
    await refused(client.seat(game.gameId, game.spectatorToken).submit({ type: "pass" }));
    await refused(client.seat(game.gameId, "no-such-token").submit({ type: "pass" }));
    await refused(seats[2]!.submit({ type: "play", card: "AS" }));
    await seats[2]!.submit({ type: "pass" }, { expectedVersion: 1 });
    const adjudicator = client.session(game.gameId, game.adjudicatorToken);
    const entries = await wholeLog(adjudicator, 4);
    assert.equal(entries.length, 6);
    assert.deepEqual(
      entries.map((entry) => entry.role),
      ["ROLE_SEAT", "ROLE_SEAT", "ROLE_SPECTATOR", "ROLE_UNSPECIFIED", "ROLE_SEAT", "ROLE_SEAT"],
    );
    assert.deepEqual(verifyAuditChain(entries), {
      intact: true,
      entries: 6,
      firstBadSeq: 0,
      detail: "",
    });
    // Resumed from a hash kept from an earlier read.
    assert.deepEqual(verifyAuditChain(entries.slice(3), entries[2]!.hash), {
      intact: true,
      entries: 3,
      firstBadSeq: 0,
      detail: "",
    });
    assert.equal(GENESIS_HASH, entries[0]!.previousHash);

    // An entry shown otherwise than hashed, field by field. The time to the nanosecond: a time
    // in nanoseconds is beyond 2^53, where doubles are 256 apart, so one nanosecond more went
    // unseen when the two times were compared as numbers rather than exactly.
    const tampered: [number, (entry: AuditEntry) => AuditEntry, string][] = [
      [4, (e) => ({ ...e, action: { type: "play", card: "KS" } }), "action"],
      [0, (e) => ({ ...e, requestId: "premiere" }), "requestId"],
      [1, (e) => ({ ...e, code: "" }), "code"],
      [2, (e) => ({ ...e, role: "ROLE_SEAT" }), "role"],
      [3, (e) => ({ ...e, outcome: "AUDIT_OUTCOME_ACCEPTED" }), "outcome"],
      [5, (e) => ({ ...e, seat: 3 }), "seat"],
      [5, (e) => ({ ...e, version: e.version + 1 }), "version"],
      [5, (e) => ({ ...e, rpc: "GetGame" }), "rpc"],
      [5, (e) => ({ ...e, time: { seconds: e.time!.seconds, nanos: e.time!.nanos + 1 } }), "time"],
    ];
    for (const [index, change, field] of tampered) {
      const seq = index + 1;
      assert.deepEqual(verifyAuditChain(changed(entries, index, change)), {
        intact: false,
        entries: 6,
        firstBadSeq: seq,
        detail: `entry ${seq}'s hashed content differs in ${field}`,
      });
    }
    // An entry left out: by seq from the start, by link from a kept hash.
    assert.deepEqual(verifyAuditChain([...entries.slice(0, 2), ...entries.slice(3)]), {
      intact: false,
      entries: 5,
      firstBadSeq: 4,
      detail: "entry 4 follows 2",
    });
    assert.deepEqual(verifyAuditChain(entries.slice(3), entries[1]!.hash), {
      intact: false,
      entries: 3,
      firstBadSeq: 4,
      detail: "entry 4 does not link to the entry before it",
    });
    // A hash over other content: entry 2 no longer matches it.
    const other = createHash("sha256").update("other content").digest("hex");
    assert.deepEqual(
      verifyAuditChain(changed(entries, 1, (e) => ({ ...e, hash: other }))),
      { intact: false, entries: 6, firstBadSeq: 2, detail: "entry 2 does not match its hash" },
    );
    // Content rehashed to say otherwise than the entry: the hash matches, the entry does not.
    const content = JSON.parse(entries[1]!.hashedContent) as Record<string, unknown>;
    const forged = JSON.stringify({ ...content, code: "NOT_YOUR_TURN_X" });
    const rehashed = changed(entries, 1, (e) => ({
      ...e,
      hashedContent: forged,
      hash: createHash("sha256").update(forged).digest("hex"),
    }));
    assert.deepEqual(verifyAuditChain(rehashed.slice(0, 2)), {
      intact: false,
      entries: 2,
      firstBadSeq: 2,
      detail: "entry 2's hashed content differs in code",
    });
  });

  test("a seat's and the spectator's entries carry no hashed content: a TypeError", async () => {
    const game = await client.createGame({ variant: "partnership", seed: "node-chain-seat" });
    const seat = client.seat(game.gameId, game.seatTokens[1]!);
    await seat.submit({ type: "pass" });
    for (const session of [seat, client.session(game.gameId, game.spectatorToken)]) {
      const seen = await session.auditLog();
      assert.equal(seen.length, 1);
      assert.equal(seen[0]!.hashedContent, "");
      assert.throws(
        () => verifyAuditChain(seen),
        (error: unknown) =>
          error instanceof TypeError &&
          error.message ===
            "entry 1 has no hashedContent: only the adjudicator's entries can be checked",
      );
    }
  });
});
