// Typed, rich errors: the referee refuses a call with a gRPC status whose
// `grpc-status-details-bin` trailer holds a google.rpc.Status. Its details carry a
// google.rpc.ErrorInfo (`reason` = the RULES.md A.5 violation code or a service reason,
// `metadata.version` = the game's current version), for a malformed request a
// google.rpc.BadRequest naming the offending field(s), and for a request refused by a rate
// limit a google.rpc.RetryInfo saying when to try again.
//
// The google/rpc protos are not vendored: they come from the `google-proto-files` npm package
// (Google's public, Apache-2.0 googleapis protos) and are decoded with protobufjs.

import * as grpc from "@grpc/grpc-js";
import * as googleProtoFiles from "google-proto-files";
import type * as protobuf from "protobufjs";

import type { BadRequest__Output } from "../generated/google/rpc/BadRequest";
import type { ErrorInfo__Output } from "../generated/google/rpc/ErrorInfo";
import type { RetryInfo__Output } from "../generated/google/rpc/RetryInfo";
import type { Status__Output } from "../generated/google/rpc/Status";

/** RULES.md A.5, in precedence order (the first that applies is the one reported). */
export const VIOLATION_CODES = [
  "MALFORMED_ACTION",
  "GAME_OVER",
  "NOT_YOUR_TURN",
  "WRONG_PHASE",
  "CARD_NOT_IN_HAND",
  "BID_TOO_LOW",
  "BID_BAD_RAISE",
  "DEALER_MUST_BID",
  "BID_OR_REDEAL_NOT_ALLOWED",
  "TRUMP_NEEDS_MARRIAGE",
  "WRONG_CARD_COUNT",
  "CANNOT_BURY_MELD",
  "MUST_FOLLOW_SUIT",
  "MUST_HEAD_TRICK",
  "MUST_TRUMP",
  "MUST_OVERTRUMP",
  "MELD_NOT_ALLOWED",
  "INVALID_MELD",
  "MELD_NEEDS_NEW_CARD",
  "MELD_CARD_REUSED",
  "MELD_MISCOUNT",
  "DIX_EXCHANGE_NOT_ALLOWED",
  "CONCEDE_NOT_ALLOWED",
] as const;

/** An A.5 violation code: why the referee refused a game action. */
export type ViolationCode = (typeof VIOLATION_CODES)[number];

/** A gRPC status name ("NOT_FOUND", "UNAUTHENTICATED", ...). */
export type StatusName = keyof typeof grpc.status;

/** Reasons that are not rule violations: a stale `expected_version`, a `request_id` already
 * used for another action of the seat (`REQUEST_ID_REUSED`, ALREADY_EXISTS), a caller without
 * a seat whose refused actions spent the game's budget (`TOO_MANY_REFUSALS`,
 * RESOURCE_EXHAUSTED, with `retryDelay`), a request larger than the server's
 * `--max-message-bytes` (`REQUEST_TOO_LARGE`, RESOURCE_EXHAUSTED, `metadata.limit` the limit in
 * bytes), a WatchGame beyond the server's `--max-watchers` (`TOO_MANY_WATCHERS`,
 * RESOURCE_EXHAUSTED, `metadata.limit` the cap, `metadata.version` the game's), a CreateGame beyond its `--max-games` (`TOO_MANY_GAMES`,
 * RESOURCE_EXHAUSTED, `metadata.limit` the cap), an ExportGame record larger than the server
 * sends (`RESPONSE_TOO_LARGE`, RESOURCE_EXHAUSTED, `metadata.limit` in bytes), a health Watch or
 * reflection stream beyond its `--max-service-streams` (`TOO_MANY_STREAMS`, RESOURCE_EXHAUSTED,
 * `metadata.limit` the cap), a call beyond its `--max-pending-calls` (`TOO_MANY_CALLS`,
 * RESOURCE_EXHAUSTED, `metadata.limit` the limit), a WatchGame stream the server ended as it stopped (`SHUTTING_DOWN`,
 * UNAVAILABLE; resume with `metadata.after_seq`), a GetAuditLog page that reaches an entry whose
 * stored row is damaged (`AUDIT_ENTRY_UNREADABLE`, DATA_LOSS, `metadata.seq` the entry), a call to a
 * replica that stopped serving a database schema downgraded under it (`STORE_SCHEMA_CHANGED`,
 * UNAVAILABLE; nothing was written: send it to another replica), or, for refusals
 * without a more specific reason (unknown game, bad token, bad request field, transport
 * failures), the gRPC status name itself. */
