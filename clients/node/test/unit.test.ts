// No server: conversions and rich-error decoding.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import * as path from "node:path";
import { test } from "node:test";

import * as grpc from "@grpc/grpc-js";
import * as googleProtoFiles from "google-proto-files";

import {
  RefereeClient,
  RefereeError,
  Rng,
  VIOLATION_CODES,
  actionToProto,
  choose,
  fromStruct,
  isDrawnCardLead,
  pick,
  playable,
  toStruct,
  type JsonObject,
  type LegalEntry,
  type Reason,
} from "../src/index";

/** `data` as a Struct through the wire encoding and back, as the client receives one. */
function throughTheWire(data: Record<string, unknown>): ReturnType<typeof fromStruct> {
  const root = googleProtoFiles.loadSync(googleProtoFiles.getProtoPath("protobuf", "struct.proto"));
  const Struct = root.lookupType("google.protobuf.Struct");
  const wire = Struct.encode(Struct.fromObject(toStruct(data))).finish();
  const decoded = Struct.toObject(Struct.decode(wire), {
    defaults: true,
    oneofs: true,
    enums: String,
  });
  return fromStruct(decoded as never);
}

test("JSON survives a Struct round trip (through the wire encoding)", () => {
  const data = { a: 1, b: [true, null, "x", 2.5], c: { d: [] as number[], e: {} }, f: -0.5 };
  assert.deepEqual(throughTheWire(data), data);
  assert.deepEqual(fromStruct(undefined), {});
});

test("a Struct's keys come out in one order: type first, then sorted, at every depth", () => {
  const decoded = throughTheWire({ step: 10, min: 250, type: "bid", max: 260, z: { y: 1, b: 2 } });
  assert.deepEqual(Object.keys(decoded), ["type", "max", "min", "step", "z"]);
  assert.deepEqual(Object.keys(decoded.z as object), ["b", "y"]);
});

test("actions map to the Action oneof", () => {
  assert.deepEqual(actionToProto({ type: "pass" }), { passTurn: { help: false } });
  assert.deepEqual(actionToProto({ type: "pass", help: true }), { passTurn: { help: true } });
  assert.deepEqual(actionToProto({ type: "bid", amount: 260 }), { bid: { amount: 260 } });
  // protobufjs would send these as 250: a malformed action must not become a legal one.
  for (const amount of [250.5, 2 ** 32 + 250, Number.NaN, Number.POSITIVE_INFINITY]) {
    assert.throws(() => actionToProto({ type: "bid", amount }), TypeError);
  }
  assert.throws(() => actionToProto({ type: "meld", cards: ["AS"], points: 40.5 }), TypeError);
  assert.deepEqual(actionToProto({ type: "draw", turn_up: true }), { draw: { turnUp: true } });
  assert.deepEqual(actionToProto({ type: "concede" }), { concede: {} });
  assert.deepEqual(actionToProto({ type: "meld", cards: ["AS"] }), { meld: { cards: ["AS"] } });
  assert.deepEqual(actionToProto({ type: "meld", cards: [], melds: [], points: 0 }), {
    meld: { cards: [], melds: { items: [] }, points: 0 },
  });
  assert.throws(() => actionToProto({ type: "nap" } as never), TypeError);
  // A field the type does not take was dropped: a plain bid went out (12-03).
  for (const [action, says] of [
    [{ type: "bid", amount: 250, extra: 1 }, /bid takes no field "extra" \(only amount\)/],
    [{ type: "play", card: "AS", seat: 1 }, /play takes no field "seat"/],
    [{ type: "concede", help: true }, /concede takes no field "help" \(no other field\)/],
  ] as const) {
    assert.throws(() => actionToProto(action as never), says);
  }
});

test("the bots leave out the two-handed drawn-card lead, which names no card", () => {
  const drawn: LegalEntry = { type: "play", drawn_card: true };
  const entries: LegalEntry[] = [{ type: "play", card: "AS" }, drawn, { type: "play", card: "9C" }];
  assert.ok(isDrawnCardLead(drawn));
  assert.ok(!isDrawnCardLead({ type: "play", card: "AS" }));
  assert.deepEqual(playable(entries), [entries[0], entries[2]]);
  const rng = new Rng("drawn");
  for (let i = 0; i < 50; i++) assert.ok(!isDrawnCardLead(pick(entries, rng)));
  assert.throws(() => choose(drawn, rng), TypeError);
  assert.throws(() => pick([drawn], rng), RangeError);
});

