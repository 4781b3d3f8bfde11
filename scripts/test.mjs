#!/usr/bin/env node
// `npm test`: every *.test.ts under src/, test/ and console/ (the administration console's), with node's test runner, on the backend chosen by
// DATABASE_URL (unset: embedded PGlite). Extra arguments are passed on (e.g. a file list or --test-only).
import { spawnSync } from "node:child_process";
import { mkdirSync, readdirSync, rmSync } from "node:fs";
import path from "node:path";

const root = path.resolve(import.meta.dirname, "..");
const args = process.argv.slice(2);
const files = args.filter((a) => !a.startsWith("-"));
const flags = args.filter((a) => a.startsWith("-"));

function find(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === "node_modules" || entry.name === "gen" ? [] : find(full);
    return entry.name.endsWith(".test.ts") ? [path.relative(root, full)] : [];
  });
}

// One directory per run, so concurrent runs (several terminals, CI) never delete each other's databases.
const tmp = path.join(root, ".test-tmp", `run-${process.pid}`);
rmSync(tmp, { recursive: true, force: true });
mkdirSync(tmp, { recursive: true });
process.on("exit", () => rmSync(tmp, { recursive: true, force: true }));

// Tests that start `platform` as a process run the compiled JavaScript (bin/platform.js): build it once
// here when src/ changed, rather than in the first of those tests.
const { ensureBuilt } = await import("./build.mjs");
if ((await ensureBuilt({ print: (line) => console.log(`build: ${line}`) })) === "failed")
  console.log("build: failed; tests that start platform as a process will fail");

// A migrated empty PGlite directory that tests copy instead of running initdb each time (~3 s saved per server).
if (!process.env.DATABASE_URL) {
  const template = path.join(tmp, "pglite-template");
  const made = spawnSync(process.execPath, ["--import", "tsx", "test/make-template.ts", template], {
    cwd: root,
    stdio: "inherit",
  });
  if (made.status !== 0) process.exit(made.status ?? 1);
  process.env.PLATFORM_TEST_PGLITE_TEMPLATE = template;
}
process.env.PLATFORM_TEST_TMP = tmp;
console.log(`backend: ${process.env.DATABASE_URL ? "PostgreSQL (DATABASE_URL)" : "embedded PGlite"}`);

const testFiles = files.length
  ? files
  : [
      ...find(path.join(root, "src")),
      ...find(path.join(root, "test")),
      ...find(path.join(root, "console")),
    ].sort();
const result = spawnSync(
  process.execPath,
  ["--import", "tsx", "--test", "--test-concurrency=2", "--test-timeout=300000", ...flags, ...testFiles],
  { cwd: root, stdio: "inherit", env: process.env },
);
process.exit(result.status ?? 1);
