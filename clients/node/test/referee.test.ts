// The wrapper against a real referee process (see server.ts).

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import * as grpc from "@grpc/grpc-js";

import {
  RefereeClient,
  RefereeError,
  Rng,
  choose,
  pick,
  type CreatedGame,
  type GameEvent,
  type SeatSession,
  type WatchItem,
} from "../src/index";
import { REFUSAL_BURST, useServer, type RunningServer } from "./server";

let server: RunningServer;
let client: RefereeClient;
useServer((started) => ({ server, client } = started));

async function newGame(seed: string): Promise<{ game: CreatedGame; seats: SeatSession[] }> {
  const game = await client.createGame({ variant: "partnership", options: { target: 300 }, seed });
  return { game, seats: game.seatTokens.map((token) => client.seat(game.gameId, token)) };
}

/** The seat whose turn it is (the one with legal actions) and one that must wait. */
async function toActAndWaiting(seats: SeatSession[]): Promise<[SeatSession, SeatSession]> {
  let acting: SeatSession | undefined;
  let waiting: SeatSession | undefined;
  for (const seat of seats) {
    if ((await seat.legalActions()).length > 0) acting ??= seat;
    else waiting ??= seat;
  }
  assert.ok(acting && waiting);
  return [acting, waiting];
}

async function refusal(promise: Promise<unknown>): Promise<RefereeError> {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof RefereeError, `not a RefereeError: ${String(error)}`);
    return error;
  }
  assert.fail("the call was not refused");
}

async function collect(stream: AsyncIterable<WatchItem>, limit = Infinity): Promise<WatchItem[]> {
  const items: WatchItem[] = [];
  for await (const item of stream) {
    items.push(item);
    if (items.length >= limit) break;
  }
  return items;
}