export const SERVICE_REASONS = [
  "STALE_VERSION",
  "REQUEST_ID_REUSED",
  "TOO_MANY_REFUSALS",
  "REQUEST_TOO_LARGE",
  "TOO_MANY_WATCHERS",
  "TOO_MANY_GAMES",
  "RESPONSE_TOO_LARGE",
  "TOO_MANY_STREAMS",
  "TOO_MANY_CALLS",
  "SHUTTING_DOWN",
  "AUDIT_ENTRY_UNREADABLE",
  "STORE_SCHEMA_CHANGED",
] as const;
export type ServiceReason = (typeof SERVICE_REASONS)[number] | StatusName;
const SERVICE: ReadonlySet<string> = new Set(SERVICE_REASONS);

/** Every `RefereeError.reason`. */
export type Reason = ViolationCode | ServiceReason;

const VIOLATIONS: ReadonlySet<string> = new Set(VIOLATION_CODES);

export function isViolationCode(reason: string): reason is ViolationCode {
  return VIOLATIONS.has(reason);
}

function statusName(code: number): StatusName {
  const name = grpc.status[code as grpc.status] as StatusName | undefined;
  return name ?? "UNKNOWN";
}

function isReason(reason: string): reason is Reason {
  return isViolationCode(reason) || SERVICE.has(reason) || reason in grpc.status;
}

const ERROR_INFO = "google.rpc.ErrorInfo";
const BAD_REQUEST = "google.rpc.BadRequest";
const RETRY_INFO = "google.rpc.RetryInfo";

let rpcRoot: protobuf.Root | undefined;

function rpcTypes(): protobuf.Root {
  if (rpcRoot === undefined) {
    // A google-proto-files root resolves google/protobuf/* imports from the same package.
    const root = googleProtoFiles.loadSync(googleProtoFiles.getProtoPath("rpc", "status.proto"));
    root.loadSync(googleProtoFiles.getProtoPath("rpc", "error_details.proto"));
    rpcRoot = root;
  }
  return rpcRoot;
}

// Decoded with the same conversion options the stubs use (see client.ts), so the objects
// match the generated `__Output` types.
const TO_OBJECT: protobuf.IConversionOptions = {
  longs: Number,
  enums: String,
  defaults: true,
  arrays: true,
  objects: true,
  oneofs: true,
};

/** What the `grpc-status-details-bin` trailer says, decoded. */
export interface RichDetails {
  status?: Status__Output;
  errorInfo?: ErrorInfo__Output;
  badRequest?: BadRequest__Output;
  retryInfo?: RetryInfo__Output;
}

/** Decode google.rpc.Status and its ErrorInfo / BadRequest / RetryInfo details from call
 * metadata. What does not decode (a proxy or another server may send anything) is left out:
 * this runs in grpc-js's callbacks, where a throw is an uncaught exception. */
export function decodeStatusDetails(metadata: grpc.Metadata | undefined): RichDetails {
  const raw = metadata?.get("grpc-status-details-bin")[0];
  if (raw === undefined || typeof raw === "string") return {};
  const root = rpcTypes();
  const statusType = root.lookupType("google.rpc.Status");
  let status: Status__Output;
  try {
    status = statusType.toObject(statusType.decode(raw), TO_OBJECT) as Status__Output;
  } catch {
    return {};
  }
  const out: RichDetails = { status };
  for (const detail of status.details) {
    // protobufjs names Any's field `typeUrl`; proto-loader's generated type says `type_url`.
    const any = detail as { typeUrl?: string; type_url?: string; value: Buffer };
    const typeUrl = any.typeUrl ?? any.type_url ?? "";
    const name = typeUrl.slice(typeUrl.lastIndexOf("/") + 1);
    if (name !== ERROR_INFO && name !== BAD_REQUEST && name !== RETRY_INFO) continue;
    const type = root.lookupType(name);
    let value: unknown;
    try {
      value = type.toObject(type.decode(detail.value), TO_OBJECT);
    } catch {
      continue;
    }
    if (name === ERROR_INFO) out.errorInfo = value as ErrorInfo__Output;
    else if (name === BAD_REQUEST) out.badRequest = value as BadRequest__Output;
    else out.retryInfo = value as RetryInfo__Output;
  }
  return out;
}

