#!/usr/bin/env node
// `npm test`: every *.test.ts under src/, test/ and console/ (the administration console's), with node's
// test runner, on the backend chosen by DATABASE_URL (unset: embedded PGlite). Extra arguments are passed
// on (e.g. a file list or --test-only).
import { spawnSync } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
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

// How much slower than an idle machine this one runs (test/helpers.ts `testTimeScale` is the same rule, which
// the tests apply to their waits): PLATFORM_TEST_TIME_SCALE, else the load average per core, 1 to 8.
const setScale = Number(process.env.PLATFORM_TEST_TIME_SCALE);
const scale =
  Number.isFinite(setScale) && setScale > 0
    ? Math.max(1, setScale)
    : Math.min(8, Math.max(1, os.loadavg()[0] / Math.max(1, os.availableParallelism())));
// A file's limit only stops a hang: on an idle machine the slowest file takes well under a minute.
const fileLimitMs = Math.round(600_000 * scale);
console.log(`time scale: ${scale.toFixed(1)} (file limit ${Math.round(fileLimitMs / 1000)} s)`);

// Files that drive Chromium are the slowest: they go first, so that the run does not end with one of them
// alone on a machine whose other core is idle.
const usesBrowser = (file) =>
  /playwright-core|\.\/login-browser\.ts/.test(readFileSync(path.join(root, file), "utf8"));
const testFiles = files.length
  ? files
  : [...find(path.join(root, "src")), ...find(path.join(root, "test")), ...find(path.join(root, "console"))]
      .sort()
      .map((file) => ({ file, browser: usesBrowser(file) }))
      .sort((a, b) => Number(b.browser) - Number(a.browser))
      .map(({ file }) => file);
const concurrency = process.env.PLATFORM_TEST_CONCURRENCY ?? "2";
const result = spawnSync(
  process.execPath,
  [
    "--import",
    "tsx",
    "--test",
    `--test-concurrency=${concurrency}`,
    `--test-timeout=${fileLimitMs}`,
    ...flags,
    ...testFiles,
  ],
  { cwd: root, stdio: "inherit", env: process.env },
);
process.exit(result.status ?? 1);
