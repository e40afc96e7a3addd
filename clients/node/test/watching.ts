// Helpers of the tests that follow games with Session.watch (resume.test.ts, keepalive.test.ts).

import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";

import { Rng, choose, pick, type SeatSession, type WatchItem, type WatchStream } from "../src/index";

/** `count` actions by the bots, each by the seat whose turn it is; the game's version after. */
export async function act(seats: SeatSession[], rng: Rng, count: number): Promise<number> {
  let version = 0;
  for (let n = 0; n < count; n++) {
    for (const seat of seats) {
      const entries = await seat.legalActions();
      if (entries.length === 0) continue;
      version = (await seat.submit(choose(pick(entries, rng), rng))).version;
      break;
    }
  }
  return version;
}

/** What `stream` yields until it is quiet for `quietMs` (the events already committed). */
export async function backlog(stream: WatchStream, quietMs = 500): Promise<WatchItem[]> {
  const items: WatchItem[] = [];
  try {
    for (;;) {
      const next = await Promise.race([stream.next(), sleep(quietMs, null)]);
      if (next === null || next.done) return items;
      items.push(next.value);
    }
  } finally {
    await stream.return(undefined);
  }
}

export async function until(condition: () => boolean, what: string, ms = 30_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    assert.ok(Date.now() < deadline, `${what}: not within ${ms} ms`);
    await sleep(20);
  }
}

export function lastVersion(items: WatchItem[]): number | undefined {
  const last = items.at(-1);
  return last?.type === "event" ? last.event.version : undefined;
}
