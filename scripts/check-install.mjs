#!/usr/bin/env node
// `npm run check:install` (.ci/run): the production install of docs/operations.md, done in a copy of this
// checkout (its tracked and new files, as a clone has them) in a temporary directory:
//   npm ci → npm run build → npm prune --omit=dev → platform start on a fresh embedded database → /ready
// and `platform --version`. It prints the size of node_modules before and after the prune and of dist/
// (du; docs/operations.md quotes them). It fails when a step fails, when npm warns about the engine (EBADENGINE), when
// the compiler or tsx survive the prune, or when the server does not get ready within 3 minutes.
// `npm ci` takes the packages from npm's cache when it has them (--prefer-offline).
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";

const root = path.resolve(import.meta.dirname, "..");
const dir = mkdtempSync(path.join(os.tmpdir(), "platform-install-"));
const npm = process.platform === "win32" ? "npm.cmd" : "npm";

function fail(message) {
  console.error(`check-install: ${message}`);
  process.exitCode = 1;
  throw new Error(message);
}

/** Runs a step in the copy; returns its output (printed when it fails). */
function step(name, command, args) {
  const started = performance.now();
  const result = spawnSync(command, args, { cwd: dir, encoding: "utf8", env: { ...process.env, CI: "1" } });
  const output = `${result.stdout ?? ""}${result.stderr ?? ""}`;
  if (result.status !== 0) {
    process.stderr.write(output);
    fail(`${name} failed (exit ${result.status ?? result.signal})`);
  }
  console.log(`check-install: ${name}: ${((performance.now() - started) / 1000).toFixed(1)} s`);
  return output;
}

/** The disk usage of a directory of the copy, in MB (`du -sm`). */
function size(name) {
  const result = spawnSync("du", ["-sm", name], { cwd: dir, encoding: "utf8" });
  return result.status === 0 ? `${result.stdout.split("\t")[0]} MB` : "(du failed)";
}

try {
  const files = execFileSync("git", ["ls-files", "-z", "--cached", "--others", "--exclude-standard"], {
    cwd: root,
    encoding: "utf8",
  });
  for (const file of files.split("\0")) {
    if (!file || !existsSync(path.join(root, file))) continue;
    mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
    copyFileSync(path.join(root, file), path.join(dir, file));
  }
  const install = step("npm ci", npm, ["ci", "--prefer-offline", "--no-audit", "--no-fund"]);
  if (/EBADENGINE/.test(install)) {
    process.stderr.write(install);
    fail(`npm ci warns about the engine on node ${process.version}`);
  }
  step("npm run build", npm, ["run", "build"]);
  const before = size("node_modules");
  step("npm prune --omit=dev", npm, ["prune", "--omit=dev", "--no-audit", "--no-fund"]);
  console.log(
    `check-install: node_modules ${before} → ${size("node_modules")} after the prune; dist/ ${size("dist")}`,
  );
  for (const dev of ["typescript", "tsx", "@biomejs/biome"])
    if (existsSync(path.join(dir, "node_modules", dev)))
      fail(`node_modules/${dev} is still installed after the prune`);

  const version = JSON.parse(readFileSync(path.join(dir, "package.json"), "utf8")).version;
  const printed = step("platform --version", process.execPath, ["bin/platform.js", "--version"]);
  if (printed !== `platform ${version}\n`) fail(`platform --version printed ${JSON.stringify(printed)}`);

  const started = performance.now();
  const child = spawn(process.execPath, ["bin/platform.js", "start"], {
    cwd: dir,
    env: {
      ...process.env,
      DATABASE_URL: "",
      PLATFORM_PORT: "0",
      PLATFORM_DATA_DIR: path.join(dir, "data"),
      PLATFORM_LOG_LEVEL: "warn",
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout.on("data", (d) => (output += d));
  child.stderr.on("data", (d) => (output += d));
  const exited = new Promise((resolve) => child.on("exit", resolve));
  try {
    let ready = false;
    while (!ready && performance.now() - started < 180_000 && child.exitCode === null) {
      const url = /Platform is running at (\S+)/.exec(output)?.[1];
      if (url)
        ready = await fetch(`${url}/ready`).then(
          (r) => r.status === 200,
          () => false,
        );
      if (!ready) await sleep(100);
    }
    if (!ready) {
      process.stderr.write(output);
      fail("platform start did not answer /ready with 200");
    }
    console.log(
      `check-install: platform start → /ready: ${((performance.now() - started) / 1000).toFixed(1)} s`,
    );
  } finally {
    child.kill("SIGTERM");
    const code = await exited;
    if (code !== 0 && process.exitCode !== 1) fail(`platform start exited with ${code} on SIGTERM`);
  }
  console.log("check-install: the production install builds, prunes and serves");
} catch (error) {
  if (process.exitCode !== 1) {
    console.error(`check-install: ${error.message}`);
    process.exitCode = 1;
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
