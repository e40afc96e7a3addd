// ClientOptions.keepaliveMs against a real referee process (server.ts), through a relay whose
// open connections can be cut silently: nothing arrives and nothing is refused, as when a
// network or a phone dies, so only the client's pings can tell that the connection is gone.

import assert from "node:assert/strict";
import * as net from "node:net";
import { describe, test } from "node:test";

import { KEEPALIVE_MS, RefereeClient, Rng, keepaliveOptions, type WatchItem } from "../src/index";
import { useServer, type RunningServer } from "./server";
import { act, backlog, lastVersion, until } from "./watching";

/** A TCP relay to `port`; `cut()` drops everything on the connections open now, for good, and
 * closes nothing. Connections made afterwards are relayed normally. */
class SilentNetwork {
  readonly sockets = new Set<{ cut: boolean; ends: net.Socket[] }>();
  private readonly server: net.Server;

  constructor(private readonly target: number) {
    this.server = net.createServer((client) => {
      const upstream = net.connect(this.target, "127.0.0.1");
      const relay = { cut: false, ends: [client, upstream] };
      this.sockets.add(relay);
      client.on("data", (data) => relay.cut || upstream.write(data));
      upstream.on("data", (data) => relay.cut || client.write(data));
      for (const end of relay.ends) {
        end.on("error", () => undefined);
        end.on("close", () => {
          if (!relay.cut) for (const other of relay.ends) other.destroy();
        });
      }
    });
  }

  async listen(): Promise<number> {
    await new Promise<void>((resolve) => this.server.listen(0, "127.0.0.1", resolve));
    return (this.server.address() as net.AddressInfo).port;
  }

  cut(): void {
    for (const relay of this.sockets) relay.cut = true;
  }

  close(): void {
    this.server.close();
    for (const relay of this.sockets) for (const end of relay.ends) end.destroy();
  }
}

let server: RunningServer;
let client: RefereeClient;
useServer((started) => ({ server, client } = started));

describe("keepalive", () => {
  test("the default pings every 30 s while a call is open, within what the server accepts", () => {
    assert.equal(KEEPALIVE_MS, 30_000);
    assert.deepEqual(keepaliveOptions(KEEPALIVE_MS), {
      "grpc.keepalive_time_ms": 30_000,
      "grpc.keepalive_timeout_ms": 10_000,
      "grpc.keepalive_permit_without_calls": 0,
    });
    assert.deepEqual(keepaliveOptions(0), {});
  });

  test("a resumed watch finds a silently cut connection dead and goes on", { timeout: 90_000 }, async () => {
    const port = Number(server.address.split(":").at(-1));
    const network = new SilentNetwork(port);
    const far = new RefereeClient(`127.0.0.1:${await network.listen()}`, { keepaliveMs: 1_000 });
    try {
      const game = await client.createGame({ variant: "partnership", seed: "node-silent" });
      const seats = game.seatTokens.map((token) => client.seat(game.gameId, token));
      const rng = new Rng("silent");
      let version = await act(seats, rng, 3);
      const watcher = far.session(game.gameId, game.seatTokens[2]!);
      const items: WatchItem[] = [];
      const stream = watcher.watch(0, 0, { resume: true });
      const following = (async () => {
        for await (const item of stream) items.push(item);
      })();
      await until(() => lastVersion(items) === version, "the backlog");
      network.cut();
      version = await act(seats, rng, 4);
      await until(() => lastVersion(items) === version, "the events after the cut");
      const fresh = await backlog(client.session(game.gameId, game.seatTokens[2]!).watch(0));
      assert.equal(lastVersion(fresh), version);
      await until(() => items.length >= fresh.length, "the resumed watch");
      assert.deepEqual(items, fresh);
      await stream.return(undefined);
      await following;
    } finally {
      far.close();
      network.close();
    }
  });
});
