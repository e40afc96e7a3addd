// Second review of the Node client: each test failed before the fix beside it (see the commit
// that added it), against a real referee process (server.ts) or a stand-in server that answers
// as no referee would.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import * as grpc from "@grpc/grpc-js";
import * as googleProtoFiles from "google-proto-files";

import {
  RefereeClient,
  RefereeError,
  actionToProto,
  type Action,
  type WatchItem,
  type WatchStream,
} from "../src/index";
import { refereeServiceDefinition, useServer, type RunningServer } from "./server";
import { until } from "./watching";

let server: RunningServer;
let client: RefereeClient;
useServer((started) => ({ server, client } = started));

/** A stand-in RefereeService: ListVariants and WatchGame answer as `behaviour` says. */
let behaviour: "hang" | "garbled" = "hang";
let standIn: grpc.Server;
let standInAddress = "";

/** A refusal whose grpc-status-details-bin trailer is not a google.rpc.Status (a proxy or a
 * server of another kind may send anything there). */
function garbled(): grpc.ServiceError {
  const metadata = new grpc.Metadata();
  metadata.set("grpc-status-details-bin", Buffer.from([0xff, 0xff, 0xff, 0x01, 0x02]));
  return Object.assign(new Error("garbled"), {
    code: grpc.status.FAILED_PRECONDITION,
    details: "refused, with a trailer nobody can decode",
    metadata,
  });
}

before(async () => {
  standIn = new grpc.Server();
  standIn.addService(refereeServiceDefinition(), {
    ListVariants(_call: grpc.ServerUnaryCall<unknown, unknown>, callback: grpc.sendUnaryData<unknown>) {
      if (behaviour === "garbled") callback(garbled());
      // "hang": never answers
    },
    WatchGame(call: grpc.ServerWritableStream<unknown, unknown>) {
      if (behaviour === "garbled") call.emit("error", garbled());
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    standIn.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (error, bound) =>
      error ? reject(error) : resolve(bound),
    ),
  );
  standInAddress = `127.0.0.1:${port}`;
});

after(() => standIn?.forceShutdown());

function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not settled within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** How a stream ends: the error it throws, or "done". */
async function ending<T>(stream: AsyncIterable<T>, items: T[] = []): Promise<unknown> {
  try {
    for await (const item of stream) items.push(item);
  } catch (error) {
    return error;
  }
  return "done";
}

/** How a promise settles: its error, or "resolved". */
function settling(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => "resolved",
    (error: unknown) => error,
  );
}

function assertCancelled(error: unknown, what: string): void {
  assert.ok(error instanceof RefereeError, `${what}: not a RefereeError: ${String(error)}`);
  assert.equal(error.codeName, "CANCELLED", `${what}: ${error.message}`);
}

