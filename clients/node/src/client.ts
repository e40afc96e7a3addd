// A small typed wrapper over the grpc-js stubs of pinochle.referee.v1 (generated from
// ../../protos by `npm run generate`), mirroring clients/python/pinochle_client/client.py:
// create a game, act for a seat (tracking the game version), watch events, and get refusals as
// a typed `RefereeError`.

import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import * as path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";

import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";

import type { ProtoGrpcType } from "../generated/referee";
import type { Struct } from "../generated/google/protobuf/Struct";
import type { Action as ProtoAction } from "../generated/pinochle/referee/v1/Action";
import type { AuditEntry__Output } from "../generated/pinochle/referee/v1/AuditEntry";
import type { AuditRecordsResponse__Output } from "../generated/pinochle/referee/v1/AuditRecordsResponse";
import type { CreateGameRequest } from "../generated/pinochle/referee/v1/CreateGameRequest";
import type { CreateGameResponse__Output } from "../generated/pinochle/referee/v1/CreateGameResponse";
import type { ExportGameResponse__Output } from "../generated/pinochle/referee/v1/ExportGameResponse";
import type { GetAuditLogResponse__Output } from "../generated/pinochle/referee/v1/GetAuditLogResponse";
import {
  GameState as GAME_STATES,
  type GameState__Output,
} from "../generated/pinochle/referee/v1/GameState";
import type { GameSummary__Output } from "../generated/pinochle/referee/v1/GameSummary";
import type { GetGameResponse__Output } from "../generated/pinochle/referee/v1/GetGameResponse";
import type { LegalPlaysRequest } from "../generated/pinochle/referee/v1/LegalPlaysRequest";
import type { LegalPlaysResponse__Output } from "../generated/pinochle/referee/v1/LegalPlaysResponse";
import type { ListGamesResponse__Output } from "../generated/pinochle/referee/v1/ListGamesResponse";
import type { ListLegalActionsResponse__Output } from "../generated/pinochle/referee/v1/ListLegalActionsResponse";
import type { ListVariantsResponse__Output } from "../generated/pinochle/referee/v1/ListVariantsResponse";
import type { OptionSpec__Output } from "../generated/pinochle/referee/v1/OptionSpec";
import type { SubmitActionResponse__Output } from "../generated/pinochle/referee/v1/SubmitActionResponse";
import type { VerifyAuditLogResponse__Output } from "../generated/pinochle/referee/v1/VerifyAuditLogResponse";
import type { Event__Output } from "../generated/pinochle/referee/v1/Event";
import type { RefereeServiceClient } from "../generated/pinochle/referee/v1/RefereeService";
import type { RulesServiceClient } from "../generated/pinochle/referee/v1/RulesService";
import type { ScoreHandRequest } from "../generated/pinochle/referee/v1/ScoreHandRequest";
import type { ScoreHandResponse__Output } from "../generated/pinochle/referee/v1/ScoreHandResponse";
import type { ScoreMeldResponse__Output } from "../generated/pinochle/referee/v1/ScoreMeldResponse";
import type { TrickPointsResponse__Output } from "../generated/pinochle/referee/v1/TrickPointsResponse";
import type { TrickWinnerResponse__Output } from "../generated/pinochle/referee/v1/TrickWinnerResponse";
import type { Variant__Output } from "../generated/pinochle/referee/v1/Variant";
import type { WatchGameResponse__Output } from "../generated/pinochle/referee/v1/WatchGameResponse";
import { RefereeError } from "./errors";
import { fromStruct, fromValue, toStruct, type Json, type JsonObject } from "./struct";

// ---------------------------------------------------------------------------------------------
// The JSON shapes of the contract (RULES.md A.4 actions, A.10 legal-action entries, views).

export type Suit = "S" | "H" | "D" | "C";
/** A card in the contract's notation, e.g. "AS", "10H", "QD". */
export type Card = string;

export interface MeldCombination {
  name: string;
  cards: Card[];
}

/** A game action in its A.4 JSON form (an optional field given as null is left out). */
export type Action =
  | { type: "bid"; amount: number }
  | { type: "pass"; help?: boolean | null }
  | { type: "bid_or_redeal" }
  | { type: "declare_trump"; suit: Suit }
  | { type: "pass_cards"; cards: Card[] }
  | { type: "discard"; cards: Card[] }
  | {
      type: "meld";
      cards: Card[];
      melds?: MeldCombination[] | null;
      points?: number | null;
      name?: string | null;
    }
  | { type: "exchange_dix" }
  | { type: "concede" }
  | { type: "draw"; turn_up: boolean }
  | { type: "play"; card: Card };

export type ActionType = Action["type"];

/** A bid descriptor: any amount from `min` (to `max`, null when unbounded) in steps of `step`. */
export interface BidDescriptor {
  type: "bid";
  min: number;
  step: number;
  max: number | null;
}
/** Pass or discard exactly `count` cards chosen from `from`. */
export interface CardsDescriptor {
  type: "pass_cards" | "discard";
  count: number;
  from: Card[];
}
/** A whole-hand meld: show any subset of `from`. */
export interface MeldDescriptor {
  type: "meld";
  from: Card[];
}
/** One two-handed meld, concrete. */
export interface NamedMeld {
  type: "meld";
  name: string;
  cards: Card[];
  points: number;
}

/** Two-handed: in the trick winner's window the card about to be drawn may be led too (RULES.md
 * A.8 item 2). It is listed without its name, so the stock's top card stays hidden: this entry
 * is not an action one can send (`playable` drops it). */
export interface DrawnCardLead {
  type: "play";
  drawn_card: true;
}

/** One entry of ListLegalActions: a concrete action or a descriptor (RULES.md A.10 item 2). */
export type LegalEntry =
  | BidDescriptor
  | CardsDescriptor
  | MeldDescriptor
  | NamedMeld
  | DrawnCardLead
  | Exclude<Action, { type: "bid" | "pass_cards" | "discard" | "meld" }>;

/** Whether an entry is the two-handed lead of the card about to be drawn (names no card). */
export function isDrawnCardLead(entry: LegalEntry): entry is DrawnCardLead {
  return entry.type === "play" && "drawn_card" in entry && entry.drawn_card;
}

/** The caller's view of a game (RULES.md A.10 item 3); `hand` is null between hands. */
export interface GameView {
  game_id: string;
  variant: string;
  options: JsonObject;
  seats: number;
  role: Json;
  version: number;
  first_dealer: number;
  scores: number[];
  target: number;
  hands_completed: number;
  over: boolean;
  winner: number | null;
  hand: HandView | null;
  /** How the game is dealt (never the seed or the deals): with a seed or given deals, the
   * game's creator knew the hands. */
  deal_mode: DealMode;
  [key: string]: unknown;
}

export type DealMode =
  | { mode: "server_shuffle" }
  | { mode: "seed" }
  | { mode: "given_deals"; given_deals: number };

export interface HandView {
  number: number;
  dealer: number;
  phase: string;
  turn: number | null;
  declarer: number | null;
  bid: number | null;
  trump: Suit | null;
  /** The caller's own cards (seats only). */
  cards?: Card[];
  [key: string]: unknown;
}

