// Plays one whole `partnership` game against a running referee with simple legal bots, printing
// a hand-by-hand log. Once, on purpose, a seat acts out of turn to show a typed RefereeError.
//
//   npm run example -- [host:port]        (or REFEREE_ADDRESS; default 127.0.0.1:50051)

import {
  RefereeClient,
  RefereeError,
  type GameEvent,
  type SeatSession,
  type SubmitResult,
  type WatchItem,
} from "./client";
import { Rng, choose, pick } from "./bot";

const VARIANT = "partnership";
const OPTIONS = { target: 300 };
const SEED = "node-example";

function list(value: unknown): string {
  return Array.isArray(value) ? `[${value.join(", ")}]` : String(value);
}

/**
 * Per-seat figures (the `hand_result` event's `meld`) added up per side: a team in the
 * partnership variants (seat % 2), a seat otherwise, as the event's card points, deltas and
 * scores are counted and as the Python demo reports them.
 */
export function bySide(perSeat: number[], sides: number): number[] {
  const totals = new Array<number>(sides).fill(0);
  perSeat.forEach((value, seat) => {
    totals[seat % sides] = (totals[seat % sides] ?? 0) + value;
  });
  return totals;
}

/**
 * The log's lines, event by event. It keeps the hand's bid-or-redeal calls (from the `call`
 * events) so that a redeal says what led to it: a round in which everyone passed
 * (`all_pass: "redeal"`), or one with a bid-or-redeal call (`allow_bid_or_redeal`, RULES.md A.7
 * item 2), in which not everyone passed. This example's own options never redeal: partnership's
 * default `all_pass` is `dealer_stuck`, under which the dealer may not pass when everyone else has.
 */
export class HandLog {
  private bidOrRedeal: number[] = [];

  lines(event: GameEvent): string[] {
    switch (event.kind) {
      case "hand_started":
        this.bidOrRedeal = [];
        return [`hand ${event["hand"]}: dealer seat ${event["dealer"]}`];
      case "call":
        if (event["type"] === "bid_or_redeal") this.bidOrRedeal.push(Number(event["seat"]));
        return []; // the calls themselves are too fine-grained for this log
      case "redeal": {
        const callers = this.bidOrRedeal;
        if (callers.length === 0) return ["  everyone passed: redeal"];
        const who = callers.length === 1 ? `seat ${callers[0]}` : `seats ${callers.join(", ")}`;
        return [`  no bid, bid-or-redeal called by ${who}: redeal`];
      }
      case "contract":
        return [`  contract: seat ${event["declarer"]} at ${event["bid"]}`];
      case "trump_declared":
        return [`  trump: ${event["suit"]} (named by seat ${event["seat"]})`];
      case "cards_passed":
        return [`  seat ${event["from"]} passes ${event["count"]} cards to seat ${event["to"]}`];
      case "meld_scored":
        return [`  seat ${event["seat"]} melds ${event["points"]}`];
      case "conceded":
        return [`  seat ${event["seat"]} concedes`];
      case "hand_result": {
        const declarer = event["declarer"];
        const delta = event["delta"] as number[];
        let outcome = "";
        if (typeof declarer === "number") {
          const side = declarer % delta.length; // partnership: seats 0 and 2 are side 0
          outcome =
            (delta[side] ?? 0) < 0 ? ` (side ${side} set)` : ` (side ${side} made ${event["bid"]})`;
        }
        const meld = bySide(event["meld"] as number[], delta.length);
        return [
          `  result: meld ${list(meld)}, card points ${list(event["points"])}, ` +
            `delta ${list(delta)}${outcome}`,
          `  scores after hand ${event["hand"]}: ${list(event["scores"])}`,
        ];
      }
      case "game_over":
        return [`game over: side ${event["winner"]} wins, final scores ${list(event["scores"])}`];
      default:
        return []; // cards played, tricks: too fine-grained for this log
    }
  }
}