test("the violation codes are exactly the engine's (RULES.md A.5), in order", () => {
  const source = readFileSync(
    path.resolve(__dirname, "..", "..", "..", "..", "referee", "engine", "errors.py"),
    "utf8",
  );
  const block = /VIOLATION_CODES: Final = \(([^)]*)\)/.exec(source);
  assert.ok(block, "VIOLATION_CODES in referee/engine/errors.py");
  const python = [...block[1]!.matchAll(/"([A-Z_]+)"/g)].map((m) => m[1]);
  assert.deepEqual([...VIOLATION_CODES], python);
});

function richError(
  code: grpc.status,
  message: string,
  reason: string,
  metadata: Record<string, string>,
  field?: string,
) {
  const root = googleProtoFiles.loadSync(googleProtoFiles.getProtoPath("rpc", "status.proto"));
  root.loadSync(googleProtoFiles.getProtoPath("rpc", "error_details.proto"));
  const pack = (name: string, value: object) => {
    const type = root.lookupType(name);
    return {
      type_url: `type.googleapis.com/${name}`,
      value: type.encode(type.fromObject(value)).finish(),
    };
  };
  const details = [pack("google.rpc.ErrorInfo", { reason, domain: "pinochle-referee", metadata })];
  if (field) {
    details.push(
      pack("google.rpc.BadRequest", { fieldViolations: [{ field, description: message }] }),
    );
  }
  const Status = root.lookupType("google.rpc.Status");
  const trailer = new grpc.Metadata();
  trailer.set(
    "grpc-status-details-bin",
    Buffer.from(Status.encode(Status.fromObject({ code, message, details })).finish()),
  );
  return Object.assign(new Error(message), { code, details: message, metadata: trailer });
}

test("RefereeError decodes ErrorInfo and BadRequest from grpc-status-details-bin", () => {
  const error = RefereeError.from(
    richError(
      grpc.status.FAILED_PRECONDITION,
      "seat 2 must follow suit",
      "MUST_FOLLOW_SUIT",
      { version: "41" },
      "action.card",
    ),
  );
  assert.equal(error.reason, "MUST_FOLLOW_SUIT");
  assert.equal(error.code, grpc.status.FAILED_PRECONDITION);
  assert.equal(error.version, 41);
  assert.deepEqual(error.fields, ["action.card"]);
  assert.equal(error.domain, "pinochle-referee");
  assert.ok(error.isViolation());
  assert.ok(error instanceof Error);
  // The union is closed: this is a compile-time check as much as a run-time one.
  const reason: Reason = error.reason;
  assert.equal(reason, "MUST_FOLLOW_SUIT");

  const unknown = RefereeError.from(richError(grpc.status.ABORTED, "?", "SOMETHING_NEW", {}));
  assert.equal(unknown.reason, "ABORTED");
  assert.equal(unknown.rawReason, "SOMETHING_NEW");
  assert.equal(unknown.version, undefined);

  const plain = RefereeError.from(
    Object.assign(new Error("down"), {
      code: grpc.status.UNAVAILABLE,
      details: "down",
      metadata: new grpc.Metadata(),
    }),
  );
  assert.equal(plain.reason, "UNAVAILABLE");
  assert.deepEqual(plain.fields, []);
});

test("a RefereeError's fields cross structuredClone as plain data only, as its docs say", () => {
  const error = new RefereeError({
    code: grpc.status.RESOURCE_EXHAUSTED,
    details: "too many refused actions",
    reason: "TOO_MANY_REFUSALS",
    domain: "pinochle-referee",
    metadata: { version: "7" },
    fields: ["action"],
    retryDelay: 1.5,
  });
  // The limitation (errors.ts, README): an Error clones as a plain Error, its message alone.
  const clone = structuredClone<Error>(error);
  assert.ok(clone instanceof Error);
  assert.ok(!(clone instanceof RefereeError));
  assert.equal(clone.message, error.message);
  assert.deepEqual(Object.keys(clone), []);
  // What the docs give instead: the fields as plain data, every one of them kept.
  const sent = structuredClone({ ...error, message: error.message });
  assert.deepEqual(sent, {
    name: "RefereeError",
    message: "RESOURCE_EXHAUSTED TOO_MANY_REFUSALS: too many refused actions",
    code: grpc.status.RESOURCE_EXHAUSTED,
    codeName: "RESOURCE_EXHAUSTED",
    reason: "TOO_MANY_REFUSALS",
    rawReason: "TOO_MANY_REFUSALS",
    domain: "pinochle-referee",
    metadata: { version: "7" },
    fields: ["action"],
    version: 7,
    retryDelay: 1.5,
    details: "too many refused actions",
  });
});

test("createGame refuses a seed and given deals together (the deals would be dropped)", async () => {
  const client = new RefereeClient("127.0.0.1:1");
  try {
    await assert.rejects(
      client.createGame({ variant: "partnership", seed: "s", givenDeals: [{}] }),
      TypeError,
    );
  } finally {
    client.close();
  }
});

