// The typed RulesService methods (scoreMeld, legalPlays, trickWinner, trickPoints, scoreHand)
// against a real referee process (see server.ts). The expected answers are the reference engine's
// (referee.query.answer_query on the same queries, as tests/test_client_rules.py checks them).

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import * as grpc from "@grpc/grpc-js";

import { RefereeClient, RefereeError, type HandScore, type MeldResult } from "../src/index";
import { useServer, type RunningServer } from "./server";

let server: RunningServer;
let client: RefereeClient;
useServer((started) => ({ server, client } = started));

/** The refusal of a rules query: INVALID_ARGUMENT naming exactly `field`. */
async function refusedOn(promise: Promise<unknown>, field: string): Promise<RefereeError> {
  let caught: unknown;
  try {
    await promise;
  } catch (error) {
    caught = error;
  }
  assert.ok(caught instanceof RefereeError, `not a RefereeError: ${String(caught)}`);
  assert.equal(caught.code, grpc.status.INVALID_ARGUMENT);
  assert.equal(caught.codeName, "INVALID_ARGUMENT");
  assert.equal(caught.reason, "INVALID_ARGUMENT");
  assert.deepEqual(caught.fields, [field]);
  return caught;
}

describe("rules queries through the Node client", () => {
  test("scoreMeld", async () => {
    const run: MeldResult = await client.scoreMeld({
      variant: "partnership",
      hand: ["AH", "10H", "KH", "QH", "JH", "9H"],
      trump: "H",
    });
    assert.deepEqual(run, {
      total: 160,
      melds: [
        { name: "run", level: 1, points: 150, cards: ["AH", "10H", "KH", "QH", "JH"] },
        { name: "dix", level: 1, points: 10, cards: ["9H"] },
      ],
    });
    const withOptions = await client.scoreMeld({
      variant: "partnership",
      options: { run_counts_its_royal_marriage: true },
      hand: ["AH", "10H", "KH", "QH", "JH", "9H"],
      trump: "H",
    });
    assert.equal(withOptions.total, 200);
    assert.deepEqual(
      withOptions.melds.map((m) => [m.name, m.points]),
      [
        ["run", 190],
        ["dix", 10],
      ],
    );
    const twoHanded = await client.scoreMeld({
      variant: "two-handed",
      hand: ["KS", "QS", "QS", "JD", "JD", "AS", "10S"],
      trump: "S",
    });
    assert.deepEqual(twoHanded, {
      total: 120,
      melds: [
        { name: "royal_marriage", level: 1, points: 40, cards: ["KS", "QS"] },
        { name: "pinochle", level: 2, points: 80, cards: ["QS", "QS", "JD", "JD"] },
      ],
    });
    assert.deepEqual(await client.scoreMeld({ variant: "cutthroat", hand: [], trump: "D" }), {
      total: 0,
      melds: [],
    });

    await refusedOn(
      client.scoreMeld({ variant: "partnership", hand: ["AH", "ZZ"], trump: "H" }),
      "hand[1]",
    );
    await refusedOn(
      client.scoreMeld({ variant: "partnership", hand: ["AH"], trump: "X" as "H" }),
      "trump",
    );
    await refusedOn(
      client.scoreMeld({ variant: "partnership", options: { target: -1 }, hand: [], trump: "H" }),
      "options.target",
    );
  });

  test("legalPlays", async () => {
    assert.deepEqual(
      await client.legalPlays({
        variant: "partnership",
        hand: ["AS", "10S", "KH", "9D", "QC"],
        trick: ["QS", "AD"],
        trump: "D",
      }),
      ["AS", "10S"],
    );
    const hand = ["AS", "9S", "AH", "JD"];
    const trick = ["KS", "10S", "QS"]; // the partner (opposite: trick[1]) wins with the 10
    const noHead = { head_over_partner: false };
    assert.deepEqual(
      await client.legalPlays({ variant: "partnership", options: noHead, hand, trick, trump: "D" }),
      ["AS"],
    );
    // With head_over_partner off, the partner's winning card frees the player from heading it.
    assert.deepEqual(
      await client.legalPlays({
        variant: "partnership",
        options: noHead,
        hand,
        trick,
        trump: "D",
        seatOfPartnerInTrick: 1,
      }),
      ["AS", "9S"],
    );
    const twoHanded = { variant: "two-handed", hand: ["KS", "9S", "AH", "JD"], trick: ["AS"] };
    assert.deepEqual(await client.legalPlays({ ...twoHanded, trump: "H", phase: "stock" }), [
      "KS",
      "9S",
      "AH",
      "JD",
    ]);
    assert.deepEqual(await client.legalPlays({ ...twoHanded, trump: "H" }), ["KS", "9S"]);

    await refusedOn(
      client.legalPlays({ variant: "partnership", hand: ["AS"], trick: ["QS", "AQ"], trump: "H" }),
      "trick[1]",
    );
    await refusedOn(
      client.legalPlays({
        variant: "partnership",
        hand: ["AS"],
        trick: ["QS"],
        trump: "H",
        seatOfPartnerInTrick: 3,
      }),
      "seat_of_partner_in_trick",
    );
    await refusedOn(
      client.legalPlays({
        variant: "partnership",
        hand: ["AS"],
        trick: [],
        trump: "H",
        phase: "stock",
      }),
      "phase",
    );
  });

  test("trickWinner", async () => {
    assert.equal(
      await client.trickWinner({
        variant: "partnership",
        trick: ["KS", "AS", "9H", "AS"],
        trump: "H",
      }),
      2,
    );
    assert.equal(
      await client.trickWinner({ variant: "cutthroat", trick: ["KS", "AS", "AS"], trump: "D" }),
      1,
    );
    assert.equal(
      await client.trickWinner({ variant: "two-handed", trick: ["9C", "QC"], trump: "C" }),
      1,
    );

    await refusedOn(client.trickWinner({ variant: "partnership", trick: [], trump: "H" }), "trick");
    await refusedOn(
      client.trickWinner({ variant: "no-such-variant", trick: ["AS"], trump: "H" }),
      "variant",
    );
  });

  test("trickPoints", async () => {
    assert.equal(
      await client.trickPoints({ variant: "partnership", cards: ["AS", "10S", "KS", "QS"] }),
      30,
    );
    assert.equal(
      await client.trickPoints({
        variant: "partnership",
        cards: ["QS", "JS", "9S", "9H"],
        last: true,
      }),
      10,
    );
    assert.equal(await client.trickPoints({ variant: "two-handed", cards: ["AS", "KS"] }), 15);
    assert.equal(
      await client.trickPoints({
        variant: "partnership",
        options: { count_scheme: "classic_11", last_trick_bonus: 25 },
        cards: ["AS", "10S", "KS", "QS"],
        last: true,
      }),
      53,
    );

    await refusedOn(client.trickPoints({ variant: "partnership", cards: ["ZZ"] }), "cards[0]");
    await refusedOn(client.trickPoints({ variant: "no-such-variant", cards: ["AS"] }), "variant");
  });

  test("scoreHand", async () => {
    const figures = { meld: [20, 100, 40, 60], points: [90, 160], tricks: [4, 8] };
    const made: HandScore = await client.scoreHand({
      variant: "partnership",
      bid: 250,
      declarer: 1,
      ...figures,
    });
    assert.deepEqual(made, { delta: [150, 320], saved: [true, true] });
    assert.deepEqual(
      await client.scoreHand({
        variant: "partnership",
        bid: 250,
        declarer: 1,
        conceded: true,
        ...figures,
      }),
      { delta: [60, -250], saved: [true, false] },
    );
    assert.deepEqual(
      await client.scoreHand({
        variant: "partnership",
        bid: 300,
        declarer: 0,
        dix: [10, 0, 0, 0],
        ...figures,
      }),
      { delta: [-300, 320], saved: [true, true] },
    );
    assert.deepEqual(
      await client.scoreHand({ variant: "partnership-no-bid", ...figures, tricks: [4, 0] }),
      { delta: [150, 160], saved: [true, false] },
    );
    assert.deepEqual(
      await client.scoreHand({
        variant: "two-handed",
        meld: [40, 10],
        points: [150, 100],
        tricks: [6, 6],
      }),
      { delta: [190, 110], saved: [true, true] },
    );

    await refusedOn(
      client.scoreHand({
        variant: "partnership",
        bid: 250,
        declarer: 1,
        ...figures,
        meld: [0, 0, 0],
      }),
      "meld",
    );
    await refusedOn(client.scoreHand({ variant: "partnership", declarer: 1, ...figures }), "bid");
  });
});
