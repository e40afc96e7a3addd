// The client's retries (gRPC's own, from referee_grpc_service_config.json) against a stand-in
// server that fails the first attempts with UNAVAILABLE and counts what it receives.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import * as path from "node:path";
import { after, before, describe, test } from "node:test";

import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";

import {
  BUNDLED_PROTOS_DIR,
  LOADER_OPTIONS,
  PROTO_FILE,
  RefereeClient,
  RefereeError,
  SERVICE_CONFIG_FILE,
  serviceConfig,
} from "../src/index";

interface Counts {
  submissions: string[]; // the request id of every SubmitAction attempt received
  creations: number;
}

const counts: Counts = { submissions: [], creations: 0 };
let failuresLeft = 0; // SubmitAction attempts still to fail
let server: grpc.Server;
let address = "";

function unavailable(): grpc.ServiceError {
  return Object.assign(new Error("the game store failed"), {
    code: grpc.status.UNAVAILABLE,
    details: "the game store failed; retrying with the same request_id is safe",
    metadata: new grpc.Metadata(),
  });
}

before(async () => {
  const definition = protoLoader.loadSync(PROTO_FILE, {
    ...LOADER_OPTIONS,
    includeDirs: [BUNDLED_PROTOS_DIR],
  });
  const loaded = grpc.loadPackageDefinition(definition) as unknown as {
    pinochle: { referee: { v1: { RefereeService: grpc.ServiceClientConstructor } } };
  };
  server = new grpc.Server();
  server.addService(loaded.pinochle.referee.v1.RefereeService.service, {
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

  test("the bundled service config is the repository's", () => {
    const repository = path.resolve(__dirname, "..", "..", "..", "..", "protos", SERVICE_CONFIG_FILE);
    assert.equal(serviceConfig(BUNDLED_PROTOS_DIR), readFileSync(repository, "utf8"));
  });
});
