#!/usr/bin/env node
// Runs the compiled JavaScript in dist/ (`npm run build`); nothing is compiled while the server runs.
// Where the compiler is installed (a checkout with its devDependencies), dist/ is first rebuilt if src/
// changed since the last build (scripts/build.mjs: a no-op check when it did not). A production install
// (`npm prune --omit=dev`) has no compiler and runs dist/ as it was built.
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";

const entry = new URL("../dist/cli.js", import.meta.url);
const args = process.argv.slice(2);
// A version query answers from package.json alone: no build check, no build output, no compiled code.
if (args.includes("--version") || args.includes("-v") || args[0] === "version") {
  const { version } = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8"));
  process.stdout.write(`platform ${version}\n`);
  process.exit(0);
}
if (compilerInstalled()) {
  const { ensureBuilt } = await import("../scripts/build.mjs");
  const result = await ensureBuilt({ print: (line) => process.stderr.write(`platform: ${line}\n`) });
  if (result === "failed") process.exit(1);
} else if (!existsSync(entry)) {
  process.stderr.write(
    "platform: dist/ is missing and the TypeScript compiler is not installed: build first " +
      "(`npm ci && npm run build`, then `npm prune --omit=dev`)\n",
  );
  process.exit(1);
}

// Stack traces name the TypeScript sources (dist/ has source maps).
process.setSourceMapsEnabled(true);
const { main } = await import(entry.href);
process.exitCode = await main(args);

function compilerInstalled() {
  try {
    createRequire(import.meta.url).resolve("typescript/package.json");
    return true;
  } catch {
    return false;
  }
}
