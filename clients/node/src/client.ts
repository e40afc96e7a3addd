// A small typed wrapper over the grpc-js stubs of pinochle.referee.v1 (generated from
// ../../protos by `npm run generate`), mirroring clients/python/pinochle_client/client.py:
// create a game, act for a seat (tracking the game version), watch events, and get refusals as
// a typed `RefereeError`.

import { randomUUID } from "node:crypto";
import * as path from "node:path";

import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";

import type { ProtoGrpcType } from "../generated/referee";
import type { Struct } from "../generated/google/protobuf/Struct";
import type { Action as ProtoAction } from "../generated/pinochle/referee/v1/Action";
import type { AuditEntry__Output } from "../generated/pinochle/referee/v1/AuditEntry";
import type { CreateGameRequest } from "../generated/pinochle/referee/v1/CreateGameRequest";
import type { CreateGameResponse__Output } from "../generated/pinochle/referee/v1/CreateGameResponse";
import type { ExportGameResponse__Output } from "../generated/pinochle/referee/v1/ExportGameResponse";
import type { GetAuditLogResponse__Output } from "../generated/pinochle/referee/v1/GetAuditLogResponse";
import type { GetGameResponse__Output } from "../generated/pinochle/referee/v1/GetGameResponse";
import type { LegalPlaysRequest } from "../generated/pinochle/referee/v1/LegalPlaysRequest";
import type { LegalPlaysResponse__Output } from "../generated/pinochle/referee/v1/LegalPlaysResponse";
import type { ListLegalActionsResponse__Output } from "../generated/pinochle/referee/v1/ListLegalActionsResponse";
import type { ListVariantsResponse__Output } from "../generated/pinochle/referee/v1/ListVariantsResponse";
import type { SubmitActionResponse__Output } from "../generated/pinochle/referee/v1/SubmitActionResponse";
import type { VerifyAuditLogResponse__Output } from "../generated/pinochle/referee/v1/VerifyAuditLogResponse";
import type { Event__Output } from "../generated/pinochle/referee/v1/Event";
import type { RefereeServiceClient } from "../generated/pinochle/referee/v1/RefereeService";
import type { RulesServiceClient } from "../generated/pinochle/referee/v1/RulesService";
import type { ScoreHandRequest } from "../generated/pinochle/referee/v1/ScoreHandRequest";
import type { ScoreHandResponse__Output } from "../generated/pinochle/referee/v1/ScoreHandResponse";
import type { ScoreMeldResponse__Output } from "../generated/pinochle/referee/v1/ScoreMeldResponse";
import type { TrickWinnerResponse__Output } from "../generated/pinochle/referee/v1/TrickWinnerResponse";
import type { Variant__Output } from "../generated/pinochle/referee/v1/Variant";
import type { WatchGameResponse__Output } from "../generated/pinochle/referee/v1/WatchGameResponse";
import { RefereeError } from "./errors";
import { fromStruct, toStruct, type Json, type JsonObject } from "./struct";

// ---------------------------------------------------------------------------------------------
// The JSON shapes of the contract (RULES.md A.4 actions, A.10 legal-action entries, views).

export type Suit = "S" | "H" | "D" | "C";
/** A card in the contract's notation, e.g. "AS", "10H", "QD". */
export type Card = string;

export interface MeldCombination {
  name: string;
  cards: Card[];
}

/** A game action in its A.4 JSON form. */
export type Action =
  | { type: "bid"; amount: number }
  | { type: "pass"; help?: boolean }
  | { type: "bid_or_redeal" }
  | { type: "declare_trump"; suit: Suit }
  | { type: "pass_cards"; cards: Card[] }
  | { type: "discard"; cards: Card[] }
  | { type: "meld"; cards: Card[]; melds?: MeldCombination[]; points?: number; name?: string }
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

