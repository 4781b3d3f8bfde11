import { type ChildProcess, spawn } from "node:child_process";
import path from "node:path";
import { childEnv } from "./helpers.ts";

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
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [bin, ...args], {
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
 * Starts `platform start` and resolves once it prints its URL (rejects if it exits first or after `timeoutMs`).
 * `command` replaces `node bin/platform.js start` (e.g. a shell that prepares something, then execs it).
 */
export function startProcess(
  env: Record<string, string>,
  timeoutMs = 20_000,
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
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`platform start did not print its URL in ${timeoutMs} ms\n${stdout}\n${stderr}`));
    }, timeoutMs);
    child.stderr!.on("data", (d) => (stderr += d));
    child.stdout!.on("data", (d) => {
      stdout += d;
      const match = /Platform is running at (\S+)/.exec(stdout);
      if (match) {
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
      }
    });
    exited.then((code) => {
      clearTimeout(timer);
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