/** An event as the caller may see it: the Event's envelope with its `data` spread in. */
export interface GameEvent {
  seq: number;
  version: number;
  kind: string;
  /** "everyone", "adjudicator", "sealed" or a seat number as text. */
  audience: string;
  [key: string]: Json;
}

/** One item of a WatchGame stream (the Python client's `watch()` yields the same items). */
export type WatchItem =
  | { type: "event"; event: GameEvent }
  | { type: "snapshot"; snapshot: { version: number; view: GameView } };

export interface CreateGameOptions {
  variant: string;
  options?: Record<string, unknown>;
  /** Deals from "<seed>:<n>" (RULES.md A.10 item 4); omitted: the server shuffles. */
  seed?: string;
  firstDealer?: number;
  /** Deals in the record's `deal` form (needs the server's adjudicator credential). */
  givenDeals?: Record<string, unknown>[];
  players?: string[];
  /** The server's adjudicator credential (for given deals; it also creates games on a server
   * that requires a creator credential). */
  adjudicatorToken?: string;
  /** The server's creator credential, for a server that requires one (`--creator-token`).
   * Send this or `adjudicatorToken`, not both. */
  creatorToken?: string;
}

export interface CreatedGame {
  gameId: string;
  seatTokens: string[];
  spectatorToken: string;
  adjudicatorToken: string;
  version: number;
}

/** Per-call options, the last argument of every unary method. */
export interface CallOptions {
  /** This call's deadline in milliseconds (default: the client's `deadlineMs`; 0: none). */
  deadlineMs?: number;
  /** Aborting it cancels the call, which then rejects with RefereeError `CANCELLED`. */
  signal?: AbortSignal;
  /** Extra request metadata (a session's `authorization` header takes precedence). */
  metadata?: grpc.Metadata | Record<string, string>;
}

/** Options of `Session.watch`: as for unary calls, but with no deadline unless one is given.
 * `deadlineMs` bounds the whole watch, from its first opening: with `resume` the re-openings get
 * what is left of it, not a fresh one, and the loop throws `DEADLINE_EXCEEDED` once it passes. */
export interface WatchOptions extends CallOptions {
  /** When the stream fails with UNAVAILABLE (the server stopping, reason `SHUTTING_DOWN`, or the
   * connection lost), open it again where it broke and go on, waiting for the server to come
   * back (default false: the loop throws), within `deadlineMs` if one is given. */
  resume?: boolean;
}

export interface SubmitOptions extends CallOptions {
  /** Defaults to the version this session last saw. */
  expectedVersion?: number;
  /** Defaults to a fresh UUID (also for ""); reuse one to retry safely. */
  requestId?: string;
}

export interface SubmitResult {
  version: number;
  view: GameView;
  events: GameEvent[];
}

/** One audit log entry; the action in its JSON form (the adjudicator sees all of it, seats its
 * public part). Numbers are numbers, enums their names ("ROLE_SEAT", "AUDIT_OUTCOME_REFUSED"). */
export type AuditEntry = Omit<AuditEntry__Output, "action"> & { action: JsonObject };

/** The server's check of a game's audit hash chain and of its accepted entries against the
 * game's log. */
export interface AuditCheck {
  intact: boolean;
  /** How many entries were checked. */
  entries: number;
  /** The first bad entry (0 when intact): its hash or link does not match, or, accepted, it does
   * not match the game's log of accepted actions. */
  firstBadSeq: number;
  /** What is wrong ("" when intact). */
  detail: string;
}

/** One AuditRecords verdict (GAME_RECORD.md §2) for `records[index]`. */
export interface RecordVerdict {
  index: number;
  verdict: JsonObject;
}

/** Options of `auditRecords`: as for unary calls, but with no deadline unless one is given. */
export interface AuditRecordsOptions extends CallOptions {
  /** List every illegal action of a record in its verdict (`violations`), skipping each, rather
   * than stop at the first (`violation`; the default). Every record gets a verdict either way. */
  keepGoing?: boolean;
}

/** A variant option: `allowed` and `defaultValue` as plain JSON. */
export type OptionSpec = Omit<OptionSpec__Output, "allowed" | "defaultValue"> & {
  allowed: Json;
  defaultValue: Json;
};

/** A variant ListVariants offers, with its options. */
export type Variant = Omit<Variant__Output, "options"> & { options: OptionSpec[] };

/** ListGames's filter by state: "GAME_STATE_IN_PROGRESS", "GAME_STATE_OVER", or
 * "GAME_STATE_UNSPECIFIED" for every game. */
export type GameState = GameState__Output;

/** A game as ListGames lists it: public fields only. `version` a number, `createdAt` and
 * `lastActiveAt` as `{ seconds, nanos }` (as an audit entry's `time`), `playerNames` empty when
 * none were given. */
export type GameSummary = GameSummary__Output;

/** The query of `listGames` and `allGames`. */
export interface ListGamesQuery {
  /** At most this many games a page (0 or omitted: the server's default, 100; at most 1000). */
  pageSize?: number;
  /** Only the games in this state (omitted: every game); a name that is not a GameState is a
   * TypeError, as the Python client's ValueError. */
  state?: GameState;
  /** Only the games of this variant (omitted or "": every variant). */
  variant?: string;
}

/** One ListGames page: `nextPageToken` is what `listGames` takes for the next ("" on the last). */
export interface GamesPage {
  games: GameSummary[];
  nextPageToken: string;
}

/** A WatchGame stream. `return()` (which `break` calls) stops it at once, even while it waits
 * for the next event: a pending `next()` then ends the iteration. */
export type WatchStream = AsyncGenerator<WatchItem, void, undefined>;

// ---------------------------------------------------------------------------------------------
// Rules queries (RulesService, GAME_RECORD.md §3): stateless, no game or token. A query the rules
// refuse throws RefereeError (INVALID_ARGUMENT, `fields` naming the input: "hand[0]", "trump").

/** What every rules query carries: the variant and, optionally, its options (RULES.md A.9). */
export interface RulesQuery {
  variant: string;
  options?: Record<string, unknown>;
}

export interface ScoreMeldQuery extends RulesQuery {
  hand: Card[];
  trump: Suit;
}

/** One scored combination. */
export interface MeldScore {
  name: string;
  level: number;
  points: number;
  cards: Card[];
}

/** The meld a hand makes under a trump suit. */
export interface MeldResult {
  total: number;
  melds: MeldScore[];
}

export interface LegalPlaysQuery extends RulesQuery {
  hand: Card[];
  /** The cards played to the trick so far, in order (empty: the player leads). */
  trick: Card[];
  trump: Suit;
  /** Two-handed only: "stock" or "playoff" (the default). */
  phase?: "stock" | "playoff";
  /** The index into `trick` of the player's partner's card. */
  seatOfPartnerInTrick?: number;
}

export interface TrickWinnerQuery extends RulesQuery {
  /** 1 to n cards. */
  trick: Card[];
  trump: Suit;
}

export interface TrickPointsQuery extends RulesQuery {
  /** The trick's cards. */
  cards: Card[];
  /** The hand's last trick: its bonus (option `last_trick_bonus`) is added. */
  last?: boolean;
}