/** One entry of ListLegalActions: a concrete action or a descriptor (RULES.md A.10 item 2). */
export type LegalEntry =
  | BidDescriptor
  | CardsDescriptor
  | MeldDescriptor
  | NamedMeld
  | Exclude<Action, { type: "bid" | "pass_cards" | "discard" | "meld" }>;

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
  [key: string]: unknown;
}

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

/** One item of a WatchGame stream. */
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
  /** The server's adjudicator credential (for given deals). */
  adjudicatorToken?: string;
}

export interface CreatedGame {
  gameId: string;
  seatTokens: string[];
  spectatorToken: string;
  adjudicatorToken: string;
  version: number;
}

export interface SubmitOptions {
  /** Defaults to the version this session last saw. */
  expectedVersion?: number;
  /** Defaults to a fresh UUID; reuse one to retry safely. */
  requestId?: string;
}

export interface SubmitResult {
  version: number;
  view: GameView;
  events: GameEvent[];
}

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
  /** Deadline of each unary call in milliseconds (default 30 000; 0: none). */
  deadlineMs?: number;
  /** Where referee.proto lives (default: the repository's protos/, or REFEREE_PROTOS_DIR). */
  protosDir?: string;
}

// ---------------------------------------------------------------------------------------------
// Loading the service definition. The conversion options must match the generator's flags
// (package.json `generate`), which is what makes the generated types true.

export const PROTO_FILE = "pinochle/referee/v1/referee.proto";

export const LOADER_OPTIONS: protoLoader.Options = {
  keepCase: false,
  longs: Number,
  enums: String,
  defaults: true,
  oneofs: true,
};

function defaultProtosDir(): string {
  // dist/src/client.js -> clients/node/dist/src -> the repository root's protos/.
  return (
    process.env["REFEREE_PROTOS_DIR"] ?? path.resolve(__dirname, "..", "..", "..", "..", "protos")
  );
}

