import assert from "node:assert/strict";
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { after, describe, it } from "node:test";
import { resolveLogFormat } from "../src/server/log.ts";
import { childEnv, freshBackend, type TestBackend, testTime } from "./helpers.ts";

/*
 * Log lines for a person on a terminal, JSON lines for everything else. `script` (util-linux) runs
 * `platform start` on a pseudo-terminal, as a person's shell would; without it stdout is a pipe.
 */

const bin = path.resolve(import.meta.dirname, "../bin/platform.js");
const hasScript = spawnSync("script", ["--version"]).status === 0;

const quote = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;
const ESC = String.fromCharCode(27);
const stripAnsi = (s: string) => s.replaceAll(new RegExp(`${ESC}\\[[0-9;]*m`, "g"), "");

/** The start-up banner of src/cli.ts, whatever the log format. */
const BANNER =
  /^Platform is running at (http:\/\/localhost:\d+)\n {2}database: .+\n {2}first start: created instance \d+ for localhost\n {2}log in as "admin"\n {2}password: .+\n {2}API reference: \1\/docs\n {2}sign in: \1\/ \(your account page\)\n {2}console: \1\/ui\/console\/ \(administration\)$/m;

/** The processes whose parent is `pid` (from /proc; script(1) is Linux-only anyway). */
function childrenOf(pid: number): number[] {
  return readdirSync("/proc")
    .filter((entry) => /^\d+$/.test(entry))
    .filter((entry) => {
      try {
        const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
        return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]) === pid;
      } catch {
        return false; // exited meanwhile
      }
    })
    .map(Number);
}

/**
 * The Platform process below script(1): script runs the command through `$SHELL -c`, and whether that shell
 * execs node or forks it depends on the shell, so search the descendants for the one running bin/platform.js.
 */
function platformBelow(pid: number): number | undefined {
  for (const child of childrenOf(pid)) {
    try {
      if (readFileSync(`/proc/${child}/cmdline`, "utf8").split("\0").includes(bin)) return child;
    } catch {
      continue; // exited meanwhile
    }
    const below = platformBelow(child);
    if (below !== undefined) return below;
  }
  return undefined;
}

interface Started {
  url: string;
  /** stdout so far, `\r\n` as `\n`. */
  output(): string;
  /** Resolves once stdout matches. */
  waitFor(pattern: RegExp): Promise<void>;
  stop(): Promise<void>;
}

/** `platform start` with stdout on a pseudo-terminal (`tty`) or a pipe; resolves once the banner is out. */
function start(env: Record<string, string>, tty: boolean): Promise<Started> {
  const command = [process.execPath, bin, "start"];
  const child: ChildProcess = tty
    ? spawn("script", ["-qfec", command.map(quote).join(" "), "/dev/null"], {
        env: childEnv(env),
        stdio: ["ignore", "pipe", "pipe"],
      })
    : spawn(command[0], command.slice(1), { env: childEnv(env), stdio: ["ignore", "pipe", "pipe"] });
  let raw = "";
  let stderr = "";
  const listeners = new Set<() => void>();
  child.stdout!.on("data", (d) => {
    raw += d;
    for (const listener of listeners) listener();
  });
  child.stderr!.on("data", (d) => (stderr += d));
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const output = () => raw.replaceAll("\r\n", "\n");
  const waitFor = (pattern: RegExp, idleMs = 20_000) =>
    new Promise<void>((resolve, reject) => {
      const timeoutMs = testTime(idleMs);
      const check = () => {
        if (!pattern.test(output())) return;
        listeners.delete(check);
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(() => {
        listeners.delete(check);
        reject(new Error(`no ${pattern} in ${timeoutMs} ms:\n${output()}\n${stderr}`));
      }, timeoutMs);
      listeners.add(check);
      check();
    });
  // Under script(1), SIGTERM goes to Platform itself (script would wait 2 s before killing it).
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const platformPid = tty ? platformBelow(child.pid!) : child.pid;
    process.kill(platformPid ?? child.pid!, "SIGTERM");
    await exited;
  };
  return waitFor(BANNER).then(
    () => ({ url: BANNER.exec(output())![1], output, waitFor, stop }),
    async (error) => {
      await stop();
      throw error;
    },
  );
}