export interface ScoreHandQuery extends RulesQuery {
  /** Required by the bidding variants (omitted or null: no contract); omit it without bidding. */
  bid?: number | null;
  declarer?: number | null;
  /** Per seat. */
  meld: number[];
  /** Card points per team (partnerships) or seat, last-trick bonus included. */
  points: number[];
  /** Tricks taken per team or seat (for `save_meld`); two-handed may leave it out. */
  tricks?: number[];
  /** Dix points per seat, included in `meld`. */
  dix?: number[];
  conceded?: boolean;
}

/** A hand's score per team (partnerships) or seat; `saved`: whether its meld counted. */
export interface HandScore {
  delta: number[];
  saved: boolean[];
}

export interface ClientOptions {
  /** Defaults to insecure (plaintext) credentials. */
  credentials?: grpc.ChannelCredentials;
  channelOptions?: grpc.ChannelOptions;
  /** Deadline of each unary call in milliseconds (default 30 000; 0: none); a call's own
   * `deadlineMs` overrides it. */
  deadlineMs?: number;
  /** Where referee.proto lives (default: REFEREE_PROTOS_DIR, else the copy the build bundles
   * into the package, dist/protos). */
  protosDir?: string;
  /** Retry the safe calls on UNAVAILABLE (SERVICE_CONFIG_FILE; default true). A
   * `grpc.service_config` in `channelOptions` takes precedence. */
  retries?: boolean;
  /** While a call is open on a connection silent this long, ping the server, and drop the
   * connection when no answer comes within 10 s (or this, if shorter): a watch over a
   * connection whose server or network is gone without closing it would otherwise wait for
   * ever (with `resume` it then resumes). Default 30 000; 0: no pings. The server accepts a
   * ping every 10 s. Keepalive options in `channelOptions` take precedence. */
  keepaliveMs?: number;
  /** The longest wait between the channel's attempts to reconnect to a server that is down.
   * gRPC's own backoff grows 1 s, 1.6 s, 2.56 s, ... up to 120 s, and until its next attempt
   * the channel fails calls at once (UNAVAILABLE) and holds wait-for-ready calls and resuming
   * watches, however long the server has been back: after a minute's outage, up to about a
   * minute more. Default 5 000 (gRPC's jitter makes a wait up to 20 % longer); 0: gRPC's own
   * backoff. Reconnect backoff options in `channelOptions` take precedence. */
  maxReconnectBackoffMs?: number;
  /** The largest response the client accepts, in bytes. The server sends responses up to 16
   * times its `--max-message-bytes` (1 MiB by default): the `export()` record of a long game
   * can pass gRPC's own limit of 4 MiB, and the call then failed RESOURCE_EXHAUSTED in the
   * client though the server had answered it. Default 16 MiB (`MAX_RECEIVE_MESSAGE_BYTES`), the
   * largest a server with the default sends; 0: gRPC's own 4 MiB. A
   * `grpc.max_receive_message_length` in `channelOptions` takes precedence. */
  maxReceiveMessageBytes?: number;
}

/** `ClientOptions.keepaliveMs`'s default and the longest wait for a ping's answer. */
export const KEEPALIVE_MS = 30_000;
const KEEPALIVE_TIMEOUT_MS = 10_000;

/** grpc-js channel options for pinging every `ms` while calls are open (none for 0). */
export function keepaliveOptions(ms: number): grpc.ChannelOptions {
  if (ms <= 0) return {};
  return {
    "grpc.keepalive_time_ms": ms,
    "grpc.keepalive_timeout_ms": Math.min(ms, KEEPALIVE_TIMEOUT_MS),
    "grpc.keepalive_permit_without_calls": 0,
  };
}

/** `ClientOptions.maxReconnectBackoffMs`'s default. */
export const MAX_RECONNECT_BACKOFF_MS = 5_000;
/** gRPC's first reconnect backoff, which grpc-js waits even when the maximum is smaller. */
const INITIAL_RECONNECT_BACKOFF_MS = 1_000;

/** grpc-js channel options capping the reconnect backoff at `maxMs` (none for 0: gRPC's 120 s).
 * A cap under gRPC's first backoff lowers that too, since grpc-js caps only the later ones. */
export function reconnectBackoffOptions(maxMs: number): grpc.ChannelOptions {
  if (maxMs <= 0) return {};
  const options: grpc.ChannelOptions = { "grpc.max_reconnect_backoff_ms": maxMs };
  if (maxMs < INITIAL_RECONNECT_BACKOFF_MS) options["grpc.initial_reconnect_backoff_ms"] = maxMs;
  return options;
}

/** `ClientOptions.maxReceiveMessageBytes`'s default: 16 MiB, 16 times the server's default
 * `--max-message-bytes`. */
export const MAX_RECEIVE_MESSAGE_BYTES = 16 * 1024 * 1024;

/** grpc-js channel options accepting responses up to `maxBytes` (none for 0: gRPC's 4 MiB). */
export function receiveLimitOptions(maxBytes: number): grpc.ChannelOptions {
  if (maxBytes <= 0) return {};
  return { "grpc.max_receive_message_length": Math.min(maxBytes, 2 ** 31 - 1) };
}

// ---------------------------------------------------------------------------------------------
// Loading the service definition. The conversion options must match the generator's flags
// (package.json `generate`), which is what makes the generated types true.

export const PROTO_FILE = "pinochle/referee/v1/referee.proto";

/** gRPC's own retries, configured on the channel by the service config shipped beside
 * referee.proto (the Python client loads the same file): the calls that change nothing, and
 * SubmitAction, whose requestId makes a second attempt safe (the server answers it with the
 * first one's stored response, or applies it once), are retried on UNAVAILABLE, up to four
 * attempts with backoff, within the call's deadline. CreateGame, which has no request id, and
 * the streams are never retried. */
export const SERVICE_CONFIG_FILE = "pinochle/referee/v1/referee_grpc_service_config.json";

export const LOADER_OPTIONS: protoLoader.Options = {
  keepCase: false,
  longs: Number,
  enums: String,
  defaults: true,
  oneofs: true,
};

/** The protos `npm run build` copies into the package (scripts/bundle-protos.js):
 * dist/src/client.js -> dist/protos. */
export const BUNDLED_PROTOS_DIR = path.resolve(__dirname, "..", "protos");

function defaultProtosDir(): string {
  return process.env["REFEREE_PROTOS_DIR"] || BUNDLED_PROTOS_DIR;
}

const loaded = new Map<string, ProtoGrpcType>();

/** The service config (JSON text) beside the protos in `protosDir`; without `retries`, only
 * its load balancing (round_robin over every address the target resolves to). */
export function serviceConfig(protosDir: string, retries = true): string {
  const text = readFileSync(path.join(protosDir, SERVICE_CONFIG_FILE), "utf8");
  if (retries) return text;
  const { loadBalancingConfig } = JSON.parse(text) as { loadBalancingConfig: unknown };
  return JSON.stringify({ loadBalancingConfig });
}

function loadProto(protosDir: string): ProtoGrpcType {
  let proto = loaded.get(protosDir);
  if (proto === undefined) {
    const definition = protoLoader.loadSync(PROTO_FILE, {
      ...LOADER_OPTIONS,
      includeDirs: [protosDir],
    });
    proto = grpc.loadPackageDefinition(definition) as unknown as ProtoGrpcType;
    loaded.set(protosDir, proto);
  }
  return proto;
}

