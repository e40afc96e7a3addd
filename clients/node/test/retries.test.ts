// The client's retries (gRPC's own, from referee_grpc_service_config.json), and a resumed
// watch's (WatchOptions.resume), against a stand-in server that fails the first attempts with
// UNAVAILABLE and counts what it receives.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { createServer } from "node:net";
import * as path from "node:path";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";

import * as grpc from "@grpc/grpc-js";
import * as googleProtoFiles from "google-proto-files";

import type { WatchGameResponse } from "../generated/pinochle/referee/v1/WatchGameResponse";

import {
  BUNDLED_PROTOS_DIR,
  RefereeClient,
  RefereeError,
  SERVICE_CONFIG_FILE,
  serviceConfig,
  type WatchItem,
  type WatchStream,
} from "../src/index";
import { refereeServiceDefinition } from "./server";

interface Counts {
  submissions: string[]; // the request id of every SubmitAction attempt received
  creations: number;
}

const counts: Counts = { submissions: [], creations: 0 };
let failuresLeft = 0; // SubmitAction attempts still to fail
/** What WatchGame does on each call, in turn: the messages it sends, then the status it ends with
 * (none: OK, the game is over); once the script is spent, UNAVAILABLE at once. */
let watchScript: { send: WatchGameResponse[]; end?: grpc.ServiceError }[] = [];
/** Every WatchGame call received: its request and when. */
let watchCalls: { fromVersion: number; afterSeq: number; at: number }[] = [];
let server: grpc.Server;
let address = "";

function unavailable(): grpc.ServiceError {
  return Object.assign(new Error("the game store failed"), {
    code: grpc.status.UNAVAILABLE,
    details: "the game store failed; retrying with the same request_id is safe",
    metadata: new grpc.Metadata(),
  });
}

/** How the referee ends a WatchGame stream as it stops: UNAVAILABLE, ErrorInfo reason
 * SHUTTING_DOWN, metadata after_seq. */
function shuttingDown(afterSeq: number): grpc.ServiceError {
  const root = googleProtoFiles.loadSync(googleProtoFiles.getProtoPath("rpc", "status.proto"));
  root.loadSync(googleProtoFiles.getProtoPath("rpc", "error_details.proto"));
  const ErrorInfo = root.lookupType("google.rpc.ErrorInfo");
  const Status = root.lookupType("google.rpc.Status");
  const info = { reason: "SHUTTING_DOWN", metadata: { after_seq: String(afterSeq), version: "9" } };
  const details = [
    {
      type_url: "type.googleapis.com/google.rpc.ErrorInfo",
      value: ErrorInfo.encode(ErrorInfo.fromObject(info)).finish(),
    },
  ];
  const code = grpc.status.UNAVAILABLE;
  const message = "the server is shutting down";
  const status = Status.encode(Status.fromObject({ code, message, details })).finish();
  const metadata = new grpc.Metadata();
  metadata.set("grpc-status-details-bin", Buffer.from(status));
  return Object.assign(new Error(message), { code, details: message, metadata });
}

