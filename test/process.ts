import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import {
  copyFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  symlinkSync,
} from "node:fs";
import os from "node:os";
import path from "node:path";
import { childEnv } from "./helpers.ts";
import { testTime } from "./time.ts";

export const bin = path.resolve(import.meta.dirname, "../bin/platform.js");

export interface RunningProcess {
  child: ChildProcess;
  url: string;
  stdout: () => string;
  stderr: () => string;
  /** SIGTERM and wait for the exit code. */
  stop(): Promise<number | null>;
}

/** Runs `platform <args>` to completion. */
export function runPlatform(
  args: string[],
  env: Record<string, string>,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return runPlatformIn(path.resolve(bin, "..", ".."), args, env);
}

/** Runs `<checkout>/bin/platform.js <args>` to completion. */
export function runPlatformIn(
  checkout: string,
  args: string[],
  env: Record<string, string>,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [path.join(checkout, "bin", "platform.js"), ...args], {
      env: childEnv(env),
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    child.on("exit", (code) => resolve({ code, stdout, stderr }));
  });
}

/**
 * Starts `platform start` and resolves once it prints its URL; rejects if it exits first, or when it has
 * printed nothing for `idleMs` scaled by `testTime` (a start that hangs fails, a slow one on a loaded machine
 * does not: building dist/ and migrating print as they go). `command` replaces `node bin/platform.js start`
 * (e.g. a shell that prepares something, then execs it).
 */
export function startProcess(
  env: Record<string, string>,
  idleMs = 60_000,
  command: string[] = [process.execPath, bin, "start"],
): Promise<RunningProcess> {
  const child = spawn(command[0], command.slice(1), {
    env: childEnv(env),
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  return new Promise((resolve, reject) => {
    let timer: NodeJS.Timeout | undefined;
    let settled = false;
    const idle = () => {
      clearTimeout(timer);
      const limit = testTime(idleMs);
      timer = setTimeout(() => {
        settled = true;
        child.kill("SIGKILL");
        reject(new Error(`platform start printed nothing for ${limit} ms and no URL\n${stdout}\n${stderr}`));
      }, limit);
    };
    idle();
    child.stderr!.on("data", (d) => {
      stderr += d;
      if (!settled) idle();
    });
    child.stdout!.on("data", (d) => {
      stdout += d;
      if (settled) return;
      const match = /Platform is running at (\S+)/.exec(stdout);
      if (!match) return idle();
      settled = true;
      clearTimeout(timer);
      resolve({
        child,
        url: match[1],
        stdout: () => stdout,
        stderr: () => stderr,
        stop: async () => {
          if (child.exitCode === null) child.kill("SIGTERM");
          return exited;
        },
      });
    });
    exited.then((code) => {
      clearTimeout(timer);
      if (settled) return;
      settled = true;
      reject(new Error(`platform start exited with ${code}\n${stdout}\n${stderr}`));
    });
  });
}

/** A free TCP port on localhost. */
export async function freePort(): Promise<number> {
  const net = await import("node:net");
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as { port: number }).port;
      server.close(() => resolve(port));
    });
    server.on("error", reject);
  });
}

const checkoutParts = [
  "bin",
  "scripts",
  "src",
  "console",
  "package.json",
  "tsconfig.json",
  "tsconfig.build.json",
];

/**
 * A copy of what running and building need of this checkout (bin/, scripts/, src/, package.json and the
 * tsconfig files) as a fresh clone has it: tracked and new files with their current content, nothing
 * ignored (no dist/ unless `dist` names one to copy), and a node_modules of links to this checkout's
 * packages except those in `without`. It lives in the system's temporary directory, outside this
 * checkout, whose node_modules would otherwise provide the missing packages; remove it after use.
 */
export function copyOfCheckout(options: { without: string[]; dist?: string }): string {
  const root = path.resolve(bin, "..", "..");
  const dir = mkdtempSync(path.join(os.tmpdir(), "platform-checkout-"));
  try {
    const files = execFileSync(
      "git",
      ["ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", ...checkoutParts],
      { cwd: root, encoding: "utf8" },
    );
    for (const file of files.split("\0")) {
      if (!file || !existsSync(path.join(root, file))) continue; // deleted in the working tree
      mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
      copyFileSync(path.join(root, file), path.join(dir, file));
    }
    if (options.dist) cpSync(options.dist, path.join(dir, "dist"), { recursive: true });
    mkdirSync(path.join(dir, "node_modules"));
    for (const name of readdirSync(path.join(root, "node_modules"))) {
      if (name.startsWith(".") || options.without.includes(name)) continue;
      symlinkSync(path.join(root, "node_modules", name), path.join(dir, "node_modules", name));
    }
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
  return dir;
}