// ---------------------------------------------------------------------------------------------
// Conversions

/** The protobuf `Action` oneof for an A.4 JSON action. */
/** `value` if it is an int32, as the field holds it; protobufjs would otherwise send 250.5 as
 * 250 and 2^32 + 250 as 250, turning a malformed action into a legal one (the Python client's
 * protobuf raises on both). */
function int32(value: number, field: string): number {
  if (!Number.isInteger(value) || value < -(2 ** 31) || value > 2 ** 31 - 1) {
    throw new TypeError(`${field} must be a 32-bit integer, not ${String(value)}`);
  }
  return value;
}

/** `value` if it is an integer JavaScript holds exactly, for an int64 field (a version, a seq):
 * protobufjs would otherwise send 0.5 as 0 (the Python client's protobuf raises). */
function int64(value: number, field: string): number {
  if (!Number.isSafeInteger(value)) {
    throw new TypeError(`${field} must be an integer, not ${String(value)}`);
  }
  return value;
}

/** int32 for each of `values`, named `field[i]`. */
function int32s(values: readonly number[], field: string): number[] {
  return values.map((value, i) => int32(value, `${field}[${i}]`));
}

/** A lone UTF-16 surrogate: with the `u` flag a surrogate pair is one code point, which this
 * range does not hold, so only an unpaired half matches. */
const LONE_SURROGATE = /[\uD800-\uDFFF]/u;

function surrogateAt(text: string): string | undefined {
  const at = text.search(LONE_SURROGATE);
  if (at < 0) return undefined;
  const unit = text.charCodeAt(at).toString(16).toUpperCase();
  return (
    `a lone UTF-16 surrogate (U+${unit} at index ${at}), ` +
    "which is not Unicode text and cannot be sent"
  );
}

/**
 * Refuses, with a TypeError naming the field, a string in `value` (itself, or one in its arrays
 * and objects, keys included) that holds a lone UTF-16 surrogate such as "\uD800". Such a string
 * has no UTF-8 form, and was sent three ways: protobufjs wrote a short one as bytes that are not
 * UTF-8 (the server refused the whole request, naming no field), a long one (40 characters or
 * more) with U+FFFD in its place (the server took a string the caller never gave: a game created
 * with another seed), and JSON.stringify (a record given as an object) as an escape the server
 * read back as the surrogate. The Python client's protobuf refuses such a str too
 * (UnicodeEncodeError). `field` is the value's name ("" for a request whose keys name it).
 */
function checkText(value: unknown, field: string): void {
  if (typeof value === "string") {
    const problem = surrogateAt(value);
    if (problem !== undefined) throw new TypeError(`${field} holds ${problem}`);
  } else if (Array.isArray(value)) {
    value.forEach((item, i) => checkText(item, `${field}[${i}]`));
  } else if (typeof value === "object" && value !== null) {
    for (const [key, item] of Object.entries(value)) {
      const problem = surrogateAt(key);
      if (problem !== undefined) {
        const where = field || "the request";
        throw new TypeError(`${where} has a key ${JSON.stringify(key)} that holds ${problem}`);
      }
      checkText(item, field ? `${field}.${key}` : key);
    }
  }
}

/** A token as sent: without the blanks around it (a token read from a file ends with a line
 * break; the server strips the header's token too), undefined when empty. One that no header
 * can carry (a character other than printable ASCII inside) is refused with a TypeError naming
 * `field`: grpc-js threw a plain Error from each call for it. As in the Python client. */
function sendableToken(token: string | undefined, field: string): string | undefined {
  const trimmed = token?.trim();
  if (!trimmed) return undefined;
  if (!/^[ -~]*$/.test(trimmed)) {
    throw new TypeError(
      `${field}: a token is printable ASCII; this one holds a character no header can carry`,
    );
  }
  return trimmed;
}

/** The fields each action type takes besides `type` (the engine's `ACTION_FIELDS`, RULES.md
 * A.4). */
const ACTION_FIELDS: Readonly<Record<ActionType, readonly string[]>> = {
  bid: ["amount"],
  pass: ["help"],
  bid_or_redeal: [],
  declare_trump: ["suit"],
  pass_cards: ["cards"],
  discard: ["cards"],
  meld: ["cards", "melds", "points", "name"],
  exchange_dix: [],
  concede: [],
  draw: ["turn_up"],
  play: ["card"],
};

export function actionToProto(action: Action): ProtoAction {
  // A field the type does not take (a plain JavaScript caller's typo, or a record's `seat`)
  // is refused naming it, as the engine refuses it (MALFORMED_ACTION) and the Python client
  // does: it was dropped, and `{type: "bid", amount: 250, extra: 1}` went out as a plain bid.
  const fields = Object.hasOwn(ACTION_FIELDS, action.type) ? ACTION_FIELDS[action.type] : undefined;
  if (fields !== undefined) {
    for (const key of Object.keys(action)) {
      if (key !== "type" && !fields.includes(key)) {
        const taken = fields.length ? `only ${fields.join(", ")}` : "no other field";
        throw new TypeError(`${action.type} takes no field ${JSON.stringify(key)} (${taken})`);
      }
    }
  }
  switch (action.type) {
    case "bid":
      return { bid: { amount: int32(action.amount, "amount") } };
    case "pass":
      return { passTurn: { help: action.help ?? false } };
    case "bid_or_redeal":
      return { bidOrRedeal: {} };
    case "declare_trump":
      return { declareTrump: { suit: action.suit } };
    case "pass_cards":
      return { passCards: { cards: [...action.cards] } };
    case "discard":
      return { discard: { cards: [...action.cards] } };
    case "meld":
      return {
        meld: {
          cards: [...action.cards],
          // present (even empty) only when the player declares combinations; null: absent
          ...(action.melds != null
            ? { melds: { items: action.melds.map((m) => ({ name: m.name, cards: [...m.cards] })) } }
            : {}),
          ...(action.points != null ? { points: int32(action.points, "points") } : {}),
          ...(action.name != null ? { name: action.name } : {}),
        },
      };
    case "exchange_dix":
      return { exchangeDix: {} };
    case "concede":
      return { concede: {} };
    case "draw":
      return { draw: { turnUp: action.turn_up } };
    case "play":
      return { play: { card: action.card } };
    default: {
      const unknown: never = action;
      throw new TypeError(
        `unknown action type ${JSON.stringify((unknown as { type: unknown }).type)}`,
      );
    }
  }
}

function toEvent(event: Event__Output): GameEvent {
  return {
    seq: event.seq,
    version: event.version,
    kind: event.kind,
    audience: event.audience,
    ...parseObject(event.dataJson, "event data"),
  };
}

/** Views and event data arrive as JSON object text (`view_json`, `data_json`). */
function parseObject(text: string, what: string): JsonObject {
  const value: unknown = text ? JSON.parse(text) : {};
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new TypeError(`the server sent ${what} that is not a JSON object`);
  }
  return value as JsonObject;
}