describe("log format", () => {
  const backends: TestBackend[] = [];
  const running: Started[] = [];
  const startOn = async (tty: boolean, env: Record<string, string> = {}) => {
    const backend = await freshBackend();
    backends.push(backend);
    const started = await start(
      { ...backend.env, PLATFORM_PORT: "0", PLATFORM_LOG_LEVEL: "info", ...env },
      tty,
    );
    running.push(started);
    return started;
  };
  after(async () => {
    for (const r of running) await r.stop();
    for (const b of backends) await b.cleanup();
  });

  it("auto: human-readable on a terminal, JSON elsewhere, forced either way (resolveLogFormat)", () => {
    const terminal = { isTTY: true };
    const pipe = { isTTY: false };
    assert.equal(resolveLogFormat("auto", terminal, {}), "pretty");
    assert.equal(resolveLogFormat("auto", pipe, {}), "json");
    assert.equal(resolveLogFormat("auto", {}, {}), "json");
    assert.equal(resolveLogFormat("auto", terminal, { NODE_TEST_CONTEXT: "child-v8" }), "json");
    assert.equal(resolveLogFormat("json", terminal, {}), "json");
    assert.equal(resolveLogFormat("pretty", pipe, {}), "pretty");
  });

  it("on a terminal: human-readable lines (secrets redacted), the banner as it was", {
    skip: hasScript ? false : "needs script(1) from util-linux for a pseudo-terminal",
  }, async () => {
    const platform = await startOn(true);
    const response = await fetch(`${platform.url}/.well-known/openid-configuration?token=s3cret-value`);
    assert.equal(response.status, 200);
    await platform.waitFor(/request completed/);
    const lines = stripAnsi(platform.output()).split("\n");
    const completed = lines.filter((l) => l.includes("request completed"));
    assert.equal(completed.length, 1, "one line per request");
    assert.match(completed[0], /^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: request completed \{.*"status":200/);
    assert.match(completed[0], /"url":"\/\.well-known\/openid-configuration\?token=\[redacted\]"/);
    assert.ok(!platform.output().includes("s3cret-value"), "the secret is not logged");
    assert.ok(!lines.some((l) => l.startsWith("{")), "no JSON lines");
    // The banner is plain text, without colours, exactly as before.
    assert.match(platform.output(), BANNER);
    await platform.stop();
    const stopped = stripAnsi(platform.output());
    assert.match(stopped, /^\[[\d:.]+\] INFO: shutting down \{"signal":"SIGTERM","graceSeconds":25\}$/m);
    assert.match(stopped, /^\[[\d:.]+\] INFO: stopped in [\d.]+ s: finished \d+ requests, .* \{"stop":\{/m);
  });

  it("without a terminal: JSON lines (secrets redacted), the same banner", async () => {
    const platform = await startOn(false);
    const url = `${platform.url}/.well-known/openid-configuration?token=s3cret-value`;
    assert.equal((await fetch(url)).status, 200);
    await platform.waitFor(/request completed/);
    const entries = platform
      .output()
      .split("\n")
      .filter((l) => l.startsWith("{"))
      .map((l) => JSON.parse(l));
    assert.ok(!entries.some((e) => e.msg === "incoming request"), "one line per request");
    const completed = entries.find((e) => e.msg === "request completed");
    assert.equal(completed.url, "/.well-known/openid-configuration?token=[redacted]");
    assert.equal(completed.status, 200);
    assert.ok(!platform.output().includes("s3cret-value"));
    assert.ok(!platform.output().includes(`${ESC}[`), "no colour codes");
    assert.match(platform.output(), BANNER);
  });
});