/**
 * A refused call. `code` is the gRPC status, `reason` the A.5 violation code (for a refused
 * game action) or a service reason (`STALE_VERSION`, `REQUEST_ID_REUSED`, or the status
 * name), `version` the game's current version when the server said it, `fields` the request
 * fields a BadRequest named (e.g. `action.card`), `retryDelay` the seconds a rate limit asks
 * the caller to wait (from a RetryInfo; undefined otherwise).
 *
 * Not through `structuredClone` or `postMessage` (to a worker, a MessagePort, a
 * BroadcastChannel): Node 20 clones an Error as a plain `Error` with its `message`, `stack` and
 * `cause` alone, whatever its own properties (these fields are own enumerable data properties,
 * and are dropped all the same): the copy has no `code`, `reason`, `metadata`, ... and is no
 * `RefereeError` (its `name` is "Error"). Send its fields as plain data instead, which clones
 * whole: `port.postMessage({ ...error, message: error.message })`.
 */
export class RefereeError extends Error {
  override readonly name = "RefereeError";
  readonly code: grpc.status;
  readonly codeName: StatusName;
  readonly reason: Reason;
  /** The reason exactly as sent (differs from `reason` only for a reason this client does not
   * know, which `reason` reports as the status name). */
  readonly rawReason: string;
  readonly domain: string;
  readonly metadata: Readonly<Record<string, string>>;
  readonly fields: readonly string[];
  readonly version: number | undefined;
  readonly retryDelay: number | undefined;
  /** The server's message (names the seat, the action and the rule). */
  readonly details: string;

  constructor(init: {
    code: grpc.status;
    details: string;
    reason?: string;
    domain?: string;
    metadata?: Record<string, string>;
    fields?: string[];
    retryDelay?: number;
  }) {
    const codeName = statusName(init.code);
    const raw = init.reason || codeName;
    const reason: Reason = isReason(raw) ? raw : codeName;
    super(`${codeName} ${raw}: ${init.details}`);
    this.code = init.code;
    this.codeName = codeName;
    this.reason = reason;
    this.rawReason = raw;
    this.domain = init.domain ?? "";
    this.metadata = { ...(init.metadata ?? {}) };
    this.fields = [...(init.fields ?? [])];
    this.retryDelay = init.retryDelay;
    this.details = init.details;
    const version = this.metadata["version"];
    this.version = version === undefined || version === "" ? undefined : Number(version);
  }

  /** From a grpc-js error (with or without rich details). */
  static from(error: unknown): RefereeError {
    if (error instanceof RefereeError) return error;
    const serviceError = error as Partial<grpc.ServiceError>;
    if (typeof serviceError.code !== "number") {
      return new RefereeError({ code: grpc.status.UNKNOWN, details: String(error) });
    }
    const rich = decodeStatusDetails(serviceError.metadata);
    return new RefereeError({
      code: serviceError.code,
      details: serviceError.details ?? rich.status?.message ?? "",
      reason: rich.errorInfo?.reason,
      domain: rich.errorInfo?.domain,
      metadata: rich.errorInfo?.metadata,
      fields: rich.badRequest?.fieldViolations.map((v) => v.field),
      retryDelay: seconds(rich.retryInfo?.retryDelay),
    });
  }

  /** True when the refusal is an A.5 rule violation (narrows `reason`). */
  isViolation(): this is RefereeError & { reason: ViolationCode } {
    return isViolationCode(this.reason);
  }
}

function seconds(duration: { seconds: number; nanos: number } | null | undefined): number | undefined {
  return duration == null ? undefined : Number(duration.seconds) + duration.nanos / 1e9;
}
