// WatchOptions.resume against a real referee process (server.ts) that shuts down and starts
// again: the shutdown ends every WatchGame stream UNAVAILABLE, reason SHUTTING_DOWN, with
// `metadata.after_seq`, and a resumed watch opens it again there and goes on.

import assert from "node:assert/strict";
import { describe, test, type TestContext } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";

import {
  RefereeClient,
  RefereeError,
  Rng,
  type SeatSession,
  type Session,
  type WatchItem,
  type WatchStream,
} from "../src/index";
import { useServer, type RunningServer } from "./server";
import { act, backlog, lastVersion, until } from "./watching";

let server: RunningServer;
let client: RefereeClient;
useServer((started) => ({ server, client } = started));

/** Whether the test can restart the server (not one REFEREE_ADDRESS names). */
function restartable(t: TestContext): boolean {
  if (!server.started) t.skip("needs a server this harness starts (REFEREE_ADDRESS is set)");
  return server.started;
}

/** A partnership game's seats and its spectator. */
async function newGame(seed: string): Promise<{ seats: SeatSession[]; spectator: Session }> {
  const game = await client.createGame({ variant: "partnership", seed });
  return {
    seats: game.seatTokens.map((token) => client.seat(game.gameId, token)),
    spectator: client.session(game.gameId, game.spectatorToken),
  };
}

/** Reads `stream` into `items` in the background; resolves to the error that ended it, if any. */
async function follow(stream: WatchStream, items: WatchItem[]): Promise<RefereeError | undefined> {
  try {
    for await (const item of stream) items.push(item);
  } catch (error) {
    assert.ok(error instanceof RefereeError, `not a RefereeError: ${String(error)}`);
    return error;
  }
  return undefined;
}

function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not settled within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

describe("a watch across a server shutdown", () => {
  test("with resume it goes on after a restart, without a gap or a duplicate", { timeout: 120_000 }, async (t) => {
    if (!restartable(t)) return;
    const { seats, spectator } = await newGame("node-resume-restart");
    const rng = new Rng("resume");
    const version = await act(seats, rng, 6);
    // A seat sees its own cards too; the spectator does not, so its after_seq passes events it
    // was never sent.
    const watchers = [spectator, seats[0]!];
    const received = watchers.map((): WatchItem[] => []);
    const streams = watchers.map((watcher) => watcher.watch(0, 0, { resume: true }));
    const ended = streams.map((stream, i) => follow(stream, received[i]!));
    await until(() => received.every((items) => lastVersion(items) === version), "the backlog");

    await server.restart();
    await client.waitForReady(30_000);
    const later = await act(seats, rng, 4);
    assert.ok(later > version);
    for (const [i, watcher] of watchers.entries()) {
      const fresh = await backlog(watcher.watch(0));
      assert.equal(lastVersion(fresh), later);
      await until(() => received[i]!.length >= fresh.length, "the resumed watch");
      await sleep(200); // time for a duplicate to arrive
      assert.deepEqual(received[i], fresh);
    }
    for (const stream of streams) await within(stream.return(undefined), 2_000, "return()");
    assert.deepEqual(await Promise.all(ended), [undefined, undefined]);
  });

  test("without resume it ends UNAVAILABLE, reason SHUTTING_DOWN, with metadata.after_seq", { timeout: 120_000 }, async (t) => {
    if (!restartable(t)) return;
    const { seats, spectator } = await newGame("node-resume-no");
    const version = await act(seats, new Rng("no-resume"), 3);
    const received: WatchItem[] = [];
    const ended = follow(spectator.watch(0), received);
    await until(() => lastVersion(received) === version, "the backlog");

    await server.restart();
    const error = await within(ended, 10_000, "the watch");
    assert.ok(error, "the watch ended without an error");
    assert.equal(error.codeName, "UNAVAILABLE");
    assert.equal(error.reason, "SHUTTING_DOWN");
    assert.equal(error.version, version);
    const last = received.at(-1);
    assert.ok(last?.type === "event");
    assert.ok(Number(error.metadata["after_seq"]) >= last.event.seq, error.metadata["after_seq"]);
    await client.waitForReady(30_000);
  });

  test("with resume any other refusal is thrown at once", async () => {
    const { seats, spectator } = await newGame("node-resume-refused");
    await act(seats, new Rng("refused"), 1);
    const badToken = client.session(spectator.gameId, "nope").watch(0, 0, { resume: true });
    const unauthenticated = await within(follow(badToken, []), 5_000, "a bad token");
    assert.equal(unauthenticated?.codeName, "UNAUTHENTICATED");
    const beyond = await within(
      follow(spectator.watch(0, 1_000, { resume: true }), []),
      5_000,
      "after_seq beyond the game",
    );
    assert.equal(beyond?.codeName, "INVALID_ARGUMENT");
    assert.deepEqual(beyond?.fields, ["after_seq"]);
  });
});
