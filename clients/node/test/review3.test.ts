// Third review of the Node client: what it sends, against a real referee process (server.ts).
// Each test failed before the fix beside it (see the commit that added it).

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import * as grpc from "@grpc/grpc-js";

import { RefereeClient, RefereeError } from "../src/index";
import { useServer } from "./server";

let client: RefereeClient;
useServer((started) => ({ client } = started));

async function refusal(promise: Promise<unknown>): Promise<RefereeError> {
  const caught: unknown = await promise.then(
    () => undefined,
    (error: unknown) => error,
  );
  assert.ok(caught instanceof RefereeError, `not a RefereeError: ${String(caught)}`);
  return caught;
}

describe("Node client review 3", () => {
  test("a game option named __proto__ reaches the server, which names it", async () => {
    // Was: the key set the Struct's prototype, was never sent, and the game was created as if
    // no such option had been given.
    const options = JSON.parse('{"target": 300, "__proto__": 1}') as Record<string, unknown>;
    const refused = await refusal(client.createGame({ variant: "partnership", options }));
    assert.equal(refused.code, grpc.status.INVALID_ARGUMENT);
    assert.deepEqual(refused.fields, ["options.__proto__"]);
  });

  test("strings go as given: a long one with a lone surrogate is refused, a pair is sent", async () => {
    const players = ["\u{1F0A1} ace", "b\u{1D49C}", "c", "d"];
    const game = await client.createGame({ variant: "partnership", seed: "review3", players });
    const record = await client.session(game.gameId, game.adjudicatorToken).export();
    assert.deepEqual(record["players"], players);
    // Was: created, with U+FFFD in the seed's place (protobufjs's Buffer path, 40 characters
    // or more), so the game was dealt from a seed nobody gave.
    const seed = `review3-${"x".repeat(40)}\uD800`;
    await assert.rejects(client.createGame({ variant: "partnership", seed }), (error: unknown) => {
      assert.ok(error instanceof TypeError);
      assert.match(error.message, /^seed holds a lone UTF-16 surrogate \(U\+D800 at index 48\)/);
      return true;
    });
  });

  test("a token read from a file, with its line break, works (unary calls and watch)", async () => {
    // Was: grpc-js threw a plain Error ("Metadata string value ... contains illegal
    // characters") from every call; the Python client strips the token.
    const game = await client.createGame({ variant: "partnership", seed: "review3-token" });
    const seat = client.seat(game.gameId, `${game.seatTokens[1]!}\n`);
    assert.ok((await seat.legalActions()).length > 0);
    await seat.submit({ type: "bid", amount: 250 });
    const spectator = client.session(game.gameId, ` ${game.spectatorToken}\r\n`);
    for await (const item of spectator.watch(0)) {
      assert.equal(item.type, "event");
      break;
    }
  });
});
