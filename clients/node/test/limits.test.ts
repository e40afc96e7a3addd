// ClientOptions.maxReceiveMessageBytes against a stand-in server (a real one would need a game
// of hundreds of hands): the referee sends responses up to 16 times its --max-message-bytes
// (16 MiB by default), and gRPC's own receive limit is 4 MiB.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import * as grpc from "@grpc/grpc-js";

import type { ExportGameResponse } from "../generated/pinochle/referee/v1/ExportGameResponse";

import {
  MAX_RECEIVE_MESSAGE_BYTES,
  RefereeClient,
  RefereeError,
  receiveLimitOptions,
  toStruct,
} from "../src/index";
import { refereeServiceDefinition } from "./server";

/** A record of about 6 MiB once encoded: more than gRPC's 4 MiB, less than the server's 16. */
const RECORD = {
  format: "pinochle-record/1",
  hands: Array.from({ length: 6_000 }, () => "x".repeat(1_000)),
};

let server: grpc.Server;
let address = "";

before(async () => {
  server = new grpc.Server();
  server.addService(refereeServiceDefinition(), {
    ExportGame(
      _call: grpc.ServerUnaryCall<unknown, ExportGameResponse>,
      callback: grpc.sendUnaryData<ExportGameResponse>,
    ) {
      callback(null, { record: toStruct(RECORD) });
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (error, bound) =>
      error ? reject(error) : resolve(bound),
    ),
  );
  address = `127.0.0.1:${port}`;
});

after(() => server?.forceShutdown());

describe("the receive limit", () => {
  test("the default accepts 16 MiB, the largest response of a server with default settings", () => {
    assert.equal(MAX_RECEIVE_MESSAGE_BYTES, 16 * 1024 * 1024);
    assert.deepEqual(receiveLimitOptions(MAX_RECEIVE_MESSAGE_BYTES), {
      "grpc.max_receive_message_length": 16 * 1024 * 1024,
    });
    assert.deepEqual(receiveLimitOptions(0), {});
  });

  test("a response over gRPC's 4 MiB is received (export() of a long game)", async () => {
    const client = new RefereeClient(address);
    try {
      assert.deepEqual(await client.session("g", "t").export(), RECORD);
    } finally {
      client.close();
    }
  });

  test("maxReceiveMessageBytes sets the limit (gRPC's own 4 MiB refuses that response)", async () => {
    const client = new RefereeClient(address, { maxReceiveMessageBytes: 4 * 1024 * 1024 });
    try {
      const error = await client.session("g", "t").export().then(
        () => assert.fail("received"),
        (e: unknown) => e,
      );
      assert.ok(error instanceof RefereeError, String(error));
      assert.equal(error.codeName, "RESOURCE_EXHAUSTED");
    } finally {
      client.close();
    }
  });
});
