// A client-side check of the audit hash chain, as the Python client's `verify_audit_chain`:
// from the adjudicator's `auditLog()` entries alone, without asking the server (whose
// `verifyAuditLog()` checks the log it holds, not the entries a client was sent).

import { createHash } from "node:crypto";

import type { AuditCheck, AuditEntry } from "./client";

/** The `previousHash` of entry 1 (64 zeros): `verifyAuditChain`'s default start. */
export const GENESIS_HASH = "0".repeat(64);

// How the hashed content names what an entry shows by enum name (README, "The hash chain").
const HASHED_ROLES = new Map<unknown, string>([
  ["seat", "ROLE_SEAT"],
  ["spectator", "ROLE_SPECTATOR"],
  ["adjudicator", "ROLE_ADJUDICATOR"],
  ["anonymous", "ROLE_UNSPECIFIED"],
]);
const HASHED_OUTCOMES = new Map<unknown, string>([
  ["accepted", "AUDIT_OUTCOME_ACCEPTED"],
  ["refused", "AUDIT_OUTCOME_REFUSED"],
]);
const HASHED_KEYS = new Set([
  "seq",
  "time",
  "role",
  "seat",
  "rpc",
  "action",
  "public_action",
  "outcome",
  "code",
  "request_id",
  "version",
  "previous_hash",
]);

/**
 * Check audit entries as the adjudicator's `auditLog()` pages give them, here rather than on
 * the server: each `hash` is the SHA-256 of its `hashedContent`, that content is the entry shown
 * (every field, with the time to the nanosecond), the seqs follow one another and each entry
 * links to the one before. `previousHash` is the `hash` of the entry before the first given
 * (kept from an earlier read: a log rewritten up to there no longer links to it); by default the
 * entries start the log, at seq 1. The verdict is `verifyAuditLog()`'s shape for the entries
 * given (`entries` is how many), with the same `firstBadSeq` and `detail` as the Python client's
 * `verify_audit_chain` (a field named as this client names it, `requestId`, `previousHash`).
 *
 * This checks the chain the server sends, not the game's log behind it (`verifyAuditLog()` also
 * compares that). A seat's or spectator's entries carry no hash (it would let a seat try every
 * card of a hidden pass against it): a TypeError, as the Python client's ValueError.
 */
export function verifyAuditChain(
  entries: readonly AuditEntry[],
  previousHash: string = GENESIS_HASH,
): AuditCheck {
  let previous = previousHash;
  let expectedSeq = previousHash === GENESIS_HASH ? 1 : undefined;
  const verdict = (seq: number, detail: string): AuditCheck => ({
    intact: false,
    entries: entries.length,
    firstBadSeq: seq,
    detail,
  });
  for (const entry of entries) {
    const seq = entry.seq;
    const text = entry.hashedContent;
    if (!text) {
      throw new TypeError(
        `entry ${seq} has no hashedContent: only the adjudicator's entries can be checked`,
      );
    }
    if (expectedSeq !== undefined && seq !== expectedSeq) {
      return verdict(seq, `entry ${seq} follows ${expectedSeq - 1}`);
    }
    expectedSeq = seq + 1;
    if (entry.previousHash !== previous) {
      return verdict(seq, `entry ${seq} does not link to the entry before it`);
    }
    if (createHash("sha256").update(text, "utf8").digest("hex") !== entry.hash) {
      return verdict(seq, `entry ${seq} does not match its hash`);
    }
    const differs = hashedDiffers(JSON.parse(text) as unknown, entry);
    if (differs) return verdict(seq, `entry ${seq}'s hashed content differs in ${differs}`);
    previous = entry.hash;
  }
  return { intact: true, entries: entries.length, firstBadSeq: 0, detail: "" };
}

/** The first field where an entry's hashed content says other than the entry ("" if none): a
 * hash over other content than the entry shows vouches for nothing shown. */
function hashedDiffers(content: unknown, entry: AuditEntry): string {
  if (!isObject(content)) return "its keys";
  const keys = Object.keys(content);
  if (keys.length !== HASHED_KEYS.size || !keys.every((key) => HASHED_KEYS.has(key))) {
    return "its keys";
  }
  // In the Python client's order (seq, then time, then the rest), for the same verdict.
  if (!pyEquals(content["seq"], entry.seq)) return "seq";
  if (!sameTime(content["time"], entry.time)) return "time";
  const shown: [keyof AuditEntry, unknown, unknown][] = [
    ["role", HASHED_ROLES.get(content["role"]) ?? null, entry.role],
    ["seat", pyFalsy(content["seat"]) ? 0 : content["seat"], entry.seat],
    ["rpc", content["rpc"], entry.rpc],
    ["action", pyFalsy(content["action"]) ? {} : content["action"], entry.action],
    ["outcome", HASHED_OUTCOMES.get(content["outcome"]) ?? null, entry.outcome],
    ["code", content["code"], entry.code],
    ["requestId", content["request_id"], entry.requestId],
    ["version", content["version"], entry.version],
    ["previousHash", content["previous_hash"], entry.previousHash],
  ];
  return shown.find(([, hashed, onEntry]) => !pyEquals(hashed, onEntry))?.[0] ?? "";
}

/** Whether the hashed time (seconds since 1970, the stored double) is the entry's, to the
 * nanosecond: the server shows the double times 1e9 cut toward zero (Python's
 * `int(seconds * 1e9)`), so the same double product, taken exactly as a BigInt, is compared
 * with `seconds * 10^9 + nanos`, also exactly (a time in nanoseconds is beyond 2^53). */
function sameTime(hashed: unknown, time: AuditEntry["time"]): boolean {
  // Python's isinstance(time, (int, float)) takes a bool as 0 or 1.
  if (typeof hashed !== "number" && typeof hashed !== "boolean") return false;
  const stamp = time ?? { seconds: 0, nanos: 0 };
  if (!Number.isInteger(stamp.seconds) || !Number.isInteger(stamp.nanos)) return false;
  // BigInt of an infinite product (1e999 reads as Infinity) is a RangeError, as Python's
  // int() of one is an OverflowError.
  const shown = BigInt(Math.trunc(Number(hashed) * 1e9));
  return shown === BigInt(stamp.seconds) * 1_000_000_000n + BigInt(stamp.nanos);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Python's falsiness, which the Python client's `or` tests: an empty list or object too. */
function pyFalsy(value: unknown): boolean {
  if (Array.isArray(value)) return value.length === 0;
  if (isObject(value)) return Object.keys(value).length === 0;
  return value === null || value === undefined || value === false || value === 0 || value === "";
}

/** Python's `==` on JSON values, which the Python client compares with: a bool equals the
 * number it stands for (true == 1), objects equal whatever the order of their keys. */
function pyEquals(a: unknown, b: unknown): boolean {
  const numeric = (value: unknown): boolean =>
    typeof value === "number" || typeof value === "boolean";
  if (numeric(a) && numeric(b)) return Number(a) === Number(b);
  if (Array.isArray(a) || Array.isArray(b)) {
    return (
      Array.isArray(a) &&
      Array.isArray(b) &&
      a.length === b.length &&
      a.every((item, index) => pyEquals(item, b[index]))
    );
  }
  if (isObject(a) && isObject(b)) {
    const keys = Object.keys(a);
    return (
      keys.length === Object.keys(b).length &&
      keys.every((key) => Object.prototype.hasOwnProperty.call(b, key) && pyEquals(a[key], b[key]))
    );
  }
  return a === b;
}
