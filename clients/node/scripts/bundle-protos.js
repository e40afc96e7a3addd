// Copies the .proto files the client loads at run time (and the gRPC service config beside
// referee.proto) into dist/protos (run by `npm run build`),
// so the built package works wherever it is installed: every .proto under ../../protos and,
// from the google-proto-files package, the google/* files they import (transitively).
// src/client.ts resolves dist/protos relative to itself (BUNDLED_PROTOS_DIR).
"use strict";

const fs = require("node:fs");
const path = require("node:path");

const packageDir = path.resolve(__dirname, "..");
const sourceDir = path.resolve(packageDir, "..", "..", "protos");
const googleDir = path.dirname(require.resolve("google-proto-files/package.json"));
const outDir = path.join(packageDir, "dist", "protos");

/** The .proto files under `dir`, relative to it (with "/" separators). */
function protoFiles(dir, prefix = "") {
  const found = [];
  for (const entry of fs.readdirSync(path.join(dir, prefix), { withFileTypes: true })) {
    const relative = prefix ? `${prefix}/${entry.name}` : entry.name;
    if (entry.isDirectory()) found.push(...protoFiles(dir, relative));
    else if (entry.name.endsWith(".proto")) found.push(relative);
  }
  return found;
}

function copy(from, relative) {
  const target = path.join(outDir, relative);
  fs.mkdirSync(path.dirname(target), { recursive: true });
  fs.copyFileSync(from, target);
  return fs.readFileSync(from, "utf8");
}

fs.rmSync(outDir, { recursive: true, force: true });
const pending = [];
const copied = new Set();
for (const relative of protoFiles(sourceDir)) {
  copied.add(relative);
  pending.push(copy(path.join(sourceDir, relative), relative));
}
while (pending.length > 0) {
  const text = pending.pop();
  for (const [, name] of text.matchAll(/^\s*import\s+(?:public\s+|weak\s+)?"([^"]+)"\s*;/gm)) {
    if (copied.has(name)) continue;
    const from = path.join(googleDir, name);
    if (!fs.existsSync(from)) throw new Error(`bundle-protos: cannot find the import ${name}`);
    copied.add(name);
    pending.push(copy(from, name));
  }
}
// The gRPC service config beside referee.proto (the client's retry policy).
const serviceConfig = "pinochle/referee/v1/referee_grpc_service_config.json";
copy(path.join(sourceDir, serviceConfig), serviceConfig);
console.log(
  `bundled ${copied.size} .proto files and ${serviceConfig} into ${path.relative(packageDir, outDir)}`,
);