/** Act out of turn once and show how a client branches on the typed error. */
async function showRefusal(seats: SeatSession[]): Promise<void> {
  for (const [number, seat] of seats.entries()) {
    if ((await seat.legalActions()).length > 0) continue;
    try {
      await seat.submit({ type: "pass" });
      console.log(`  (seat ${number}'s out-of-turn pass was accepted?!)`);
    } catch (error) {
      if (!(error instanceof RefereeError)) throw error;
      switch (error.reason) {
        case "NOT_YOUR_TURN":
        case "WRONG_PHASE":
          console.log(
            `  deliberate mistake: seat ${number} passes out of turn -> RefereeError ` +
              `code=${error.codeName} reason=${error.reason} version=${error.version} ` +
              `fields=${list(error.fields)}`,
          );
          console.log(`    server says: ${error.details}`);
          break;
        case "STALE_VERSION":
          console.log(`  stale: the game is at version ${error.version}`);
          break;
        default:
          throw error;
      }
    }
    return;
  }
}

async function countEvents(stream: AsyncIterable<WatchItem>) {
  let events = 0;
  let snapshots = 0;
  const kinds = new Map<string, number>();
  for await (const item of stream) {
    if (item.type === "snapshot") {
      snapshots++;
      continue;
    }
    events++;
    kinds.set(item.event.kind, (kinds.get(item.event.kind) ?? 0) + 1);
  }
  return { events, kinds, snapshots };
}

async function play(client: RefereeClient): Promise<void> {
  const rng = new Rng(SEED);
  const game = await client.createGame({ variant: VARIANT, options: OPTIONS, seed: SEED });
  const seats = game.seatTokens.map((token) => client.seat(game.gameId, token));
  const spectator = client.session(game.gameId, game.spectatorToken);
  // A spectator watches from the start, concurrently; its stream ends with the game.
  const watched = countEvents(spectator.watch(0));
  let view = await seats[0]!.view();
  console.log(
    `game ${game.gameId}: ${VARIANT}, ${seats.length} seats, options ${JSON.stringify(OPTIONS)}, seed "${SEED}"`,
  );
  console.log(
    `hand ${view.hand?.number ?? 0}: dealer seat ${view.hand?.dealer ?? view.first_dealer}`,
  );
  await showRefusal(seats);

  const handLog = new HandLog();
  let actions = 0;
  let refused = 0;
  while (!view.over) {
    let result: SubmitResult | undefined;
    for (const seat of seats) {
      const entries = await seat.legalActions();
      if (entries.length === 0) continue;
      try {
        result = await seat.submit(choose(pick(entries, rng), rng));
      } catch (error) {
        // another seat acted first (STALE_VERSION): look again
        if (error instanceof RefereeError && error.reason === "STALE_VERSION") {
          refused++;
          continue;
        }
        throw error;
      }
      break;
    }
    if (result === undefined) throw new Error("no seat could act");
    actions++;
    for (const event of result.events) handLog.lines(event).forEach((line) => console.log(line));
    view = result.view;
  }

  const { events, kinds, snapshots } = await watched;
  console.log(
    `${actions} actions accepted (${refused} stale retries); winner side ${view.winner}, ` +
      `scores ${list(view.scores)} after ${view.hands_completed} hands`,
  );
  console.log(
    `spectator stream: ${events} events (${kinds.get("card_played") ?? 0} cards played, ` +
      `${kinds.get("trick_taken") ?? 0} tricks, ${kinds.get("hand_result") ?? 0} hand results` +
      `${snapshots ? `, ${snapshots} snapshots` : ""}); audit log intact: ${await spectator.auditLogIntact()}`,
  );
}

async function main(): Promise<number> {
  const address = process.argv[2] ?? process.env["REFEREE_ADDRESS"] ?? "127.0.0.1:50051";
  const client = new RefereeClient(address);
  try {
    await client.waitForReady(5_000).catch(() => {
      throw new Error(
        `no referee answers at ${address} (start one with: pinochle-referee serve --port ...)`,
      );
    });
    await play(client);
    return 0;
  } finally {
    client.close();
  }
}

// Run as a script (npm run example), not when a test imports HandLog.
if (require.main === module) {
  main().then(
    (code) => process.exit(code),
    (error: unknown) => {
      console.error(error instanceof Error ? error.message : error);
      process.exit(1);
    },
  );
}