function toView(text: string): GameView {
  return parseObject(text, "a view") as unknown as GameView;
}

/** A call's metadata: the caller's extra entries, then the bearer token (when there is one). */
function callMetadata(token: string | undefined, extra?: CallOptions["metadata"]): grpc.Metadata {
  const metadata = extra instanceof grpc.Metadata ? extra.clone() : new grpc.Metadata();
  if (extra !== undefined && !(extra instanceof grpc.Metadata)) {
    for (const [key, value] of Object.entries(extra)) metadata.set(key, value);
  }
  if (token) metadata.set("authorization", `Bearer ${token}`);
  return metadata;
}

/** What an aborted signal makes of a call that has not started. */
function aborted(): RefereeError {
  return new RefereeError({
    code: grpc.status.CANCELLED,
    details: "Cancelled on client (the AbortSignal was aborted)",
  });
}

/** `items` with a `return()` and `throw()` that call `release` first: an async generator's own
 * return() waits behind a pending next(), so `release` must settle that next(). */
function releasable<T>(
  items: AsyncGenerator<T, void, undefined>,
  release: () => void,
): AsyncGenerator<T, void, undefined> {
  const stream: AsyncGenerator<T, void, undefined> = {
    next: (...args) => items.next(...args),
    return: (value) => {
      release();
      return items.return(value);
    },
    throw: (error: unknown) => {
      release();
      return items.throw(error);
    },
    [Symbol.asyncIterator]: () => stream,
  };
  return stream;
}

/** The wait before re-opening a resumed watch: 50 ms, doubling up to 2 s. */
const FIRST_BACKOFF_MS = 50;
const LAST_BACKOFF_MS = 2_000;

/**
 * A watch that is opened again after UNAVAILABLE (`WatchOptions.resume`), as the Python
 * client's: `open(afterSeq, again, deadlineMs)` starts one stream (`again`: a re-opening, which
 * waits for the server) with that deadline (0: none). It resumes after the failure's
 * `metadata.after_seq` when that is above 0, else after the last event received, else as first
 * asked (`afterSeq`). Other errors are thrown. `signal` (the caller's, and the client's close())
 * stops it while it waits to open again.
 *
 * `deadlineMs` (0: none) bounds the whole watch from its first opening: each re-opening gets
 * what is left of it, and the watch throws RefereeError `DEADLINE_EXCEEDED` once none is left.
 * Given afresh to each opening, it was restarted by every resumption, so a watch resumed often
 * enough (a server restarted, connections aged out) never reached it.
 */
function resumable(
  open: (afterSeq: number, again: boolean, deadlineMs: number) => WatchStream,
  fromVersion: number,
  afterSeq: number,
  deadlineMs: number,
  signal: AbortSignal | undefined,
): WatchStream {
  const released = new AbortController();
  const stop = signal ? AbortSignal.any([signal, released.signal]) : released.signal;
  let current: WatchStream | undefined;

  // The server reads fromVersion only when afterSeq is 0; a re-opened call sends an afterSeq,
  // so the events fromVersion excludes are left out here.
  const wantedAfter = fromVersion > 0 && !afterSeq ? fromVersion : -1;

  async function* items(): WatchStream {
    let cursor = afterSeq;
    let backoff = FIRST_BACKOFF_MS;
    // The whole watch's deadline, from its first opening (0: none).
    const end = deadlineMs > 0 ? Date.now() + deadlineMs : 0;
    for (let again = false; ; again = true) {
      const left = end && end - Date.now();
      if (end && left <= 0) throw deadlineExceeded(deadlineMs);
      current = open(cursor, again, left);
      try {
        for await (const item of current) {
          backoff = FIRST_BACKOFF_MS;
          if (item.type === "event") {
            cursor = item.event.seq;
            if (item.event.version <= wantedAfter) continue;
          }
          yield item;
        }
        return; // the game is over, or the consumer let go
      } catch (error) {
        if (!(error instanceof RefereeError) || error.code !== grpc.status.UNAVAILABLE) throw error;
        cursor = Math.max(cursor, Number(error.metadata["after_seq"]) || 0);
      }
      try {
        const wait = end ? Math.min(backoff, Math.max(end - Date.now(), 0)) : backoff;
        await sleep(wait, undefined, { signal: stop });
      } catch {
        if (released.signal.aborted) return;
        throw signal?.reason instanceof RefereeError ? signal.reason : aborted();
      }
      backoff = Math.min(2 * backoff, LAST_BACKOFF_MS);
    }
  }

  return releasable(items(), () => {
    released.abort();
    void current?.return(undefined);
  });
}

/** What a call that close() ended, or one made after it, fails with. */
function closedError(): RefereeError {
  return new RefereeError({
    code: grpc.status.CANCELLED,
    details: "Cancelled on client (the client was closed)",
  });
}

/** A resumed watch past its `deadlineMs`, as gRPC reports a call past its deadline. */
function deadlineExceeded(deadlineMs: number): RefereeError {
  return new RefereeError({
    code: grpc.status.DEADLINE_EXCEEDED,
    details: `Deadline exceeded: the watch's deadlineMs (${deadlineMs} ms) has passed`,
  });
}

/** grpc-js call options for a deadline in milliseconds (0: none). */
function deadline(ms: number): grpc.CallOptions {
  return ms > 0 ? { deadline: Date.now() + ms } : {};
}

type Callback<T> = grpc.requestCallback<T>;

// ---------------------------------------------------------------------------------------------
// The client

export class RefereeClient {
  readonly referee: RefereeServiceClient;
  readonly rules: RulesServiceClient;
  private readonly deadlineMs: number;
  /** The calls in flight, which close() cancels. */
  private readonly calls = new Set<grpc.Call>();
  /** @internal aborted by close(): resumed watches stop waiting to open again. */
  readonly closing = new AbortController();

  constructor(
    readonly target: string,
    options: ClientOptions = {},
  ) {
    const protosDir = options.protosDir ?? defaultProtosDir();
    const proto = loadProto(protosDir);
    const credentials = options.credentials ?? grpc.credentials.createInsecure();
    const v1 = proto.pinochle.referee.v1;
    const channelOptions: grpc.ChannelOptions = {
      "grpc.service_config": serviceConfig(protosDir, options.retries !== false),
      // Connections of their own: shared between a process's channels to one address (grpc's
      // default), round_robin's reconnections left a new client made just after a server's
      // restart drawing one in reconnect backoff (the Python client failed at once so).
      "grpc.use_local_subchannel_pool": 1,
      ...keepaliveOptions(options.keepaliveMs ?? KEEPALIVE_MS),
      ...reconnectBackoffOptions(options.maxReconnectBackoffMs ?? MAX_RECONNECT_BACKOFF_MS),
      ...receiveLimitOptions(options.maxReceiveMessageBytes ?? MAX_RECEIVE_MESSAGE_BYTES),
      ...options.channelOptions,
    };
    this.referee = new v1.RefereeService(target, credentials, channelOptions);
    // Share the channel between both services.
    this.rules = new v1.RulesService(target, credentials, {
      ...channelOptions,
      channelOverride: this.referee.getChannel(),
    });
    this.deadlineMs = options.deadlineMs ?? 30_000;
  }