describe("Node client review 2", () => {
  test("close() ends the calls open on the client, as the Python client's close() does", async () => {
    const game = await client.createGame({ variant: "partnership", seed: "review2-close" });
    const closing = new RefereeClient(server.address);
    behaviour = "hang";
    const hung = new RefereeClient(standInAddress, { deadlineMs: 0 });
    try {
      const spectator = closing.session(game.gameId, game.spectatorToken);
      const watches: WatchStream[] = [spectator.watch(0), spectator.watch(0, 0, { resume: true })];
      const received = watches.map((): WatchItem[] => []);
      const watchesEnded = watches.map((stream, i) => ending(stream, received[i]));
      await until(() => received.every((items) => items.length > 0), "the deal's events");
      await hung.waitForReady(10_000);
      const unaryEnded = settling(hung.listVariants());
      // A watch follows its game until it ends: closing the client must end it, or the
      // process never exits (and the resumed one goes on for ever).
      closing.close();
      hung.close();
      const [plain, resumed] = await within(Promise.all(watchesEnded), 5_000, "the watches");
      assertCancelled(plain, "a watch open at close()");
      assertCancelled(resumed, "a resumed watch open at close()");
      assertCancelled(await within(unaryEnded, 5_000, "the unary call"), "a unary call");
    } finally {
      closing.close();
      hung.close();
    }
  });

  test("a refusal whose status details cannot be decoded is still a RefereeError (unary, stream)", async () => {
    behaviour = "garbled";
    const other = new RefereeClient(standInAddress, { retries: false });
    // Decoding threw inside grpc-js's callback: an uncaught exception (which ends a process
    // without a handler) and a promise that never settles.
    const uncaught: unknown[] = [];
    const keep = (error: unknown) => uncaught.push(error);
    process.prependListener("uncaughtException", keep);
    try {
      for (const ended of [
        settling(other.listVariants()),
        ending(other.session("g", "t").watch(0)),
      ]) {
        const error = await within(ended, 5_000, "the refused call");
        assert.ok(error instanceof RefereeError, `not a RefereeError: ${String(error)}`);
        assert.equal(error.codeName, "FAILED_PRECONDITION");
        assert.equal(error.reason, "FAILED_PRECONDITION");
        assert.equal(error.details, "refused, with a trailer nobody can decode");
      }
      assert.deepEqual(uncaught, []);
    } finally {
      process.removeListener("uncaughtException", keep);
      other.close();
    }
  });

  test("a status detail that cannot be decoded is left out; the others are read", () => {
    const root = googleProtoFiles.loadSync(googleProtoFiles.getProtoPath("rpc", "status.proto"));
    root.loadSync(googleProtoFiles.getProtoPath("rpc", "error_details.proto"));
    const BadRequest = root.lookupType("google.rpc.BadRequest");
    const Status = root.lookupType("google.rpc.Status");
    const details = [
      { type_url: "type.googleapis.com/google.rpc.ErrorInfo", value: Buffer.from([0xff, 0xff]) },
      {
        type_url: "type.googleapis.com/google.rpc.BadRequest",
        value: BadRequest.encode(
          BadRequest.fromObject({ fieldViolations: [{ field: "action.card", description: "?" }] }),
        ).finish(),
      },
    ];
    const code = grpc.status.INVALID_ARGUMENT;
    const metadata = new grpc.Metadata();
    metadata.set(
      "grpc-status-details-bin",
      Buffer.from(Status.encode(Status.fromObject({ code, message: "bad", details })).finish()),
    );
    const error = RefereeError.from(
      Object.assign(new Error("bad"), { code, details: "bad", metadata }),
    );
    assert.equal(error.reason, "INVALID_ARGUMENT");
    assert.deepEqual(error.fields, ["action.card"]);
  });

  test("an A.4 action's optional fields given as null are left out, as the server reads them", async () => {
    // RULES.md A.4 / decode_action: "an optional field given as null is the same as leaving it
    // out"; Python's action_from_json reads it so. An action parsed from JSON may carry them.
    const sent = [
      { type: "meld", cards: ["KH", "QH"], melds: null, points: null, name: null },
      { type: "pass", help: null },
    ] as unknown as Action[];
    assert.deepEqual(actionToProto(sent[0]!), { meld: { cards: ["KH", "QH"] } });
    assert.deepEqual(actionToProto(sent[1]!), { passTurn: { help: false } });
    const game = await client.createGame({ variant: "two-handed", seed: "review2-nulls" });
    const seat = client.seat(game.gameId, game.seatTokens[0]!);
    for (const action of sent) {
      await seat.submit(action).catch((error: unknown) => {
        assert.ok(error instanceof RefereeError, String(error)); // refused, and audited
      });
    }
    const log = await client.session(game.gameId, game.adjudicatorToken).auditLog();
    assert.deepEqual(
      log.map((entry) => entry.action),
      [{ type: "meld", cards: ["KH", "QH"] }, { type: "pass" }],
    );
  });

  test("close() stops a resumed watch that waits to open again", async () => {
    // Nothing listens there: the resumed watch waits (its backoff, then gRPC's wait-for-ready)
    // for a server to open again on.
    const down = new RefereeClient("127.0.0.1:1");
    const ended = ending(down.session("g", "t").watch(0, 0, { resume: true }));
    await new Promise((resolve) => setTimeout(resolve, 300));
    down.close();
    assertCancelled(await within(ended, 5_000, "the resumed watch"), "a resumed watch at close()");
  });
});
