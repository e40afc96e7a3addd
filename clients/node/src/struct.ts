// google.protobuf.Struct <-> plain JSON values.
//
// The referee sends JSON-shaped values (options, deals, legal-action descriptors, records,
// verdicts) as google.protobuf.Struct so they keep the contract's snake_case names; views and
// event data come as JSON text instead (see client.ts). These helpers
// convert between the proto-loader object form of Struct/Value (loaded with `oneofs: true`, so
// every Value names its set field in `kind`) and ordinary JSON values.

import type { ListValue__Output } from "../generated/google/protobuf/ListValue";
import type { Struct, Struct__Output } from "../generated/google/protobuf/Struct";
import type { Value, Value__Output } from "../generated/google/protobuf/Value";

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

/** A JSON value as a google.protobuf.Value (proto-loader input form). */
export function toValue(data: unknown): Value {
  if (data === null || data === undefined) return { nullValue: "NULL_VALUE" };
  if (typeof data === "boolean") return { boolValue: data };
  if (typeof data === "number") {
    if (!Number.isFinite(data)) throw new TypeError(`not JSON: ${data}`);
    return { numberValue: data };
  }
  if (typeof data === "string") return { stringValue: data };
  if (Array.isArray(data)) return { listValue: { values: data.map(toValue) } };
  if (typeof data === "object") return { structValue: toStruct(data as Record<string, unknown>) };
  throw new TypeError(`not JSON: ${typeof data}`);
}

/** A JSON object as a google.protobuf.Struct (proto-loader input form). */
export function toStruct(data: Record<string, unknown>): Struct {
  // Built by Object.fromEntries, which defines each key as an own property: an assignment
  // (`fields[key] = ...`) to a key "__proto__" (JSON.parse makes one an own property) set the
  // object's prototype instead, and the key was never sent.
  const fields: { [key: string]: Value } = Object.fromEntries(
    Object.entries(data)
      .filter(([, value]) => value !== undefined)
      .map(([key, value]) => [key, toValue(value)]),
  );
  return { fields };
}

/** A decoded google.protobuf.Value as a JSON value. Struct numbers are doubles: integral
 * doubles are already integral JavaScript numbers, so no fix-up is needed. */
export function fromValue(value: Value__Output | null | undefined): Json {
  if (value === null || value === undefined) return null;
  switch (value.kind) {
    case "boolValue":
      return value.boolValue ?? false;
    case "numberValue":
      return value.numberValue ?? 0;
    case "stringValue":
      return value.stringValue ?? "";
    case "listValue":
      return fromList(value.listValue);
    case "structValue":
      return fromStruct(value.structValue);
    case "nullValue":
    case undefined:
      return null;
  }
}

function fromList(list: ListValue__Output | null | undefined): Json[] {
  return (list?.values ?? []).map(fromValue);
}

/** Object keys in a fixed order: `type` first, then the others sorted (by UTF-16 code units,
 * which for the contract's ASCII names is the Python client's order too). */
function keyOrder(a: string, b: string): number {
  if (a === b) return 0;
  if (a === "type") return -1;
  if (b === "type") return 1;
  return a < b ? -1 : 1;
}

/** A decoded google.protobuf.Struct as a JSON object ({} when absent). A Struct is a protobuf
 * map, whose fields come in no fixed order, so the keys are put in `keyOrder`: an equal value
 * always prints the same, as in the Python client. */
export function fromStruct(struct: Struct__Output | null | undefined): JsonObject {
  const fields = struct?.fields ?? {};
  // Own properties, as JSON.parse makes them: a key "__proto__" is a key like any other.
  return Object.fromEntries(
    Object.keys(fields)
      .sort(keyOrder)
      .map((key) => [key, fromValue(fields[key])]),
  ) as JsonObject;
}