before(async () => {
  server = new grpc.Server();
  server.addService(refereeServiceDefinition(), {
    SubmitAction(
      call: grpc.ServerUnaryCall<{ requestId: string }, unknown>,
      callback: grpc.sendUnaryData<unknown>,
    ) {
      counts.submissions.push(call.request.requestId);
      if (failuresLeft > 0) {
        failuresLeft -= 1;
        callback(unavailable());
      } else {
        callback(null, { version: 1, viewJson: "{}", events: [] });
      }
    },
    CreateGame(_call: grpc.ServerUnaryCall<unknown, unknown>, callback: grpc.sendUnaryData<unknown>) {
      counts.creations += 1;
      callback(unavailable());
    },
    WatchGame(
      call: grpc.ServerWritableStream<{ fromVersion: number; afterSeq: number }, WatchGameResponse>,
    ) {
      const { fromVersion, afterSeq } = call.request;
      watchCalls.push({ fromVersion, afterSeq, at: Date.now() });
      const { send, end } = watchScript.shift() ?? { send: [], end: unavailable() };
      for (const message of send) call.write(message);
      if (end) call.emit("error", end);
      else call.end();
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (error, bound) =>
      error ? reject(error) : resolve(bound),
    ),
  );
  address = `127.0.0.1:${port}`;
});

after(() => {
  server?.forceShutdown();
});

function reset(failures: number): void {
  counts.submissions = [];
  counts.creations = 0;
  failuresLeft = failures;
}

function event(seq: number): WatchGameResponse {
  return { event: { seq, version: seq, kind: "call", audience: "everyone", dataJson: "{}" } };
}

function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not settled within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** How a watch ends: the error it throws, or "done". */
async function ending(stream: WatchStream, items: WatchItem[] = []): Promise<unknown> {
  try {
    for await (const item of stream) items.push(item);
  } catch (error) {
    return error;
  }
  return "done";
}

/** The status name of a submission that must fail; the client is closed afterwards. */
async function failedSubmission(client: RefereeClient, requestId: string): Promise<string> {
  try {
    const error = await client
      .seat("g", "t")
      .submit({ type: "pass" }, { requestId })
      .then(
        () => assert.fail("accepted"),
        (e: unknown) => e,
      );
    assert.ok(error instanceof RefereeError);
    return error.codeName;
  } finally {
    client.close();
  }
}

describe("retries", () => {
  test("a submission answered UNAVAILABLE is sent again with the same request id", async () => {
    reset(2);
    const client = new RefereeClient(address);
    try {
      const result = await client.seat("g", "t").submit({ type: "pass" }, { requestId: "r-1" });
      assert.equal(result.version, 1);
      assert.deepEqual(counts.submissions, ["r-1", "r-1", "r-1"]);
    } finally {
      client.close();
    }
  });

  test("an empty request id is replaced by a fresh one, which the retries share", async () => {
    reset(1);
    const client = new RefereeClient(address);
    try {
      await client.seat("g", "t").submit({ type: "pass" }, { requestId: "" });
      assert.equal(counts.submissions.length, 2);
      assert.notEqual(counts.submissions[0], "");
      assert.equal(counts.submissions[1], counts.submissions[0]);
    } finally {
      client.close();
    }
  });

  test("after four attempts the failure is the answer", async () => {
    reset(10);
    assert.equal(await failedSubmission(new RefereeClient(address), "r-2"), "UNAVAILABLE");
    assert.equal(counts.submissions.length, 4);
  });

  test("without retries the first failure is the answer", async () => {
    reset(1);
    const client = new RefereeClient(address, { retries: false });
    assert.equal(await failedSubmission(client, "r-3"), "UNAVAILABLE");
    assert.deepEqual(counts.submissions, ["r-3"]);
  });

  test("CreateGame, which has no request id, is never retried", async () => {
    reset(0);
    const client = new RefereeClient(address);
    try {
      const error = await client.createGame({ variant: "partnership" }).then(
        () => assert.fail("accepted"),
        (e: unknown) => e,
      );
      assert.ok(error instanceof RefereeError);
      assert.equal(error.codeName, "UNAVAILABLE");
      assert.equal(counts.creations, 1);
    } finally {
      client.close();
    }
  });

  test("a resumed watch opens again after metadata.after_seq, else the last event, else as asked", async () => {
    watchCalls = [];
    watchScript = [
      { send: [], end: unavailable() }, // nothing received, no after_seq: as asked
      { send: [], end: shuttingDown(0) }, // after_seq 0 (nothing sent): as asked
      { send: [event(3), event(4)], end: shuttingDown(6) }, // 5 and 6 were not the caller's
      { send: [], end: unavailable() }, // no after_seq: still after 6
      { send: [{ snapshot: { version: 6, viewJson: "{}" } }], end: unavailable() }, // no seq
      { send: [event(7)], end: unavailable() }, // the last event received
      { send: [] }, // the game is over
    ];
    // Whether each call waits for the server (gRPC's wait-for-ready): only the re-opened ones.
    const waitForReady: boolean[] = [];
    const spy: grpc.Interceptor = (options, nextCall) =>
      new grpc.InterceptingCall(nextCall(options), {
        start: (metadata, listener, next) => {
          waitForReady.push(metadata.getOptions().waitForReady ?? false);
          next(metadata, listener);
        },
      });
    const client = new RefereeClient(address, { channelOptions: { interceptors: [spy] } });
    try {
      const items: WatchItem[] = [];
      const end = await ending(client.session("g", "t").watch(5, 2, { resume: true }), items);
      assert.equal(end, "done");
      assert.deepEqual(
        items.map((item) => (item.type === "event" ? item.event.seq : item.type)),
        [3, 4, "snapshot", 7],
      );
      assert.deepEqual(
        watchCalls.map((call) => [call.fromVersion, call.afterSeq]),
        [[5, 2], [5, 2], [5, 2], [5, 6], [5, 6], [5, 6], [5, 7]],
      );
      assert.deepEqual(waitForReady, [false, true, true, true, true, true, true]);
      // 50 ms, doubling while nothing arrives, back to 50 ms once something does: 50, 100, 50,
      // 100, 50, 50 (without the reset the fifth would be 800).
      const waits = watchCalls.slice(1).map((call, i) => call.at - watchCalls[i]!.at);
      assert.ok(waits.every((ms) => ms >= 45), `${waits}`);
      assert.ok(waits[1]! >= 95 && waits[3]! >= 95, `${waits}`);
      assert.ok(waits[4]! < 400, `${waits}`);
    } finally {
      client.close();
    }
  });

  test("a resumed watch leaves out what fromVersion excludes (sent when afterSeq is 0 only)", async () => {
    watchCalls = [];
    watchScript = [
      { send: [], end: shuttingDown(4) }, // events up to 4 handled, none after version 5
      { send: [event(5), event(6)] }, // the server no longer filters by version
    ];
    const client = new RefereeClient(address);
    try {
      const items: WatchItem[] = [];
      const end = await ending(client.session("g", "t").watch(5, 0, { resume: true }), items);
      assert.equal(end, "done");
      assert.deepEqual(
        items.map((item) => item.type === "event" && item.event.version),
        [6],
      );
      assert.deepEqual(
        watchCalls.map((call) => [call.fromVersion, call.afterSeq]),
        [[5, 0], [5, 4]],
      );
    } finally {
      client.close();
    }
  });

  test("a resumed watch's deadlineMs bounds the whole watch, not each re-opening", async () => {
    watchCalls = [];
    // Each opening sends an event and fails UNAVAILABLE at once (as when the server keeps
    // restarting): given afresh to each opening, the deadline was never reached.
    watchScript = Array.from({ length: 200 }, (_, i) => ({
      send: [event(i + 1)],
      end: unavailable(),
    }));
    const deadlines: number[] = [];
    const spy: grpc.Interceptor = (options, nextCall) => {
      deadlines.push(Number(options.deadline));
      return new grpc.InterceptingCall(nextCall(options));
    };
    const client = new RefereeClient(address, { channelOptions: { interceptors: [spy] } });
    try {
      const items: WatchItem[] = [];
      const start = Date.now();
      const watch = client.session("g", "t").watch(0, 0, { resume: true, deadlineMs: 500 });
      const error = await within(ending(watch, items), 2_000, "the resumed watch");
      const elapsed = Date.now() - start;
      assert.ok(error instanceof RefereeError, String(error));
      assert.equal(error.codeName, "DEADLINE_EXCEEDED");
      assert.ok(elapsed >= 450 && elapsed < 1_500, `${elapsed} ms`);
      assert.ok(items.length >= 3, `${items.length} events`); // it did resume, several times
      // The last opening may meet the deadline before the server sees it: one more at most.
      assert.ok(
        deadlines.length >= watchCalls.length && deadlines.length <= watchCalls.length + 1,
        `${deadlines.length} openings, ${watchCalls.length} seen by the server`,
      );
      // Every opening has the first one's deadline.
      assert.ok(deadlines.every((at) => Math.abs(at - deadlines[0]!) <= 5), `${deadlines}`);
      assert.ok(Math.abs(deadlines[0]! - (start + 500)) <= 50, `${deadlines[0]! - start}`);
    } finally {
      client.close();
      watchScript = [];
    }
  });

  test("a resumed watch stops at once while it waits to open again (backoff, or the server)", async () => {
    watchScript = []; // every WatchGame fails: 50, 100, ... 800 ms, then 1 600 ms until 3 150 ms
    const port = await new Promise<number>((resolve) => {
      const probe = createServer().listen(0, "127.0.0.1", () => {
        const bound = probe.address();
        probe.close(() => resolve(typeof bound === "object" && bound !== null ? bound.port : 0));
      });
    });
    const up = new RefereeClient(address);
    const down = new RefereeClient(`127.0.0.1:${port}`); // waits for a server that never comes
    try {
      // On each client, one watch to abort and one to return().
      const controller = new AbortController();
      const aborted = [up, down].map((client) =>
        ending(client.session("g", "t").watch(0, 0, { resume: true, signal: controller.signal })),
      );
      const returned = [up, down].map((client) =>
        client.session("g", "t").watch(0, 0, { resume: true }),
      );
      const pending = returned.map((stream) => stream.next());
      await sleep(1_700);
      controller.abort();
      for (const stream of returned) await within(stream.return(undefined), 500, "return()");
      for (const next of pending) assert.deepEqual(await next, { done: true, value: undefined });
      for (const ended of aborted) {
        const error = await within(ended, 500, "the aborted watch");
        assert.ok(error instanceof RefereeError, String(error));
        assert.equal(error.codeName, "CANCELLED");
      }
    } finally {
      up.close();
      down.close();
    }
  });

  test("the bundled service config is the repository's", () => {
    const repository = path.resolve(__dirname, "..", "..", "..", "..", "protos", SERVICE_CONFIG_FILE);
    assert.equal(serviceConfig(BUNDLED_PROTOS_DIR), readFileSync(repository, "utf8"));
  });

  test("calls are balanced round robin, with or without retries", () => {
    const roundRobin = [{ round_robin: {} }];
    const full = JSON.parse(serviceConfig(BUNDLED_PROTOS_DIR));
    assert.deepEqual(full.loadBalancingConfig, roundRobin);
    assert.ok(full.methodConfig.length > 0);
    assert.deepEqual(JSON.parse(serviceConfig(BUNDLED_PROTOS_DIR, false)), {
      loadBalancingConfig: roundRobin,
    });
  });
});