  /** Closes the channel and cancels the calls still open (as the Python client's close()):
   * they reject, and watches throw, RefereeError `CANCELLED`; a resumed watch stops too. */
  close(): void {
    this.closing.abort(closedError());
    for (const call of [...this.calls]) call.cancel();
    this.referee.close();
  }

  /** Resolves once the channel is connected; rejects with RefereeError `DEADLINE_EXCEEDED`
   * when it is not within `timeoutMs`, and with `CANCELLED` once the client is closed. */
  waitForReady(timeoutMs = 10_000): Promise<void> {
    const closed = this.closing.signal;
    const channel = this.referee.getChannel();
    const deadline = Date.now() + timeoutMs;
    return new Promise((resolve, reject) => {
      // Not grpc-js's Client.waitForReady: after close() it asked the closed channel to connect
      // again, which it did until the timeout, then reported DEADLINE_EXCEEDED.
      const check = (error?: Error) => {
        if (closed.aborted) reject(closedError());
        else if (error !== undefined)
          reject(
            new RefereeError({
              code: grpc.status.DEADLINE_EXCEEDED,
              details: `${this.target}: Failed to connect before the deadline`,
            }),
          );
        else {
          try {
            const state = channel.getConnectivityState(true);
            if (state === grpc.connectivityState.READY) resolve();
            else channel.watchConnectivityState(state, deadline, check);
          } catch {
            reject(closedError()); // the channel was shut down (`referee.close()`)
          }
        }
      };
      check();
    });
  }

  /** @internal one unary call; refusals (and an abort) become RefereeError. */
  unary<T>(
    invoke: (
      metadata: grpc.Metadata,
      options: grpc.CallOptions,
      callback: Callback<T>,
    ) => grpc.ClientUnaryCall,
    token?: string,
    options: CallOptions = {},
  ): Promise<T> {
    const { signal } = options;
    // After close() grpc-js threw a plain Error ("Channel has been shut down").
    if (this.closing.signal.aborted) return Promise.reject(closedError());
    if (signal?.aborted) return Promise.reject(aborted());
    return new Promise<T>((resolve, reject) => {
      const cancel = () => call.cancel();
      const call = invoke(
        callMetadata(token, options.metadata),
        deadline(options.deadlineMs ?? this.deadlineMs),
        (error, response) => {
          this.calls.delete(call);
          signal?.removeEventListener("abort", cancel);
          if (error) reject(RefereeError.from(error));
          else if (response === undefined)
            reject(new RefereeError({ code: grpc.status.INTERNAL, details: "empty response" }));
          else resolve(response);
        },
      );
      this.calls.add(call);
      signal?.addEventListener("abort", cancel, { once: true });
    });
  }

  /**
   * @internal one server-streaming call, its messages mapped by `map` (undefined: skipped).
   * Refusals become RefereeError, and so does an abort (`CANCELLED`); `return()`, which
   * `break` calls, cancels the call at once, even while a `next()` waits for a message (that
   * `next()` then ends the iteration). No deadline unless `options.deadlineMs` sets one;
   * `options.waitForReady` (gRPC's wait-for-ready) makes the call wait for the server instead
   * of failing fast.
   */
  stream<M, T>(
    start: (metadata: grpc.Metadata, options: grpc.CallOptions) => grpc.ClientReadableStream<M>,
    map: (message: M) => T | undefined,
    token?: string,
    options: CallOptions & { waitForReady?: boolean } = {},
  ): AsyncGenerator<T, void, undefined> {
    const { signal } = options;
    let call: grpc.ClientReadableStream<M> | undefined;
    // Whether the consumer let go (return() or throw()): the call's CANCELLED is then no error.
    let released = false;
    const cancel = () => call?.cancel();
    const calls = this.calls;
    const closed = this.closing.signal;

    async function* messages(): AsyncGenerator<T, void, undefined> {
      // After close() grpc-js threw a plain Error ("Channel has been shut down").
      if (closed.aborted) throw closedError();
      if (signal?.aborted) throw aborted();
      const metadata = callMetadata(token, options.metadata);
      if (options.waitForReady) metadata.setOptions({ waitForReady: true });
      const active = start(metadata, deadline(options.deadlineMs ?? 0));
      call = active;
      calls.add(active);
      // A cancelled call reports CANCELLED after the loop has let go of the stream.
      active.on("error", () => undefined);
      signal?.addEventListener("abort", cancel, { once: true });
      let finished = false;
      try {
        for await (const message of active as AsyncIterable<M>) {
          const item = map(message);
          if (item !== undefined) yield item;
        }
        finished = true;
      } catch (error) {
        finished = true;
        if (released) return;
        throw RefereeError.from(error);
      } finally {
        calls.delete(active);
        signal?.removeEventListener("abort", cancel);
        if (!finished) active.cancel();
      }
    }

    // Cancelling the call settles a pending next().
    return releasable(messages(), () => {
      released = true;
      cancel();
    });
  }

  async createGame(request: CreateGameOptions, call: CallOptions = {}): Promise<CreatedGame> {
    if (request.adjudicatorToken !== undefined && request.creatorToken !== undefined) {
      throw new TypeError("send one credential: the adjudicator credential also creates games");
    }
    if (request.seed !== undefined && request.givenDeals !== undefined) {
      // One deal mode (the request's oneof): the deals would otherwise be dropped unseen.
      throw new TypeError("give a seed or given deals, not both");
    }
    checkText(request, "");
    const token =
      request.adjudicatorToken !== undefined
        ? sendableToken(request.adjudicatorToken, "adjudicatorToken")
        : sendableToken(request.creatorToken, "creatorToken");
    const message: CreateGameRequest = {
      variant: request.variant,
      firstDealer: int32(request.firstDealer ?? 0, "firstDealer"),
      playerNames: request.players ?? [],
      ...(request.options !== undefined ? { options: toStruct(request.options) } : {}),
    };
    if (request.seed !== undefined) message.seed = request.seed;
    else if (request.givenDeals !== undefined)
      message.givenDeals = { deals: request.givenDeals.map(toStruct) };
    else message.serverShuffle = {};
    const response = await this.unary<CreateGameResponse__Output>(
      (md, opts, cb) => this.referee.CreateGame(message, md, opts, cb),
      token,
      call,
    );
    return {
      gameId: response.gameId,
      seatTokens: [...response.seatTokens],
      spectatorToken: response.spectatorToken,
      adjudicatorToken: response.adjudicatorToken,
      version: response.version,
    };
  }

  /** Calls made with a game's spectator or adjudicator token (or a seat's, read-only). */
  session(gameId: string, token: string): Session {
    return new Session(this, gameId, token);
  }

  /** A seat: reading, plus legal actions and submitting actions. */
  seat(gameId: string, token: string): SeatSession {
    return new SeatSession(this, gameId, token);
  }

  /** The variants the server offers, their options' allowed values and defaults as JSON. */
  async listVariants(call: CallOptions = {}): Promise<Variant[]> {
    const response = await this.unary<ListVariantsResponse__Output>(
      (md, opts, cb) => this.referee.ListVariants({}, md, opts, cb),
      undefined,
      call,
    );
    return response.variants.map(toVariant);
  }