test("a key named __proto__ is a key like any other, to the server and back", () => {
  // JSON.parse makes "__proto__" an own key; an assignment to it sets the prototype instead.
  const text = '{"__proto__": {"x": 1}, "a": {"__proto__": 2, "b": [{"__proto__": null}]}}';
  const data = JSON.parse(text) as Record<string, unknown>;
  assert.deepEqual(Object.keys(toStruct(data).fields ?? {}), ["__proto__", "a"]);
  const back = throughTheWire(data);
  assert.equal(JSON.stringify(back), JSON.stringify(data));
  assert.ok(Object.hasOwn(back, "__proto__"));
  assert.equal(Object.getPrototypeOf(back), Object.prototype);
  assert.equal(Object.getPrototypeOf(back["a"]), Object.prototype);
});

/** A client whose calls would fail UNAVAILABLE: a refusal must come before any sending. */
function unconnected(): RefereeClient {
  return new RefereeClient("127.0.0.1:1", { retries: false, deadlineMs: 5_000 });
}

/** Asserts that `call` fails with a TypeError whose message starts with `start`. */
async function refusedHere(call: () => Promise<unknown>, start: string): Promise<void> {
  await assert.rejects(call, (error: unknown) => {
    assert.ok(error instanceof TypeError, `not a TypeError: ${String(error)}`);
    assert.ok(error.message.startsWith(start), error.message);
    return true;
  });
}

test("a string with a lone UTF-16 surrogate is refused before sending, naming its field", async () => {
  // Was: protobufjs sent a short one as bytes that are not UTF-8, a long one (40 characters or
  // more) with U+FFFD in its place, JSON.stringify an escape: each path its own way.
  const lone = "\uD800";
  const refused = (call: () => Promise<unknown>, field: string) =>
    refusedHere(call, `${field} holds a lone UTF-16 surrogate (U+D800 at index `);
  const client = unconnected();
  const seat = client.seat("g", "t");
  try {
    const create = (extra: object) => () => client.createGame({ variant: "partnership", ...extra });
    await refused(create({ options: { target: lone } }), "options.target");
    await refused(create({ options: { target: `${lone}${"x".repeat(50)}` } }), "options.target");
    await refusedHere(
      create({ options: { [`a${lone}`]: 1 } }),
      'options has a key "a\\ud800" that holds a lone UTF-16 surrogate (U+D800 at index 1)',
    );
    await refused(create({ seed: `seed-${"x".repeat(50)}${lone}` }), "seed");
    await refused(create({ players: ["a", `b${lone}`] }), "players[1]");
    await refused(create({ givenDeals: [{ hands: [["AS", lone]] }] }), "givenDeals[0].hands[0][1]");
    await refused(create({ variant: lone }), "variant");
    await refused(() => seat.submit({ type: "pass" }, { requestId: `r${lone}` }), "requestId");
    await refused(() => seat.submit({ type: "play", card: `A${lone}` }), "action.card");
    const melds = [{ name: `run${lone}`, cards: ["AS"] }];
    await refused(() => seat.submit({ type: "meld", cards: ["AS"], melds }), "action.melds[0].name");
    const audit = (records: (string | JsonObject)[]) => async () => {
      for await (const item of client.auditRecords(records)) void item;
    };
    await refused(audit(["{}", `{"players": ["${lone}"]}`]), "records[1]");
    await refused(audit([{ players: ["a", lone] }]), "records[0].players[1]");
    const rules = { variant: "partnership", trump: "H" } as const;
    await refused(() => client.scoreMeld({ ...rules, hand: ["AS", lone] }), "hand[1]");
    await refused(() => client.legalPlays({ ...rules, hand: [], trick: [lone] }), "trick[0]");
    const options = { x: lone };
    await refused(() => client.trickPoints({ variant: "p", cards: [], options }), "options.x");
    assert.throws(() => client.session(`g${lone}`, "t"), /^TypeError: gameId holds a lone/);
    // A surrogate pair is a character like any other.
    assert.doesNotThrow(() => client.session("g\u{1F0A1}", "t"));
  } finally {
    client.close();
  }
});