describe("pinochle referee through the Node client", () => {
  test("lists variants and creates a game", async () => {
    const variants = await client.listVariants();
    const partnership = variants.find((v) => v.id === "partnership");
    assert.ok(partnership, "partnership is offered");
    assert.equal(partnership.players, 4);
    assert.ok(partnership.options.some((o) => o.name === "target"));

    const { game, seats } = await newGame("node-test-create");
    assert.match(game.gameId, /^[0-9a-f]+$/);
    assert.equal(game.seatTokens.length, 4);
    assert.ok(game.spectatorToken && game.adjudicatorToken);
    assert.equal(game.version, 0);

    const view = await seats[1]!.view();
    assert.equal(view.game_id, game.gameId);
    assert.equal(view.variant, "partnership");
    assert.deepEqual(view.options, { target: 300 });
    assert.equal(view.seats, 4);
    assert.equal(view.role, 1);
    assert.equal(view.over, false);
    assert.equal(view.hand?.phase, "auction");
    assert.equal(view.hand?.cards?.length, 12);
    assert.deepEqual(view.deal_mode, { mode: "seed" }, "a seat is told its game was seeded");
    assert.equal(seats[1]!.version, 0);

    const spectator = await client.session(game.gameId, game.spectatorToken).view();
    assert.equal(spectator.role, "spectator");
    assert.equal(spectator.hand?.cards, undefined, "a spectator sees no hand");
  });

  test("refusals are typed RefereeErrors with reason, version and fields", async () => {
    const { game, seats } = await newGame("node-test-errors");
    const [acting, waiting] = await toActAndWaiting(seats);

    const outOfTurn = await refusal(waiting.submit({ type: "pass" }));
    assert.equal(outOfTurn.reason, "NOT_YOUR_TURN");
    assert.equal(outOfTurn.code, grpc.status.FAILED_PRECONDITION);
    assert.equal(outOfTurn.codeName, "FAILED_PRECONDITION");
    assert.equal(outOfTurn.version, 0);
    assert.equal(outOfTurn.domain, "pinochle-referee");
    assert.ok(outOfTurn.isViolation());
    assert.match(outOfTurn.details, /is to act/);

    const badRaise = await refusal(acting.submit({ type: "bid", amount: 255 }));
    assert.equal(badRaise.reason, "BID_BAD_RAISE");
    assert.deepEqual(badRaise.fields, ["action.amount"]);
    assert.equal(badRaise.version, 0);

    const wrongPhase = await refusal(acting.submit({ type: "play", card: "AS" }));
    assert.equal(wrongPhase.reason, "WRONG_PHASE");

    const malformed = await refusal(acting.submit({ type: "play", card: "ZZ" }));
    assert.equal(malformed.reason, "MALFORMED_ACTION");
    assert.equal(malformed.code, grpc.status.INVALID_ARGUMENT);
    assert.deepEqual(malformed.fields, ["action.card"]);

    const stale = await refusal(acting.submit({ type: "pass" }, { expectedVersion: 5 }));
    assert.equal(stale.reason, "STALE_VERSION");
    assert.equal(stale.code, grpc.status.ABORTED);
    assert.equal(stale.version, 0);
    assert.equal(stale.isViolation(), false);

    // Nothing was applied: the acting seat still acts at version 0.
    const accepted = await acting.submit({ type: "pass" });
    assert.equal(accepted.version, 1);
    assert.equal(acting.version, 1);
    const twice = await refusal(acting.submit({ type: "pass" }));
    assert.equal(twice.reason, "NOT_YOUR_TURN");
    assert.equal(twice.version, 1);

    const badOption = await refusal(
      client.createGame({ variant: "partnership", options: { no_such_option: 1 } }),
    );
    assert.equal(badOption.reason, "INVALID_ARGUMENT");
    assert.deepEqual(badOption.fields, ["options.no_such_option"]);

    const noGame = await refusal(client.seat("0".repeat(24), game.seatTokens[0]!).view());
    assert.equal(noGame.code, grpc.status.NOT_FOUND);
    assert.equal(noGame.reason, "NOT_FOUND");

    const badToken = await refusal(client.seat(game.gameId, "not-a-token").legalActions());
    assert.equal(badToken.reason, "UNAUTHENTICATED");

    const spectator = client.session(game.gameId, game.spectatorToken);
    const notASeat = await refusal(client.seat(game.gameId, game.spectatorToken).legalActions());
    assert.equal(notASeat.reason, "PERMISSION_DENIED");
    assert.ok(await spectator.auditLogIntact());
  });

  test("a retried submit with the same request id is answered once", async () => {
    const { seats } = await newGame("node-test-retry");
    const [acting] = await toActAndWaiting(seats);
    const first = await acting.submit(
      { type: "pass" },
      { requestId: "retry-1", expectedVersion: 0 },
    );
    const again = await acting.submit(
      { type: "pass" },
      { requestId: "retry-1", expectedVersion: 0 },
    );
    assert.equal(first.version, 1);
    assert.deepEqual(again, first);
    // The same id for another action is not a retry: refused, typed, nothing applied.
    const reused = await acting
      .submit({ type: "bid", amount: 250 }, { requestId: "retry-1", expectedVersion: 0 })
      .then(
        () => assert.fail("a reused request id was accepted"),
        (error: unknown) => error,
      );
    assert.ok(reused instanceof RefereeError);
    assert.equal(reused.codeName, "ALREADY_EXISTS");
    assert.equal(reused.reason, "REQUEST_ID_REUSED");
    assert.deepEqual(reused.fields, ["request_id"]);
  });

  test("a caller without a seat is throttled after its refusals spend the game's budget", async () => {
    const { game, seats } = await newGame("node-test-throttle");
    const spectator = client.seat(game.gameId, game.spectatorToken);
    const reasons: string[] = [];
    let throttled: RefereeError | undefined;
    // The harness starts its server with --refusal-burst REFUSAL_BURST (the default is 60).
    for (let i = 0; i < 200 && throttled === undefined; i++) {
      const error = await spectator.submit({ type: "pass" }).then(
        () => assert.fail("a spectator's action was accepted"),
        (e: unknown) => e,
      );
      assert.ok(error instanceof RefereeError);
      if (error.codeName === "RESOURCE_EXHAUSTED") throttled = error;
      else reasons.push(error.reason);
    }
    assert.ok(throttled, "never throttled");
    assert.equal(throttled.reason, "TOO_MANY_REFUSALS");
    assert.equal(throttled.metadata["refused"], "PERMISSION_DENIED");
    assert.ok(throttled.retryDelay !== undefined && throttled.retryDelay > 0);
    if (server.started) assert.equal(reasons.length, REFUSAL_BURST);
    assert.ok(reasons.length >= 1 && reasons.every((r) => r === "PERMISSION_DENIED"));
    // Seats are never throttled.
    const [acting] = await toActAndWaiting(seats);
    const result = await acting.submit({ type: "pass" });
    assert.equal(result.version, 1);
  });

  test("a request over the server's size limit is REQUEST_TOO_LARGE, naming the limit", async () => {
    // The harness's server keeps the default --max-message-bytes (1 MiB): 1.5 MiB of records.
    const records = Array.from({ length: 1536 }, () => "x".repeat(1024));
    const error = await refusal(
      (async () => {
        for await (const verdict of client.auditRecords(records)) void verdict;
      })(),
    );
    assert.equal(error.codeName, "RESOURCE_EXHAUSTED");
    assert.equal(error.reason, "REQUEST_TOO_LARGE");
    assert.equal(error.metadata["limit"], String(1 << 20));
  });

  test("watch streams events as they happen and stops when the loop breaks", async () => {
    const { game, seats } = await newGame("node-test-watch");
    const [acting] = await toActAndWaiting(seats);
    const watcher = client.session(game.gameId, game.spectatorToken);
    // From version 0 the stream starts with the deal's public events (hand_started,
    // deal_committed), then follows the game as it happens.
    const items = collect(watcher.watch(0), 4);
    // Let the stream open, then act twice.
    await new Promise((resolve) => setTimeout(resolve, 200));
    const result = await acting.submit({ type: "pass" });
    const [next] = await toActAndWaiting(seats);
    await next.submit({ type: "pass" });
    const received = await items;
    assert.equal(received.length, 4);
    const all = received.map((item) => {
      assert.equal(item.type, "event");
      return (item as { event: GameEvent }).event;
    });
    assert.deepEqual(
      all.slice(0, 2).map((e) => [e.kind, e.version]),
      [
        ["hand_started", 0],
        ["deal_committed", 0],
      ],
    );
    const events = all.slice(2);
    assert.deepEqual(events[0], result.events[0]);
    assert.deepEqual(
      events.map((e) => [e.kind, e.version, e["type"]]),
      [
        ["call", 1, "pass"],
        ["call", 2, "pass"],
      ],
    );
    assert.ok(events[1]!.seq > events[0]!.seq);

    // Resuming from a version replays only what came after it.
    const resumed = await collect(seats[0]!.watch(1), 1);
    assert.equal(resumed[0]?.type === "event" && resumed[0].event.version, 2);
  });

  test("an aborted watch throws CANCELLED; per-call signal and metadata", async () => {
    const { game, seats } = await newGame("node-test-watch-abort");
    const controller = new AbortController();
    const items: WatchItem[] = [];
    const watching = (async () => {
      for await (const item of client
        .session(game.gameId, game.spectatorToken)
        .watch(0, 0, { signal: controller.signal })) {
        items.push(item);
      }
    })();
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.equal(items.length, 2, "the deal's events, then the stream waits");
    controller.abort();
    const error = await refusal(watching);
    assert.equal(error.reason, "CANCELLED");

    // An already aborted signal: no call is made.
    const early = await refusal(seats[0]!.view({ signal: AbortSignal.abort() }));
    assert.equal(early.reason, "CANCELLED");
    // Extra metadata does not replace the session's token.
    const view = await seats[0]!.view({ metadata: { authorization: "Bearer nope" } });
    assert.equal(view.game_id, game.gameId);
  });

  test("audit log pages, its check, and AuditRecords verdicts", async () => {
    const { game, seats } = await newGame("node-test-audit");
    const rng = new Rng("node-test-audit");
    for (let n = 0; n < 6; n++) {
      const [acting] = await toActAndWaiting(seats);
      await acting.submit(choose(pick(await acting.legalActions(), rng), rng));
    }
    const adjudicator = client.session(game.gameId, game.adjudicatorToken);
    const all = await adjudicator.auditLog();
    assert.equal(all.length, 6);
    assert.equal(typeof all[0]!.action["type"], "string");
    const page = await adjudicator.auditLog(all[1]!.seq, 3);
    assert.deepEqual(
      page.map((e) => e.seq),
      all.slice(2, 5).map((e) => e.seq),
    );
    assert.deepEqual(await adjudicator.verifyAuditLog(), {
      intact: true,
      entries: 6,
      firstBadSeq: 0,
      detail: "",
    });

    const record = await adjudicator.export();
    const verdicts = [];
    for await (const verdict of client.auditRecords([record, "not json"], { keepGoing: true })) {
      verdicts.push(verdict);
    }
    assert.deepEqual(
      verdicts.map((v) => v.index),
      [0, 1],
    );
    assert.equal(verdicts[0]!.verdict["error"], undefined, JSON.stringify(verdicts[0]));
    assert.match(String(verdicts[1]!.verdict["error"]), /not valid JSON/);

    const variants = await client.listVariants();
    const target = variants.find((v) => v.id === "partnership")!.options.find(
      (o) => o.name === "target",
    );
    assert.equal(typeof target?.defaultValue, "number");
  });

  test("plays a whole partnership game to game over", { timeout: 180_000 }, async () => {
    const { game, seats } = await newGame("node-test-game");
    const spectator = client.session(game.gameId, game.spectatorToken);
    const watched = collect(spectator.watch(0)); // ends by itself when the game is over
    const rng = new Rng("node-test-game");
    const submitted: GameEvent[] = [];
    let view = await seats[0]!.view();
    let actions = 0;
    while (!view.over) {
      assert.ok(actions < 5_000, "the game should end");
      let acted = false;
      for (const seat of seats) {
        const entries = await seat.legalActions();
        if (entries.length === 0) continue;
        const result = await seat.submit(choose(pick(entries, rng), rng));
        assert.equal(result.version, seat.version);
        submitted.push(...result.events);
        view = result.view;
        acted = true;
        actions++;
        break;
      }
      assert.ok(acted, "some seat can act");
    }

    const final = await spectator.view();
    assert.equal(final.over, true);
    assert.ok(final.winner === 0 || final.winner === 1);
    assert.ok(Math.max(...final.scores) >= 300);
    assert.ok(final.hands_completed >= 1);
    for (const seat of seats) assert.deepEqual(await seat.legalActions(), []);
    const afterEnd = await refusal(seats[0]!.submit({ type: "pass" }));
    assert.equal(afterEnd.reason, "GAME_OVER");

    const gameOver = submitted.filter((e) => e.kind === "game_over");
    assert.equal(gameOver.length, 1);
    assert.deepEqual(gameOver[0]!["scores"], final.scores);
    assert.equal(submitted.filter((e) => e.kind === "hand_result").length, final.hands_completed);

    const items = await watched;
    const events = items.flatMap((item) => (item.type === "event" ? [item.event] : []));
    // The stream ended by itself with the game; game_over is among its last events.
    assert.deepEqual(
      events.filter((e) => e.kind === "game_over").map((e) => e["scores"]),
      [final.scores],
    );
    assert.equal(events.at(-1)?.version, final.version);
    assert.equal(events.filter((e) => e.kind === "trick_taken").length, 12 * final.hands_completed);
    for (let i = 1; i < events.length; i++) assert.ok(events[i]!.seq > events[i - 1]!.seq);

    const check = await spectator.verifyAuditLog();
    assert.deepEqual(
      { intact: check.intact, firstBadSeq: check.firstBadSeq, detail: check.detail },
      { intact: true, firstBadSeq: 0, detail: "" },
    );
    assert.ok(check.entries > 0);
    const record = await spectator.export();
    assert.equal(record["variant"], "partnership");
  });
});
