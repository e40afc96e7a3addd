// ClientOptions.maxReconnectBackoffMs against a real referee process (server.ts) that stays
// down a while: gRPC's reconnect backoff grows while the server is down (1 s, 1.6 s, 2.56 s,
// ... up to 120 s), and until its next attempt the channel fails calls at once, however long
// the server has been back. The cap bounds that wait.

import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";

import { MAX_RECONNECT_BACKOFF_MS, RefereeClient, reconnectBackoffOptions } from "../src/index";
import { useServer, type RunningServer } from "./server";

let server: RunningServer;
useServer((started) => ({ server } = started));

/** Long enough for gRPC's own backoff to grow past 2.5 s while the server is down, so that an
 * uncapped client is seconds late (1.9 to 5.8 s measured). */
const OUTAGE_MS = 6_000;
const POLL_MS = 50;
/** Short, so that a call answers at once whether the channel is connected or not. */
const POLL_DEADLINE_MS = 200;

/**
 * Restarts the server after `OUTAGE_MS` down while `client` calls ListVariants every 50 ms, as
 * a busy client would, and returns how long after the server was serving again (`restart`
 * resolved: its health check answered) the client's first call succeeded.
 */
async function lateAfterOutage(client: RefereeClient): Promise<number> {
  await client.listVariants();
  let servingAt: number | undefined;
  const restarting = server.restart(OUTAGE_MS).then(() => {
    servingAt = Date.now();
  });
  let failed = false;
  const giveUpAt = Date.now() + OUTAGE_MS + 60_000;
  for (;;) {
    assert.ok(Date.now() < giveUpAt, "the client did not reach the restarted server");
    const succeeded = await client.listVariants({ deadlineMs: POLL_DEADLINE_MS }).then(
      () => true,
      () => false,
    );
    // The first success after the outage: calls may still succeed just after the restart
    // begins, while the server shuts down.
    if (succeeded && failed) break;
    failed ||= !succeeded;
    await sleep(POLL_MS);
  }
  const succeededAt = Date.now();
  await restarting;
  assert.ok(servingAt !== undefined);
  return succeededAt - servingAt;
}

describe("reconnect backoff", () => {
  test("the default caps it at 5 s", () => {
    assert.equal(MAX_RECONNECT_BACKOFF_MS, 5_000);
    assert.deepEqual(reconnectBackoffOptions(MAX_RECONNECT_BACKOFF_MS), {
      "grpc.max_reconnect_backoff_ms": 5_000,
    });
    // grpc-js waits its initial backoff (1 s) before the second attempt whatever the cap.
    assert.deepEqual(reconnectBackoffOptions(500), {
      "grpc.initial_reconnect_backoff_ms": 500,
      "grpc.max_reconnect_backoff_ms": 500,
    });
    assert.deepEqual(reconnectBackoffOptions(0), {});
  });

  test("a capped client calls again soon after the server is back", { timeout: 120_000 }, async (t) => {
    if (!server.started) {
      t.skip("needs a server this harness starts (REFEREE_ADDRESS is set)");
      return;
    }
    const capped = new RefereeClient(server.address, { maxReconnectBackoffMs: 500 });
    try {
      const lateMs = await lateAfterOutage(capped);
      t.diagnostic(`first call ${lateMs} ms after the server was back`);
      assert.ok(lateMs < 1_500, `first call ${lateMs} ms after the server was back`);
    } finally {
      capped.close();
    }
  });
});
