export * from "./client";
export * from "./bot";
export * from "./auditChain";
export { fromStruct, toStruct, fromValue, toValue } from "./struct";