const loaded = new Map<string, ProtoGrpcType>();

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
export function actionToProto(action: Action): ProtoAction {
  switch (action.type) {
    case "bid":
      return { bid: { amount: action.amount } };
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
          // present (even empty) only when the player declares combinations
          ...(action.melds !== undefined
            ? { melds: { items: action.melds.map((m) => ({ name: m.name, cards: [...m.cards] })) } }
            : {}),
          ...(action.points !== undefined ? { points: action.points } : {}),
          ...(action.name !== undefined ? { name: action.name } : {}),
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

function bearer(token: string | undefined): grpc.Metadata {
  const metadata = new grpc.Metadata();
  if (token) metadata.set("authorization", `Bearer ${token}`);
  return metadata;
}

type Callback<T> = grpc.requestCallback<T>;

// ---------------------------------------------------------------------------------------------
// The client

export class RefereeClient {
  readonly referee: RefereeServiceClient;
  readonly rules: RulesServiceClient;
  private readonly deadlineMs: number;

  constructor(
    readonly target: string,
    options: ClientOptions = {},
  ) {
    const proto = loadProto(options.protosDir ?? defaultProtosDir());
    const credentials = options.credentials ?? grpc.credentials.createInsecure();
    const v1 = proto.pinochle.referee.v1;
    this.referee = new v1.RefereeService(target, credentials, options.channelOptions);
    // Share the channel between both services.
    this.rules = new v1.RulesService(target, credentials, {
      ...options.channelOptions,
      channelOverride: this.referee.getChannel(),
    });
    this.deadlineMs = options.deadlineMs ?? 30_000;
  }

  close(): void {
    this.referee.close();
  }

  /** Resolves once the channel is connected (rejects after `timeoutMs`). */
  waitForReady(timeoutMs = 10_000): Promise<void> {
    return new Promise((resolve, reject) => {
      this.referee.waitForReady(Date.now() + timeoutMs, (error) =>
        error ? reject(error) : resolve(),
      );
    });
  }

  /** @internal one unary call; refusals become RefereeError. */
  unary<T>(
    invoke: (metadata: grpc.Metadata, options: grpc.CallOptions, callback: Callback<T>) => unknown,
    token?: string,
  ): Promise<T> {
    const options: grpc.CallOptions =
      this.deadlineMs > 0 ? { deadline: Date.now() + this.deadlineMs } : {};
    return new Promise<T>((resolve, reject) => {
      invoke(bearer(token), options, (error, response) => {
        if (error) reject(RefereeError.from(error));
        else if (response === undefined)
          reject(new RefereeError({ code: grpc.status.INTERNAL, details: "empty response" }));
        else resolve(response);
      });
    });
  }

  async createGame(request: CreateGameOptions): Promise<CreatedGame> {
    const message: CreateGameRequest = {
      variant: request.variant,
      firstDealer: request.firstDealer ?? 0,
      playerNames: request.players ?? [],
      ...(request.options !== undefined ? { options: toStruct(request.options) } : {}),
    };
    if (request.seed !== undefined) message.seed = request.seed;
    else if (request.givenDeals !== undefined)
      message.givenDeals = { deals: request.givenDeals.map(toStruct) };
    else message.serverShuffle = {};
    const response = await this.unary<CreateGameResponse__Output>(
      (md, opts, cb) => this.referee.CreateGame(message, md, opts, cb),
      request.adjudicatorToken,
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

  async listVariants(): Promise<Variant__Output[]> {
    const response = await this.unary<ListVariantsResponse__Output>((md, opts, cb) =>
      this.referee.ListVariants({}, md, opts, cb),
    );
    return response.variants;
  }

  // Rules queries (RulesService).

  /** The meld `hand` makes with `trump`; an empty hand makes 0. */
  async scoreMeld(query: ScoreMeldQuery): Promise<MeldResult> {
    const message = { ...rulesBase(query), hand: [...query.hand], trump: query.trump };
    const response = await this.unary<ScoreMeldResponse__Output>((md, opts, cb) =>
      this.rules.ScoreMeld(message, md, opts, cb),
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
  async legalPlays(query: LegalPlaysQuery): Promise<Card[]> {
    const message: LegalPlaysRequest = {
      ...rulesBase(query),
      hand: [...query.hand],
      trick: [...query.trick],
      trump: query.trump,
    };
    if (query.phase !== undefined) message.phase = query.phase;
    if (query.seatOfPartnerInTrick !== undefined)
      message.seatOfPartnerInTrick = query.seatOfPartnerInTrick;
    const response = await this.unary<LegalPlaysResponse__Output>((md, opts, cb) =>
      this.rules.LegalPlays(message, md, opts, cb),
    );
    return [...response.legal];
  }

  /** The index into `trick` of the card that wins it. */
  async trickWinner(query: TrickWinnerQuery): Promise<number> {
    const message = { ...rulesBase(query), trick: [...query.trick], trump: query.trump };
    const response = await this.unary<TrickWinnerResponse__Output>((md, opts, cb) =>
      this.rules.TrickWinner(message, md, opts, cb),
    );
    return response.winner;
  }

  /** A hand's deltas from bid, meld, card points and tricks. */
  async scoreHand(query: ScoreHandQuery): Promise<HandScore> {
    const message: ScoreHandRequest = {
      ...rulesBase(query),
      meld: [...query.meld],
      points: [...query.points],
      tricks: [...(query.tricks ?? [])],
      dix: [...(query.dix ?? [])],
      conceded: query.conceded ?? false,
    };
    if (query.bid !== undefined && query.bid !== null) message.bid = query.bid;
    if (query.declarer !== undefined && query.declarer !== null) message.declarer = query.declarer;
    const response = await this.unary<ScoreHandResponse__Output>((md, opts, cb) =>
      this.rules.ScoreHand(message, md, opts, cb),
    );
    return { delta: [...response.delta], saved: [...response.saved] };
  }
}

function rulesBase(query: RulesQuery): { variant: string; options?: Struct } {
  return {
    variant: query.variant,
    ...(query.options !== undefined ? { options: toStruct(query.options) } : {}),
  };
}

export class Session {
  /** The game version this session last saw (updated by view, legalActions and submit). */
  version = 0;

  constructor(
    readonly client: RefereeClient,
    readonly gameId: string,
    protected readonly token: string,
  ) {}

  async view(): Promise<GameView> {
    const response = await this.client.unary<GetGameResponse__Output>(
      (md, opts, cb) => this.client.referee.GetGame({ gameId: this.gameId }, md, opts, cb),
      this.token,
    );
    this.version = response.version;
    return toView(response.viewJson);
  }

  /** The game as a pinochle-record/1 document (adjudicator, or anyone once the game is over). */
  async export(): Promise<JsonObject> {
    const response = await this.client.unary<ExportGameResponse__Output>(
      (md, opts, cb) => this.client.referee.ExportGame({ gameId: this.gameId }, md, opts, cb),
      this.token,
    );
    return fromStruct(response.record);
  }

  async auditLog(afterSeq = 0): Promise<AuditEntry__Output[]> {
    const response = await this.client.unary<GetAuditLogResponse__Output>(
      (md, opts, cb) =>
        this.client.referee.GetAuditLog({ gameId: this.gameId, afterSeq }, md, opts, cb),
      this.token,
    );
    return response.entries;
  }

  async verifyAuditLog(): Promise<boolean> {
    const response = await this.client.unary<VerifyAuditLogResponse__Output>(
      (md, opts, cb) => this.client.referee.VerifyAuditLog({ gameId: this.gameId }, md, opts, cb),
      this.token,
    );
    return response.intact;
  }

  /**
   * The caller's events after `fromVersion` (0: the whole game), then new ones as they happen,
   * until the game ends or the loop stops (breaking out cancels the call). A snapshot comes
   * first when the server no longer keeps events that old for the caller. To resume after a
   * disconnect pass `afterSeq`, the `seq` of the last event received (one version can carry
   * several events, so a version alone cannot say where the stream broke).
   */
  async *watch(fromVersion = 0, afterSeq = 0): AsyncGenerator<WatchItem, void, undefined> {
    const call = this.client.referee.WatchGame(
      { gameId: this.gameId, fromVersion, afterSeq },
      bearer(this.token),
    );
    // A cancelled call reports CANCELLED after the loop has let go of the stream.
    call.on("error", () => undefined);
    let finished = false;
    try {
      for await (const message of call as AsyncIterable<WatchGameResponse__Output>) {
        if (message.item === "event" && message.event) {
          yield { type: "event", event: toEvent(message.event) };
        } else if (message.item === "snapshot" && message.snapshot) {
          yield {
            type: "snapshot",
            snapshot: { version: message.snapshot.version, view: toView(message.snapshot.viewJson) },
          };
        }
      }
      finished = true;
    } catch (error) {
      finished = true;
      throw RefereeError.from(error);
    } finally {
      if (!finished) call.cancel();
    }
  }
}

export class SeatSession extends Session {
  /** What this seat may do now: concrete actions and descriptors (empty when not its turn). */
  async legalActions(): Promise<LegalEntry[]> {
    const response = await this.client.unary<ListLegalActionsResponse__Output>(
      (md, opts, cb) => this.client.referee.ListLegalActions({ gameId: this.gameId }, md, opts, cb),
      this.token,
    );
    this.version = response.version;
    return response.actions.map((entry) => fromStruct(entry) as unknown as LegalEntry);
  }

  /** Submit an action in its A.4 JSON form; a refusal throws RefereeError. */
  async submit(action: Action, options: SubmitOptions = {}): Promise<SubmitResult> {
    const request = {
      gameId: this.gameId,
      action: actionToProto(action),
      expectedVersion: options.expectedVersion ?? this.version,
      requestId: options.requestId ?? randomUUID(),
    };
    const response = await this.client.unary<SubmitActionResponse__Output>(
      (md, opts, cb) => this.client.referee.SubmitAction(request, md, opts, cb),
      this.token,
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
