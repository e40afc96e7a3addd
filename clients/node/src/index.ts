export * from "./client";
export * from "./bot";
export { fromStruct, toStruct, fromValue, toValue } from "./struct";
