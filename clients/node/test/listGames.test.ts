// listGames and allGames (ListGames) against a real referee process (see server.ts) that has an
// adjudicator and a creator credential: pages of public game summaries, the filters, and who may
// list. tests/test_list_games.py checks the server's side in full.

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { RefereeClient, RefereeError, type GameSummary, type GamesPage } from "../src/index";
import { useServer, type RunningServer } from "./server";

const ADJUDICATOR = "list-games-node-adjudicator-credential";
const CREATOR = "list-games-node-creator-credential";

let server: RunningServer;
let client: RefereeClient;
useServer(
  (started) => ({ server, client } = started),
  () => {
    // The child inherits them: a server with both credentials (each test file has its own).
    process.env["PINOCHLE_REFEREE_ADJUDICATOR_TOKEN"] = ADJUDICATOR;
    process.env["PINOCHLE_REFEREE_CREATOR_TOKEN"] = CREATOR;
  },
);

async function refusal(promise: Promise<unknown>): Promise<RefereeError> {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof RefereeError, `not a RefereeError: ${String(error)}`);
    return error;
  }
  assert.fail("the call was not refused");
}

async function collect(games: AsyncIterable<GameSummary>): Promise<string[]> {
  const ids: string[] = [];
  for await (const game of games) ids.push(game.gameId);
  return ids;
}

describe("listGames through the Node client", () => {
  test("pages, filters, and only the server's credentials", async (t) => {
    if (!server.started) {
      t.skip("needs a server this harness starts with its credentials (REFEREE_ADDRESS is set)");
      return;
    }
    const named = await client.createGame({
      variant: "cutthroat",
      seed: "node-list-0",
      players: ["Ann", "Bo", "Cy"],
      creatorToken: CREATOR,
    });
    const others: string[] = [];
    for (const i of [1, 2, 3]) {
      const game = await client.createGame({
        variant: "partnership",
        seed: `node-list-${i}`,
        creatorToken: CREATOR,
      });
      others.push(game.gameId);
    }

    const page: GamesPage = await client.listGames(CREATOR, { pageSize: 2 });
    assert.equal(page.games.length, 2);
    assert.notEqual(page.nextPageToken, "");
    const first = page.games[0]!;
    assert.deepEqual(Object.keys(first).sort(), [
      "createdAt",
      "gameId",
      "lastActiveAt",
      "over",
      "playerNames",
      "variant",
      "version",
    ]);
    assert.equal(first.gameId, named.gameId);
    assert.equal(first.variant, "cutthroat");
    assert.equal(first.version, 0);
    assert.equal(first.over, false);
    assert.deepEqual(first.playerNames, ["Ann", "Bo", "Cy"]);
    assert.equal(typeof first.createdAt?.seconds, "number");
    assert.ok((first.createdAt?.seconds ?? 0) > 1_700_000_000);
    assert.deepEqual(first.lastActiveAt, first.createdAt);
    assert.deepEqual(page.games[1]!.playerNames, []);

    const rest = await client.listGames(ADJUDICATOR, { pageToken: page.nextPageToken });
    assert.deepEqual(
      rest.games.map((game) => game.gameId),
      others.slice(1),
    );
    assert.equal(rest.nextPageToken, "");

    assert.deepEqual(await collect(client.allGames(CREATOR, { pageSize: 1 })), [
      named.gameId,
      ...others,
    ]);
    assert.deepEqual(
      await collect(
        client.allGames(ADJUDICATOR, { variant: "cutthroat", state: "GAME_STATE_IN_PROGRESS" }),
      ),
      [named.gameId],
    );
    assert.deepEqual(await collect(client.allGames(CREATOR, { state: "GAME_STATE_OVER" })), []);

    const seat = await refusal(client.listGames(named.seatTokens[0]!));
    assert.equal(seat.codeName, "PERMISSION_DENIED");
    const gameAdjudicator = await refusal(client.listGames(named.adjudicatorToken));
    assert.equal(gameAdjudicator.codeName, "PERMISSION_DENIED");
    const none = await refusal(client.listGames(""));
    assert.equal(none.codeName, "UNAUTHENTICATED");
    const badToken = await refusal(client.listGames(CREATOR, { pageToken: "nope" }));
    assert.equal(badToken.codeName, "INVALID_ARGUMENT");
    assert.deepEqual(badToken.fields, ["page_token"]);
    const badSize = await refusal(client.listGames(CREATOR, { pageSize: -1 }));
    assert.deepEqual(badSize.fields, ["page_size"]);
    await assert.rejects(client.listGames(CREATOR, { pageSize: 1.5 }), /pageSize/);
  });
});