  /**
   * One page of the games the server stores, oldest first (ListGames), as the Python client's
   * `list_games()` gives it (keys in camelCase). `credential` is the server's adjudicator or
   * creator credential: a game's tokens are refused (PERMISSION_DENIED). `pageToken` is the
   * previous page's `nextPageToken` ("" or omitted for the first page). Refusals throw
   * RefereeError.
   */
  async listGames(
    credential: string,
    query: ListGamesQuery & { pageToken?: string } = {},
    call: CallOptions = {},
  ): Promise<GamesPage> {
    checkText(query, "");
    const state = query.state ?? "GAME_STATE_UNSPECIFIED";
    // protobufjs encodes an enum name it does not know as 0 (GAME_STATE_UNSPECIFIED): a
    // misspelt filter would list every game. The Python client raises ValueError likewise.
    if (!(Object.values(GAME_STATES) as unknown[]).includes(state)) {
      const names = Object.values(GAME_STATES).join(", ");
      throw new TypeError(`state: ${JSON.stringify(state)} is not a GameState (${names})`);
    }
    const token = sendableToken(credential, "credential");
    const message = {
      pageSize: int32(query.pageSize ?? 0, "pageSize"),
      pageToken: query.pageToken ?? "",
      state,
      variant: query.variant ?? "",
    };
    const response = await this.unary<ListGamesResponse__Output>(
      (md, opts, cb) => this.referee.ListGames(message, md, opts, cb),
      token,
      call,
    );
    return { games: [...response.games], nextPageToken: response.nextPageToken };
  }

  /**
   * Every game `listGames` selects, page after page until the last, each once (games created
   * or ended meanwhile never make one come twice or go missing), as the Python client's
   * `all_games()`. `call` applies to each page's call.
   */
  async *allGames(
    credential: string,
    query: ListGamesQuery = {},
    call: CallOptions = {},
  ): AsyncGenerator<GameSummary, void, undefined> {
    let pageToken = "";
    do {
      const page = await this.listGames(credential, { ...query, pageToken }, call);
      yield* page.games;
      pageToken = page.nextPageToken;
    } while (pageToken !== "");
  }

  /**
   * Audit pinochle-record/1 documents (JSON text, or objects such as `Session.export()` gives):
   * `{ index, verdict }` for each record, in order, the verdict (GAME_RECORD.md §2) for
   * `records[index]`, as the Python client's `audit_records()` yields them. Every record gets
   * one, legal or not; `keepGoing` lists every illegal action of a record (`violations`) where
   * the verdict otherwise stops at the first (`violation`). Refusals throw RefereeError.
   */
  auditRecords(
    records: readonly (string | JsonObject)[],
    options: AuditRecordsOptions = {},
  ): AsyncGenerator<RecordVerdict, void, undefined> {
    records.forEach((record, i) => checkText(record, `records[${i}]`));
    const request = {
      records: records.map((record) =>
        typeof record === "string" ? record : JSON.stringify(record),
      ),
      keepGoing: options.keepGoing ?? false,
    };
    return this.stream(
      (md, opts) => this.referee.AuditRecords(request, md, opts),
      (message: AuditRecordsResponse__Output) => ({
        index: message.index,
        verdict: fromStruct(message.verdict),
      }),
      undefined,
      options,
    );
  }

  // Rules queries (RulesService).

  /** The meld `hand` makes with `trump`; an empty hand makes 0. */
  async scoreMeld(query: ScoreMeldQuery, call: CallOptions = {}): Promise<MeldResult> {
    const message = { ...rulesBase(query), hand: [...query.hand], trump: query.trump };
    const response = await this.unary<ScoreMeldResponse__Output>(
      (md, opts, cb) => this.rules.ScoreMeld(message, md, opts, cb),
      undefined,
      call,
    );
    return {
      total: response.total,
      melds: response.melds.map((m) => ({
        name: m.name,
        level: m.level,
        points: m.points,
        cards: [...m.cards],
      })),
    };
  }

  /** The distinct cards of `hand` that may be played to `trick`, in canonical order. */
  async legalPlays(query: LegalPlaysQuery, call: CallOptions = {}): Promise<Card[]> {
    const message: LegalPlaysRequest = {
      ...rulesBase(query),
      hand: [...query.hand],
      trick: [...query.trick],
      trump: query.trump,
    };
    if (query.phase !== undefined) message.phase = query.phase;
    if (query.seatOfPartnerInTrick !== undefined)
      message.seatOfPartnerInTrick = int32(query.seatOfPartnerInTrick, "seatOfPartnerInTrick");
    const response = await this.unary<LegalPlaysResponse__Output>(
      (md, opts, cb) => this.rules.LegalPlays(message, md, opts, cb),
      undefined,
      call,
    );
    return [...response.legal];
  }

  /** The index into `trick` of the card that wins it. */
  async trickWinner(query: TrickWinnerQuery, call: CallOptions = {}): Promise<number> {
    const message = { ...rulesBase(query), trick: [...query.trick], trump: query.trump };
    const response = await this.unary<TrickWinnerResponse__Output>(
      (md, opts, cb) => this.rules.TrickWinner(message, md, opts, cb),
      undefined,
      call,
    );
    return response.winner;
  }

  /** The card points of a trick's cards, with the last-trick bonus when `last`. */
  async trickPoints(query: TrickPointsQuery, call: CallOptions = {}): Promise<number> {
    const message = { ...rulesBase(query), cards: [...query.cards], last: query.last ?? false };
    const response = await this.unary<TrickPointsResponse__Output>(
      (md, opts, cb) => this.rules.TrickPoints(message, md, opts, cb),
      undefined,
      call,
    );
    return response.points;
  }

  /** A hand's deltas from bid, meld, card points and tricks. */
  async scoreHand(query: ScoreHandQuery, call: CallOptions = {}): Promise<HandScore> {
    const message: ScoreHandRequest = {
      ...rulesBase(query),
      meld: int32s(query.meld, "meld"),
      points: int32s(query.points, "points"),
      tricks: int32s(query.tricks ?? [], "tricks"),
      dix: int32s(query.dix ?? [], "dix"),
      conceded: query.conceded ?? false,
    };
    if (query.bid !== undefined && query.bid !== null) message.bid = int32(query.bid, "bid");
    if (query.declarer !== undefined && query.declarer !== null)
      message.declarer = int32(query.declarer, "declarer");
    const response = await this.unary<ScoreHandResponse__Output>(
      (md, opts, cb) => this.rules.ScoreHand(message, md, opts, cb),
      undefined,
      call,
    );
    return { delta: [...response.delta], saved: [...response.saved] };
  }
}

/** The variant and options of a rules query, once every string of the query is found
 * sendable (`checkText`). */
function rulesBase(query: RulesQuery): { variant: string; options?: Struct } {
  checkText(query, "");
  return {
    variant: query.variant,
    ...(query.options !== undefined ? { options: toStruct(query.options) } : {}),
  };
}

function toVariant(variant: Variant__Output): Variant {
  return {
    ...variant,
    options: variant.options.map((option) => ({
      ...option,
      allowed: fromValue(option.allowed),
      defaultValue: fromValue(option.defaultValue),
    })),
  };
}