test("a number sent in an integer field must be one (protobufjs sent 0.5 as 0, 2^32 + 1 as 1)", async () => {
  const notInteger = (call: () => Promise<unknown>, field: string) =>
    refusedHere(call, `${field} must be a`);
  const client = unconnected();
  const seat = client.seat("g", "t");
  const hand = {
    variant: "partnership",
    bid: 250,
    declarer: 1,
    meld: [20, 100, 40, 60],
    points: [90, 160],
    tricks: [4, 8],
  };
  const create = (firstDealer: number) => () =>
    client.createGame({ variant: "partnership", firstDealer });
  try {
    await notInteger(create(2 ** 32 + 1), "firstDealer");
    await notInteger(create(1.5), "firstDealer");
    for (const expectedVersion of [0.5, 2 ** 64]) {
      await notInteger(() => seat.submit({ type: "pass" }, { expectedVersion }), "expectedVersion");
    }
    await notInteger(() => seat.auditLog(1.5), "afterSeq");
    await notInteger(() => seat.auditLog(0, 2 ** 31), "pageSize");
    await notInteger(() => client.scoreHand({ ...hand, bid: 2 ** 32 + 250 }), "bid");
    await notInteger(() => client.scoreHand({ ...hand, declarer: 1.5 }), "declarer");
    await notInteger(() => client.scoreHand({ ...hand, meld: [20.5, 100, 40, 60] }), "meld[0]");
    await notInteger(() => client.scoreHand({ ...hand, points: [90, Number.NaN] }), "points[1]");
    await notInteger(() => client.scoreHand({ ...hand, tricks: [4, 8.25] }), "tricks[1]");
    await notInteger(() => client.scoreHand({ ...hand, dix: [0, 0, 10.5, 0] }), "dix[2]");
    const query = { variant: "partnership", hand: ["AS"], trick: ["KS"], trump: "H" as const };
    await notInteger(
      () => client.legalPlays({ ...query, seatOfPartnerInTrick: 0.5 }),
      "seatOfPartnerInTrick",
    );
    assert.throws(() => seat.watch(1.5), /^TypeError: fromVersion must be an integer/);
    assert.throws(() => seat.watch(0, 2 ** 53), /^TypeError: afterSeq must be an integer/);
  } finally {
    client.close();
  }
});

test("a token is sent without the blanks around it; one no header can carry is refused", async () => {
  const client = unconnected();
  try {
    assert.doesNotThrow(() => client.session("g", " token-from-a-file\n"));
    for (const token of ["to\nken", "tok\u00e9n", "tok\uD800"]) {
      const message = /^TypeError: token: a token is printable ASCII/;
      assert.throws(() => client.session("g", token), message);
      assert.throws(() => client.seat("g", token), message);
    }
    await refusedHere(
      () => client.createGame({ variant: "partnership", creatorToken: "cr\u00e9ator" }),
      "creatorToken: a token is printable ASCII",
    );
  } finally {
    client.close();
  }
});

test("calls made after close() are RefereeError CANCELLED, as those open at close()", async () => {
  const client = unconnected();
  client.close();
  const cancelled = (error: unknown) => {
    assert.ok(error instanceof RefereeError, `not a RefereeError: ${String(error)}`);
    assert.equal(error.codeName, "CANCELLED");
    assert.match(error.details, /the client was closed/);
    return true;
  };
  const session = client.session("g", "t");
  await assert.rejects(session.view(), cancelled);
  await assert.rejects(client.trickPoints({ variant: "partnership", cards: [] }), cancelled);
  await assert.rejects(client.waitForReady(1_000), cancelled);
  for (const resume of [false, true]) {
    await assert.rejects(async () => {
      for await (const item of session.watch(0, 0, { resume })) void item;
    }, cancelled);
  }
});

test("close() ends a waitForReady at once, CANCELLED (it waited out its timeout)", async () => {
  // Was: grpc-js asked the closed channel to connect again, and reported DEADLINE_EXCEEDED at
  // the timeout.
  const client = unconnected();
  const waiting = client.waitForReady(3_000);
  client.close();
  await assert.rejects(waiting, (error: unknown) => {
    assert.ok(error instanceof RefereeError, `not a RefereeError: ${String(error)}`);
    assert.equal(error.codeName, "CANCELLED");
    return true;
  });
});

test("listGames refuses a state that is not a GameState before sending, naming state", async () => {
  // Was: protobufjs encodes an enum name it does not know as 0, GAME_STATE_UNSPECIFIED, so a
  // misspelt filter ("GAME_STATE_ENDED", or a value read from a file) listed every game, ended
  // or not, where the Python client's list_games raises ValueError naming state.
  const client = unconnected();
  try {
    for (const state of ["GAME_STATE_ENDED", "over", ""]) {
      await refusedHere(
        () => client.listGames("credential", { state: state as never }),
        `state: ${JSON.stringify(state)} is not a GameState`,
      );
      const pages = client.allGames("credential", { state: state as never });
      await refusedHere(() => pages.next(), "state: ");
    }
  } finally {
    client.close();
  }
});
