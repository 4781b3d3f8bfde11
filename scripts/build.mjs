#!/usr/bin/env node
// `npm run build`: compiles src/ (without its tests) to JavaScript in dist/ with source maps, using the
// project's TypeScript compiler and tsconfig.build.json, and copies beside it the files the code reads at
// run time (SQL migrations, login templates, message catalogues, stylesheets, the API reference's assets).
// dist/ mirrors src/, so code that finds its files relative to its own module finds them in dist/ too.
// The administration console (console/src/) is bundled by esbuild into dist/console-ui/
// (scripts/build-console.mjs).
//
// dist/.build-stamp.json records a fingerprint of the inputs (a SHA-256 over src/ and the build's
// configuration). bin/platform.js calls `ensureBuilt` before it runs dist/: nothing happens when the
// fingerprint matches (a few ms), else it rebuilds, emitting only (`--noCheck`: a quarter of the time;
// like tsx before, a type error does not stop a development start, a syntax error does); `npm run build`
// type-checks as well and fails on any error. A build writes into a fresh directory and replaces dist/
// only when it succeeded, so a failed or interrupted build leaves the last good dist/ in place; a lock
// file makes concurrent starts build once.
//
//   node scripts/build.mjs            build and type-check (`npm run build`)
//   node scripts/build.mjs --status   exit 1 when dist/ is missing or older than the sources
import { spawnSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import {
  closeSync,
  cpSync,
  existsSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { buildConsole, consoleOutName, consoleSourceFiles } from "./build-console.mjs";

export const root = path.resolve(import.meta.dirname, "..");
export const distDir = path.join(root, "dist");
const srcDir = path.join(root, "src");
const stampFile = ".build-stamp.json";
const lockFile = path.join(root, ".build.lock");
/** Configuration files whose change changes the output. */
const configFiles = [
  "tsconfig.json",
  "tsconfig.build.json",
  "scripts/build.mjs",
  "scripts/build-console.mjs",
];

/** Test code stays out of dist/ (tsconfig.build.json excludes the same files). */
function isTestFile(name) {
  return name.endsWith(".test.ts") || name === "testing.ts";
}

/** Paths (relative to src/, sorted) of every file the build reads from src/. */
function sourceFiles(dir = srcDir, prefix = "") {
  const out = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const rel = prefix ? `${prefix}/${entry.name}` : entry.name;
    if (entry.isDirectory()) out.push(...sourceFiles(path.join(dir, entry.name), rel));
    else if (entry.isFile() && !isTestFile(entry.name)) out.push(rel);
  }
  return out.sort();
}

/** The installed TypeScript compiler's package directory, or undefined (a production install). */
export function compilerDir() {
  try {
    return path.dirname(createRequire(import.meta.url).resolve("typescript/package.json"));
  } catch {
    return undefined;
  }
}

/** SHA-256 over the compiler's version, the configuration files and every source file (names and bytes). */
export function fingerprint() {
  const hash = createHash("sha256");
  const tsDir = compilerDir();
  hash.update(
    `typescript ${tsDir ? JSON.parse(readFileSync(path.join(tsDir, "package.json"))).version : "-"}\0`,
  );
  for (const file of configFiles)
    hash
      .update(`${file}\0`)
      .update(readFileSync(path.join(root, file)))
      .update("\0");
  for (const file of sourceFiles()) {
    hash
      .update(`src/${file}\0`)
      .update(readFileSync(path.join(srcDir, file)))
      .update("\0");
  }
  // the console's bundle (scripts/build-console.mjs)
  for (const file of consoleSourceFiles())
    hash
      .update(`${file}\0`)
      .update(readFileSync(path.join(root, file)))
      .update("\0");
  return hash.digest("hex");
}

/** The fingerprint dist/ was built from, or undefined when there is no complete build. */
function builtFingerprint() {
  try {
    return JSON.parse(readFileSync(path.join(distDir, stampFile), "utf8")).fingerprint;
  } catch {
    return undefined;
  }
}

/** Why dist/ needs a build ("missing", "outdated"), or undefined when it is current. */
export function staleness() {
  const built = builtFingerprint();
  if (built === undefined) return "missing";
  return built === fingerprint() ? undefined : "outdated";
}

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return error.code === "EPERM";
  }
}