function toAuditEntry(entry: AuditEntry__Output): AuditEntry {
  return { ...entry, action: fromStruct(entry.action) };
}

function toWatchItem(message: WatchGameResponse__Output): WatchItem | undefined {
  if (message.item === "event" && message.event) {
    return { type: "event", event: toEvent(message.event) };
  }
  if (message.item === "snapshot" && message.snapshot) {
    return {
      type: "snapshot",
      snapshot: { version: message.snapshot.version, view: toView(message.snapshot.viewJson) },
    };
  }
  return undefined;
}

export class Session {
  /** The game version this session last saw (updated by view, legalActions and submit). */
  version = 0;
  /** The token as sent (without the blanks around it; "" for none). */
  protected readonly token: string;

  /** A `gameId` with a lone UTF-16 surrogate, or a token that no header can carry, is refused
   * with a TypeError (`checkText`; a token is sent without the blanks around it). */
  constructor(
    readonly client: RefereeClient,
    readonly gameId: string,
    token: string,
  ) {
    checkText(gameId, "gameId");
    this.token = sendableToken(token, "token") ?? "";
  }

  async view(call: CallOptions = {}): Promise<GameView> {
    const response = await this.client.unary<GetGameResponse__Output>(
      (md, opts, cb) => this.client.referee.GetGame({ gameId: this.gameId }, md, opts, cb),
      this.token,
      call,
    );
    this.version = response.version;
    return toView(response.viewJson);
  }

  /** The game as a pinochle-record/1 document (adjudicator, or anyone once the game is over). */
  async export(call: CallOptions = {}): Promise<JsonObject> {
    const response = await this.client.unary<ExportGameResponse__Output>(
      (md, opts, cb) => this.client.referee.ExportGame({ gameId: this.gameId }, md, opts, cb),
      this.token,
      call,
    );
    return fromStruct(response.record);
  }

  /** One page of the audit log: entries after `afterSeq`, at most `pageSize` of them (0: the
   * server's page size). The next page starts after the last entry's `seq`. */
  async auditLog(afterSeq = 0, pageSize = 0, call: CallOptions = {}): Promise<AuditEntry[]> {
    const response = await this.client.unary<GetAuditLogResponse__Output>(
      (md, opts, cb) =>
        this.client.referee.GetAuditLog(
          {
            gameId: this.gameId,
            afterSeq: int64(afterSeq, "afterSeq"),
            pageSize: int32(pageSize, "pageSize"),
          },
          md,
          opts,
          cb,
        ),
      this.token,
      call,
    );
    return response.entries.map(toAuditEntry);
  }

  /** The server's check of the game's audit hash chain and of its accepted entries against the
   * game's log, with where it breaks. */
  async verifyAuditLog(call: CallOptions = {}): Promise<AuditCheck> {
    const response = await this.client.unary<VerifyAuditLogResponse__Output>(
      (md, opts, cb) => this.client.referee.VerifyAuditLog({ gameId: this.gameId }, md, opts, cb),
      this.token,
      call,
    );
    return {
      intact: response.intact,
      entries: response.entries,
      firstBadSeq: response.firstBadSeq,
      detail: response.detail,
    };
  }

  /** Whether the game's audit log is intact (`verifyAuditLog` says where it is not). */
  async auditLogIntact(call: CallOptions = {}): Promise<boolean> {
    return (await this.verifyAuditLog(call)).intact;
  }

  /**
   * The caller's events after `fromVersion` (0: the whole game), then new ones as they happen,
   * until the game ends or the loop stops: breaking out (or `return()`) cancels the call, even
   * while it waits for the next event, and aborting `options.signal` does too (the loop then
   * throws RefereeError `CANCELLED`). A snapshot comes first when the server no longer keeps
   * events that old for the caller. To resume after a disconnect pass `afterSeq`, the `seq` of
   * the last event received (one version can carry several events, so a version alone cannot
   * say where the stream broke). No deadline unless `options.deadlineMs` sets one, which bounds
   * the whole watch, resumptions included.
   *
   * With `options.resume` the loop goes on across an UNAVAILABLE (the server stopping, reason
   * `SHUTTING_DOWN`, or the connection lost): the watch is opened again after the last event
   * handled (the error's `metadata.after_seq`, else the last event received), waiting for the
   * server with gRPC's wait-for-ready, 50 ms doubling to 2 s between attempts, each re-opening
   * with what is left of `options.deadlineMs` (past it the loop throws `DEADLINE_EXCEEDED`, as
   * without resume). Other errors are thrown; breaking out and `options.signal` stop it at once,
   * even while it waits.
   */
  watch(fromVersion = 0, afterSeq = 0, options: WatchOptions = {}): WatchStream {
    int64(fromVersion, "fromVersion");
    int64(afterSeq, "afterSeq");
    const open = (after: number, waitForReady: boolean, deadlineMs: number): WatchStream =>
      this.client.stream(
        (md, opts) =>
          this.client.referee.WatchGame(
            { gameId: this.gameId, fromVersion, afterSeq: after },
            md,
            opts,
          ),
        toWatchItem,
        this.token,
        { ...options, waitForReady, deadlineMs },
      );
    const deadlineMs = options.deadlineMs ?? 0;
    if (!options.resume) return open(afterSeq, false, deadlineMs);
    const closed = this.client.closing.signal;
    const stop = options.signal ? AbortSignal.any([options.signal, closed]) : closed;
    return resumable(open, fromVersion, afterSeq, deadlineMs, stop);
  }
}

export class SeatSession extends Session {
  /** What this seat may do now: concrete actions and descriptors (empty when not its turn). */
  async legalActions(call: CallOptions = {}): Promise<LegalEntry[]> {
    const response = await this.client.unary<ListLegalActionsResponse__Output>(
      (md, opts, cb) => this.client.referee.ListLegalActions({ gameId: this.gameId }, md, opts, cb),
      this.token,
      call,
    );
    this.version = response.version;
    return response.actions.map((entry) => fromStruct(entry) as unknown as LegalEntry);
  }

  /** Submit an action in its A.4 JSON form; a refusal throws RefereeError. */
  async submit(action: Action, options: SubmitOptions = {}): Promise<SubmitResult> {
    checkText(action, "action");
    checkText(options.requestId, "requestId");
    const request = {
      gameId: this.gameId,
      action: actionToProto(action),
      expectedVersion: int64(options.expectedVersion ?? this.version, "expectedVersion"),
      // "" too gets a fresh one (as in the Python client): an empty id means no idempotency.
      requestId: options.requestId || randomUUID(),
    };
    const response = await this.client.unary<SubmitActionResponse__Output>(
      (md, opts, cb) => this.client.referee.SubmitAction(request, md, opts, cb),
      this.token,
      options,
    );
    this.version = response.version;
    return {
      version: response.version,
      view: toView(response.viewJson),
      events: response.events.map(toEvent),
    };
  }
}

export {
  RefereeError,
  VIOLATION_CODES,
  isViolationCode,
  decodeStatusDetails,
  type ViolationCode,
  type ServiceReason,
  type StatusName,
  type Reason,
} from "./errors";
export type { Json, JsonObject } from "./struct";
