// Test harness: a real referee process on a free port with a throw-away database.
//
// REFEREE_SERVE_CMD names the server command (default: the repository venv's
// pinochle-referee, i.e. ../../.venv/bin/pinochle-referee from clients/node); it may carry
// arguments ("python -m referee.cli"), to which `serve --host --port --db --metrics-port` are
// appended. REFEREE_ADDRESS instead points the tests at a server that is already running.

import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { after, before } from "node:test";

import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";

import { BUNDLED_PROTOS_DIR, LOADER_OPTIONS, PROTO_FILE, RefereeClient } from "../src/index";

/** The refusal budget the harness's server starts with (--refusal-burst). */
export const REFUSAL_BURST = 5;

export interface RunningServer {
  address: string;
  /** Whether this harness started the server (false for REFEREE_ADDRESS). */
  started: boolean;
  /** Stops the server gracefully (SIGTERM), leaves it down `downMs`, and starts it again on the
   * same port and database; resolves once it serves (a server this harness started only). */
  restart(downMs?: number): Promise<void>;
  stop(): Promise<void>;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const address = probe.address();
      const port = typeof address === "object" && address !== null ? address.port : 0;
      probe.close(() => resolve(port));
    });
  });
}

/** grpc.health.v1.Health/Check for the whole server, without a generated stub: the request
 * (service "") is the empty message and SERVING is field 1 = 1. */
function healthCheck(address: string, timeoutMs: number): Promise<boolean> {
  const client = new grpc.Client(address, grpc.credentials.createInsecure());
  return new Promise<boolean>((resolve) => {
    client.makeUnaryRequest(
      "/grpc.health.v1.Health/Check",
      () => Buffer.alloc(0),
      (bytes: Buffer) => bytes,
      {},
      new grpc.Metadata(),
      { deadline: Date.now() + timeoutMs },
      (error, response) => {
        client.close();
        resolve(
          !error &&
            response !== undefined &&
            response.length >= 2 &&
            response[0] === 0x08 &&
            response[1] === 0x01,
        );
      },
    );
  });
}

function serveCommand(): string[] {
  const fromEnv = process.env["REFEREE_SERVE_CMD"];
  if (fromEnv && fromEnv.trim()) return fromEnv.trim().split(/\s+/);
  // dist/test/server.js -> clients/node -> ../../.venv/bin/pinochle-referee
  const packageDir = path.resolve(__dirname, "..", "..");
  return [path.resolve(packageDir, "..", "..", ".venv", "bin", "pinochle-referee")];
}

/** A test file's server and a client on it. */
export interface Started {
  server: RunningServer;
  client: RefereeClient;
}

/** Registers the hooks that start a server and a client on it before the calling file's tests
 * (after `setUp`, which may set the server's environment) and stop both after them; `started`
 * hands them to the file. */
export function useServer(started: (running: Started) => void, setUp = (): void => undefined): void {
  let running: Started | undefined;
  before(async () => {
    setUp();
    const server = await startServer();
    running = { server, client: new RefereeClient(server.address) };
    started(running);
  });
  after(async () => {
    running?.client.close();
    await running?.server.stop();
  });
}

export async function startServer(): Promise<RunningServer> {
  const external = process.env["REFEREE_ADDRESS"];
  if (external) {
    return {
      address: external,
      started: false,
      restart: () => Promise.reject(new Error("REFEREE_ADDRESS: the tests cannot restart it")),
      stop: async () => undefined,
    };
  }

  const [command, ...prefix] = serveCommand();
  if (command === undefined || (path.isAbsolute(command) && !existsSync(command))) {
    throw new Error(
      `no referee server at ${command} (run \`make install\`, or set REFEREE_SERVE_CMD)`,
    );
  }
  const folder = mkdtempSync(path.join(tmpdir(), "referee-node-test-"));
  const port = await freePort();
  const address = `127.0.0.1:${port}`;
  const args = [
    ...prefix,
    "serve",
    "--host",
    "127.0.0.1",
    "--port",
    String(port),
    "--db",
    path.join(folder, "test.db"),
    "--metrics-port",
    "0",
    "--grace-seconds",
    "1",
    // Small, so that the throttling test needs few calls (it reads this value).
    "--refusal-burst",
    String(REFUSAL_BURST),
  ];
  let terminate: () => Promise<void>;
  try {
    terminate = await launch(command, args, address);
  } catch (error) {
    rmSync(folder, { recursive: true, force: true });
    throw error;
  }
  return {
    address,
    started: true,
    restart: async (downMs = 0) => {
      await terminate();
      await new Promise((resolve) => setTimeout(resolve, downMs));
      terminate = await launch(command, args, address);
    },
    stop: async () => {
      await terminate();
      rmSync(folder, { recursive: true, force: true });
    },
  };
}

/** Starts `command args` and resolves, once it serves at `address`, to what stops it (SIGTERM,
 * SIGKILL after 10 s) and waits for its exit. */
async function launch(
  command: string,
  args: string[],
  address: string,
): Promise<() => Promise<void>> {
  const child: ChildProcess = spawn(command, args, { stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  const keep = (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-20_000);
  };
  child.stdout?.on("data", keep);
  child.stderr?.on("data", keep);
  let exited = false;
  const exit = new Promise<void>((resolve) => {
    child.once("exit", () => {
      exited = true;
      resolve();
    });
    child.once("error", (error) => {
      output += `\n${error.message}`;
      exited = true;
      resolve();
    });
  });

  const stop = async () => {
    if (!exited) {
      child.kill("SIGTERM");
      const killer = setTimeout(() => child.kill("SIGKILL"), 10_000);
      await exit;
      clearTimeout(killer);
    }
  };

  const deadline = Date.now() + 60_000;
  while (!(await healthCheck(address, 1_000))) {
    if (exited || Date.now() > deadline) {
      await stop();
      throw new Error(`the referee did not become healthy at ${address}:\n${output}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return stop;
}

/** The RefereeService definition as the client loads it, for a stand-in grpc-js server that
 * answers in the referee's place (what a real one never sends: garbled trailers, no answer). */
export function refereeServiceDefinition(): grpc.ServiceDefinition {
  const definition = protoLoader.loadSync(PROTO_FILE, {
    ...LOADER_OPTIONS,
    includeDirs: [BUNDLED_PROTOS_DIR],
  });
  const loaded = grpc.loadPackageDefinition(definition) as unknown as {
    pinochle: { referee: { v1: { RefereeService: grpc.ServiceClientConstructor } } };
  };
  return loaded.pinochle.referee.v1.RefereeService.service;
}
