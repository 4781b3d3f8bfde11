import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { freshBackend, type TestBackend, tempDir, testTime } from "./helpers.ts";
import { bin, runPlatform, startProcess } from "./process.ts";

const onPostgres = Boolean(process.env.DATABASE_URL);

/** A process that is not Platform and keeps running until killed. */
function unrelatedProcess(): ChildProcess {
  return spawn("sleep", ["60"], { stdio: "ignore" });
}

/** The pid of a process that has exited. */
async function deadPid(): Promise<number> {
  const child = spawn(process.execPath, ["-e", ""], { stdio: "ignore" });
  await new Promise((resolve) => child.on("exit", resolve));
  return child.pid!;
}

/**
 * VmRSS of a process in MB once it idles: read every second until below `limitMb`, for at most `forMs`
 * scaled by `testTime` (V8 gives back start-up garbage on its own after some 20-40 s of idling on a quiet
 * machine, later on a busy one).
 */
async function idleRssMb(pid: number, limitMb: number, forMs = 90_000): Promise<number> {
  const deadline = Date.now() + testTime(forMs);
  await sleep(1_000);
  while (true) {
    const kb = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1];
    const rss = Math.round(Number(kb) / 1024);
    if (rss < limitMb || Date.now() > deadline) return rss;
    await sleep(1_000);
  }
}

// The tests use data directories of their own and run at the same time: the idle-memory test spends most
// of its time waiting for the process to give back its start-up garbage.
describe("embedded database in a Platform process", {
  skip: onPostgres && "embedded database only",
  concurrency: true,
}, () => {
  const backends: TestBackend[] = [];
  const dataDir = async () => {
    const backend = await freshBackend();
    backends.push(backend);
    return backend.env.PLATFORM_DATA_DIR;
  };
  after(async () => {
    for (const backend of backends) await backend.cleanup();
  });

  it("takes over a lock naming its own pid (a restart that got the old pid, as PID 1 in a container)", async () => {
    const dir = await dataDir();
    // The shell writes the lock in the format of earlier releases (the bare pid), naming itself, then
    // becomes Platform with `exec`: the same pid, as after a container restart.
    const started = await startProcess({ PLATFORM_DATA_DIR: dir, PLATFORM_PORT: "0" }, undefined, [
      "sh",
      "-c",
      'printf %s "$$" > "$1/platform.lock" && exec "$2" "$3" start',
      "sh",
      dir,
      process.execPath,
      bin,
    ]);
    const pid = started.child.pid!;
    assert.match(
      started.stdout(),
      new RegExp(`\\n {2}took over a stale lock of pid ${pid} \\(its pid is now this process\\)\\n`),
    );
    assert.equal((await fetch(`${started.url}/ready`)).status, 200);
    const lock = JSON.parse(readFileSync(path.join(dir, "platform.lock"), "utf8"));
    assert.equal(lock.pid, pid);
    assert.equal(await started.stop(), 0);
    assert.equal(existsSync(path.join(dir, "platform.lock")), false, "the lock is removed on shutdown");
  });

  it("takes over a lock whose pid now belongs to an unrelated process", {
    skip: process.platform !== "linux" && "needs /proc to tell processes apart",
  }, async () => {
    const sleeper = unrelatedProcess();
    try {
      const dir = await dataDir();
      writeFileSync(
        path.join(dir, "platform.lock"),
        JSON.stringify({ pid: sleeper.pid, startTime: "1", hostname: os.hostname(), cmd: "platform start" }),
      );
      const started = await startProcess({ PLATFORM_DATA_DIR: dir, PLATFORM_PORT: "0" });
      assert.match(
        started.stdout(),
        new RegExp(
          `took over a stale lock of pid ${sleeper.pid} \\(its pid now belongs to another process\\)`,
        ),
      );
      assert.equal((await fetch(`${started.url}/ready`)).status, 200);
      assert.equal(await started.stop(), 0);

      // A lock of an earlier release (the bare pid) naming a program that is not node: taken over too.
      writeFileSync(path.join(dir, "platform.lock"), String(sleeper.pid));
      const migrated = await runPlatform(["migrate"], { PLATFORM_DATA_DIR: dir });
      assert.equal(migrated.code, 0, migrated.stderr);
      assert.equal(
        migrated.stderr,
        `platform: took over a stale lock of pid ${sleeper.pid} (its pid now belongs to another program)\n`,
      );
      assert.equal(sleeper.exitCode, null, "the unrelated process is left alone");
    } finally {
      sleeper.kill();
    }
  });

  it("of two processes starting together on a directory with a stale lock, exactly one takes it over", async () => {
    const dir = await dataDir();
    const stale = await deadPid();
    writeFileSync(path.join(dir, "platform.lock"), JSON.stringify({ pid: stale, startTime: "1" }));
    const env = { PLATFORM_DATA_DIR: dir, PLATFORM_PORT: "0" };
    const results = await Promise.allSettled([startProcess(env), startProcess(env)]);
    const running = results.flatMap((r) => (r.status === "fulfilled" ? [r.value] : []));
    try {
      assert.equal(
        running.length,
        1,
        results.map((r) => (r.status === "rejected" ? r.reason : "")).join("\n"),
      );
      const [winner] = running;
      assert.match(
        winner.stdout(),
        new RegExp(`took over a stale lock of pid ${stale} \\(that process has exited\\)`),
      );
      const loser = results.find((r) => r.status === "rejected") as PromiseRejectedResult;
      assert.match(
        String(loser.reason),
        new RegExp(`in use by another Platform process \\(pid ${winner.child.pid}\\)`),
      );
      assert.equal((await fetch(`${winner.url}/ready`)).status, 200);
    } finally {
      for (const p of running) assert.equal(await p.stop(), 0);
    }
  });

  it("idles below 250 MB resident after the first start and after a restart", {
    skip: process.platform !== "linux" && "reads /proc",
    timeout: testTime(300_000),
  }, async () => {
    // A fresh directory, not the test template: the first start creates the database.
    const dir = tempDir("pglite-fresh-");
    const env = { PLATFORM_DATA_DIR: dir, PLATFORM_PORT: "0" };
    const limitMb = 250;
    const figures: string[] = [];
    try {
      for (const run of ["first start", "restart"]) {
        // a fresh directory: the first start creates the database
        const started = await startProcess(env, 120_000);
        try {
          assert.equal(run === "first start", /first start: created instance/.test(started.stdout()));
          const rss = await idleRssMb(started.child.pid!, limitMb);
          figures.push(`${run}: ${rss} MB`);
          assert.ok(rss < limitMb, `idle RSS ${figures.join(", ")}; limit ${limitMb} MB`);
        } finally {
          assert.equal(await started.stop(), 0);
        }
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
