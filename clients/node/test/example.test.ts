// The example's hand-by-hand log (src/example.ts), no server: the lines it prints for events.

import assert from "node:assert/strict";
import { test } from "node:test";

import type { GameEvent } from "../src/client";
import type { Json } from "../src/struct";
import { HandLog, bySide } from "../src/example";

let seq = 0;

function event(kind: string, data: Record<string, Json>): GameEvent {
  seq++;
  return { seq, version: seq, kind, audience: "everyone", ...data };
}

/** A hand's opening and one round of calls (seat, type) ending in a redeal: the lines logged. */
function redealt(log: HandLog, hand: number, calls: [number, string][]): string[] {
  const events = [
    event("hand_started", { hand, dealer: hand % 4 }),
    ...calls.map(([seat, type]) => event("call", { seat, type })),
    event("redeal", { hand }),
  ];
  return events.flatMap((e) => log.lines(e));
}

test("a redeal says what led to it: everyone passing, or a bid-or-redeal call", () => {
  // Was: "everyone passed: redeal" for every redeal, also for a round with a bid-or-redeal
  // call (RULES.md A.7 item 2), in which not everyone passed.
  const log = new HandLog();
  assert.deepEqual(
    redealt(log, 3, [
      [0, "pass"],
      [1, "bid_or_redeal"],
      [2, "pass"],
      [3, "bid_or_redeal"],
    ]),
    ["hand 3: dealer seat 3", "  no bid, bid-or-redeal called by seats 1, 3: redeal"],
  );
  // The next hand's calls are its own: a round of passes is everyone passing.
  assert.deepEqual(
    redealt(log, 4, [
      [1, "pass"],
      [2, "pass"],
      [3, "pass"],
      [0, "pass"],
    ]),
    ["hand 4: dealer seat 0", "  everyone passed: redeal"],
  );
  assert.deepEqual(
    redealt(log, 5, [
      [2, "pass"],
      [3, "pass"],
      [0, "pass"],
      [1, "bid_or_redeal"],
    ]),
    ["hand 5: dealer seat 1", "  no bid, bid-or-redeal called by seat 1: redeal"],
  );
});

test("the calls themselves, cards and tricks are not logged", () => {
  const log = new HandLog();
  for (const kind of ["call", "card_played", "trick_taken"]) {
    assert.deepEqual(log.lines(event(kind, { seat: 0, type: "pass" })), []);
  }
});

test("a hand's result gives meld per side, like its card points, deltas and scores", () => {
  // Was: the meld per seat (four numbers in a partnership) beside card points, delta and
  // scores per side (two), so the lists did not line up; the Python demo counts per side.
  const log = new HandLog();
  const result = (data: Record<string, Json>) => log.lines(event("hand_result", data))[0];
  const partnership = result({
    hand: 2,
    declarer: 1,
    bid: 250,
    meld: [20, 100, 40, 60],
    points: [90, 160],
    delta: [110, 320],
    scores: [110, 320],
  });
  assert.equal(
    partnership,
    "  result: meld [60, 160], card points [90, 160], delta [110, 320] (side 1 made 250)",
  );
  // Cutthroat: every seat is its own side.
  const cutthroat = result({
    hand: 0,
    declarer: 2,
    bid: 300,
    meld: [20, 0, 150],
    points: [60, 40, 150],
    delta: [80, 40, -300],
    scores: [80, 40, -300],
  });
  assert.equal(
    cutthroat,
    "  result: meld [20, 0, 150], card points [60, 40, 150], delta [80, 40, -300] (side 2 set)",
  );
  assert.deepEqual(bySide([1, 2, 3, 4], 2), [4, 6]);
  assert.deepEqual(bySide([5, 6], 2), [5, 6]);
});