/** Takes the build lock, waiting while another live process holds it; returns its release. */
async function lock() {
  const deadline = Date.now() + 10 * 60_000;
  for (;;) {
    try {
      const fd = openSync(lockFile, "wx");
      writeFileSync(fd, String(process.pid));
      closeSync(fd);
      return () => rmSync(lockFile, { force: true });
    } catch (error) {
      if (error.code !== "EEXIST") throw error;
    }
    let holder;
    try {
      holder = Number.parseInt(readFileSync(lockFile, "utf8"), 10);
    } catch (error) {
      if (error.code === "ENOENT") continue; // released meanwhile
      throw error;
    }
    // left by a build that was killed (or, without a pid, killed while taking the lock)
    const abandoned = holder ? !alive(holder) : Date.now() - statSync(lockFile).mtimeMs > 10_000;
    if (abandoned) {
      rmSync(lockFile, { force: true });
      continue;
    }
    if (Date.now() > deadline) throw new Error(`${lockFile} is held by process ${holder} for too long`);
    await sleep(100);
  }
}

/**
 * Compiles into a new directory (type-checking too when `typeCheck`) and puts it in place of dist/.
 * Returns false (dist/ untouched) when the compiler reports errors; its diagnostics go to `output` (a
 * file descriptor).
 */
async function compile(typeCheck, print, output) {
  const tsDir = compilerDir();
  if (!tsDir)
    throw new Error("the TypeScript compiler is not installed (it is a devDependency: run `npm ci`)");
  const started = performance.now();
  const stamp = { fingerprint: fingerprint(), typeChecked: typeCheck, builtAt: new Date().toISOString() };
  const tmp = path.join(root, `.dist-${process.pid}-${randomBytes(4).toString("hex")}`);
  for (const name of readdirSync(root)) {
    const pid = /^\.dist-(\d+)-/.exec(name)?.[1];
    if (pid && !alive(Number(pid))) rmSync(path.join(root, name), { recursive: true, force: true }); // interrupted
  }
  try {
    const tsc = spawnSync(
      process.execPath,
      [
        path.join(tsDir, "bin", "tsc"),
        "-p",
        path.join(root, "tsconfig.build.json"),
        "--outDir",
        tmp,
        ...(typeCheck ? [] : ["--noCheck"]),
      ],
      { cwd: root, stdio: ["ignore", output, output] },
    );
    if (tsc.status !== 0) {
      print(`the TypeScript compiler reported errors (above); dist/ is unchanged`);
      return false;
    }
    // the console's sources are bundled by esbuild, which does not check types: the compiler does
    const consoleCheck = typeCheck
      ? spawnSync(
          process.execPath,
          [path.join(tsDir, "bin", "tsc"), "-p", path.join(root, "console", "tsconfig.json"), "--noEmit"],
          { cwd: root, stdio: ["ignore", output, output] },
        )
      : { status: 0 };
    if (consoleCheck.status !== 0) {
      print(`the TypeScript compiler reported errors in console/ (above); dist/ is unchanged`);
      return false;
    }
    for (const file of sourceFiles()) {
      if (file.endsWith(".ts")) continue;
      mkdirSync(path.dirname(path.join(tmp, file)), { recursive: true });
      cpSync(path.join(srcDir, file), path.join(tmp, file));
    }
    try {
      await buildConsole(path.join(tmp, consoleOutName));
    } catch (error) {
      print(`the console's bundle failed (${error.message.split("\n")[0]}); dist/ is unchanged`);
      return false;
    }
    writeFileSync(path.join(tmp, stampFile), `${JSON.stringify(stamp, null, 2)}\n`);
    const old = `${tmp}-old`;
    if (existsSync(distDir)) renameSync(distDir, old);
    renameSync(tmp, distDir);
    rmSync(old, { recursive: true, force: true });
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  print(`built dist/ in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  return true;
}

/**
 * Builds dist/ when it is missing or older than the sources, or always with `force` (which type-checks
 * too): "current" (nothing to do), "built" or "failed". `print` reports what happens (nothing when dist/
 * is current).
 */
export async function ensureBuilt({ force = false, print = console.error, output = 2 } = {}) {
  if (!force && staleness() === undefined) return "current";
  const release = await lock();
  try {
    const reason = force ? "build requested" : staleness(); // another process may have built meanwhile
    if (reason === undefined) return "current";
    print(
      reason === "missing"
        ? "no build yet: compiling src/ to dist/"
        : reason === "outdated"
          ? "the sources changed since the last build: compiling src/ to dist/"
          : "compiling and type-checking src/ to dist/",
    );
    return (await compile(force, print, output)) ? "built" : "failed";
  } finally {
    release();
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === path.resolve(import.meta.filename)) {
  const print = (line) => console.log(`build: ${line}`);
  if (process.argv.includes("--status")) {
    const reason = staleness();
    print(reason === undefined ? "dist/ is current" : `dist/ is ${reason}`);
    process.exit(reason === undefined ? 0 : 1);
  }
  if ((await ensureBuilt({ force: true, print, output: 1 })) === "failed") process.exit(1);
}
