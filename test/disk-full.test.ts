/**
 * The embedded database on a full disk (docs/operations.md "Full disk"), on a small tmpfs of its own: a
 * `platform start` child process refuses changes with 507 while the disk is full, keeps serving /healthz
 * and reads, says why in /ready and takes changes again once space is freed, without a restart. Should
 * PostgreSQL PANIC all the same (a new write-ahead log segment that does not fit), the process exits with
 * one line saying why instead of hanging, and a restart recovers every commit.
 *
 * Needs `mount -t tmpfs` (root); skipped with the reason where that is not permitted.
 */
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { closeSync, cpSync, existsSync, openSync, readFileSync, rmSync, writeSync } from "node:fs";
import path from "node:path";
import { after, describe, it, type TestContext } from "node:test";
import { PgliteDatabase } from "../src/storage/pglite.ts";
import { childEnv, tempDir } from "./helpers.ts";
import { type RunningProcess, startProcess } from "./process.ts";
import { testTime } from "./time.ts";

const onPostgres = Boolean(process.env.DATABASE_URL);
const ORGS = "/resources/v3alpha/organizations";

interface Reply {
  status: number;
  // biome-ignore lint/suspicious/noExplicitAny: answers are checked field by field
  json: any;
  headers: Headers;
}

/** A request; status 0 when no answer came within 10 s (a hung server). */
async function send(url: string, init: RequestInit = {}): Promise<Reply> {
  try {
    const response = await fetch(url, { ...init, signal: AbortSignal.timeout(testTime(10_000)) });
    const text = await response.text();
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      json = text;
    }
    return { status: response.status, json, headers: response.headers };
  } catch (error) {
    return { status: 0, json: String(error), headers: new Headers() };
  }
}

/** Writes a file until the file system is full (ENOSPC at 1 MiB, 4 KiB and 512-byte writes). */
function fillDisk(file: string): void {
  const fd = openSync(file, "w");
  try {
    for (const size of [1 << 20, 4096, 512]) {
      const chunk = Buffer.alloc(size, 1);
      try {
        for (;;) writeSync(fd, chunk);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== "ENOSPC") throw error;
      }
    }
  } finally {
    closeSync(fd);
  }
}

describe("embedded database on a full disk", { skip: onPostgres && "embedded database only" }, () => {
  const cleanups: (() => unknown)[] = [];
  after(async () => {
    for (const cleanup of cleanups.reverse()) {
      try {
        await cleanup();
      } catch {
        // best effort
      }
    }
  });

  /** A tmpfs of `sizeMb` (unmounted after the tests), or undefined when mounting is not permitted. */
  const smallDisk = (t: TestContext, sizeMb: number): string | undefined => {
    const dir = tempDir("disk-full-");
    try {
      execFileSync("mount", ["-t", "tmpfs", "-o", `size=${sizeMb}m`, "tmpfs", dir], { stdio: "pipe" });
    } catch (error) {
      rmSync(dir, { recursive: true, force: true });
      t.skip(`mount -t tmpfs is not permitted here: ${String((error as Error).message).split("\n")[0]}`);
      return undefined;
    }
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    cleanups.push(() => execFileSync("umount", ["-l", dir]));
    return dir;
  };
  /** A migrated embedded database in `dir` (copied from the test run's template when there is one). */
  const dataDirIn = (dir: string): string => {
    const dataDir = path.join(dir, "data");
    const template = process.env.PLATFORM_TEST_PGLITE_TEMPLATE;
    if (template && existsSync(template)) cpSync(template, dataDir, { recursive: true });
    return dataDir;
  };

  it("refuses changes with 507 while the disk is full, serves /healthz and reads, says why in /ready and takes changes again once space is freed", async (t) => {
    const disk = smallDisk(t, 128);
    if (!disk) return;
    const patPath = path.join(tempDir("disk-full-pat-"), "admin.pat");
    const server: RunningProcess = await startProcess(
      { PLATFORM_DATA_DIR: dataDirIn(disk), PLATFORM_PORT: "0", PLATFORM_FIRSTINSTANCE_PAT_PATH: patPath },
      60_000,
    );
    cleanups.push(() => server.child.kill("SIGKILL"));
    const pat = readFileSync(patPath, "utf8").trim();
    const rest = (method: string, route: string, body?: unknown) =>
      send(`${server.url}${route}`, {
        method,
        headers: { authorization: `Bearer ${pat}`, "content-type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    let n = 0;
    const createOrg = () => rest("POST", ORGS, { name: `Disk Org ${n++}` });

    const before = await createOrg();
    assert.equal(before.status, 201, JSON.stringify(before.json));
    const machine = await rest("POST", "/resources/v3alpha/users", {
      username: "disk-client",
      machine: { name: "disk client" },
    });
    assert.equal(machine.status, 201, JSON.stringify(machine.json));
    const secret = await rest(
      "POST",
      `/resources/v3alpha/users/${machine.json.details.id}/_generate_secret`,
      {},
    );
    assert.equal(secret.status, 200, JSON.stringify(secret.json));
    const token = () =>
      send(`${server.url}/oauth/v2/token`, {
        method: "POST",
        headers: {
          "content-type": "application/x-www-form-urlencoded",
          authorization: `Basic ${Buffer.from(`${secret.json.client_id}:${secret.json.client_secret}`).toString("base64")}`,
        },
        body: "grant_type=client_credentials",
      });

    const filler = path.join(disk, "filler");
    fillDisk(filler);

    // changes: 507 with a clear message, nothing hangs, over and over
    const writes = await Promise.all(Array.from({ length: 12 }, createOrg));
    for (const write of writes) {
      assert.equal(write.status, 507, JSON.stringify(write.json));
      assert.deepEqual(write.json, {
        code: 8,
        message:
          "insufficient storage: the database's disk is full, so the change was not saved; retry later",
        details: [],
      });
    }
    const tokenWhileFull = await token();
    assert.equal(tokenWhileFull.status, 503, JSON.stringify(tokenWhileFull.json));
    assert.equal(tokenWhileFull.json.error, "temporarily_unavailable");
    assert.equal(tokenWhileFull.headers.get("retry-after"), "5");
    // the process is up and says why it cannot take changes; reads go on
    assert.equal((await send(`${server.url}/healthz`)).status, 200);
    const notReady = await send(`${server.url}/ready`);
    assert.equal(notReady.status, 503);
    assert.equal(notReady.json.status, "unavailable");
    assert.match(
      notReady.json.reason,
      /^disk full: \d+ MB free for the embedded database, changes need 32 MB$/,
    );
    assert.equal((await rest("GET", `${ORGS}/${before.json.details.id}`)).status, 200);
    assert.equal((await createOrg()).status, 507);
    assert.equal(server.child.exitCode, null, server.stderr());

    // space again: changes work, without a restart
    rmSync(filler);
    const afterwards = await createOrg();
    assert.equal(afterwards.status, 201, JSON.stringify(afterwards.json));
    assert.equal((await rest("GET", `${ORGS}/${afterwards.json.details.id}`)).status, 200);
    assert.equal((await token()).status, 200);
    assert.deepEqual((await send(`${server.url}/ready`)).json, { status: "ready" });
    assert.equal(server.child.exitCode, null, server.stderr());
    assert.match(server.stdout(), /disk full/, "the refused changes are logged");
  });

  it("a PANIC of PostgreSQL (no room for a new write-ahead log segment) exits with one line; a restart recovers", async (t) => {
    const disk = smallDisk(t, 64);
    if (!disk) return;
    const dataDir = dataDirIn(disk);
    // the guard that keeps the server from this point is off in this child (minFreeBytes: 0)
    const child = spawn(
      process.execPath,
      [
        "--import",
        "tsx",
        path.join(import.meta.dirname, "pglite-wal-panic.ts"),
        dataDir,
        path.join(disk, "filler"),
      ],
      { env: childEnv({}), stdio: ["ignore", "pipe", "pipe"] },
    );
    cleanups.push(() => child.kill("SIGKILL"));
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    const code = await new Promise<number | null | "hung">((resolve) => {
      const timer = setTimeout(() => resolve("hung"), testTime(90_000));
      child.on("exit", (status) => {
        clearTimeout(timer);
        resolve(status);
      });
    });
    assert.equal(code, 1, `exit status (stdout: ${stdout}, stderr: ${stderr})`);
    assert.equal(stdout, "committed\n");
    assert.match(
      stderr,
      /^platform: the embedded database failed \(PANIC: could not write to file "pg_wal\/xlogtemp\.\d+": No space left on device\) and cannot recover in this process; exiting: free disk space in .+, then start Platform again \(it recovers from its write-ahead log, nothing acknowledged is lost\)\n$/,
    );

    rmSync(path.join(disk, "filler"));
    const db = await PgliteDatabase.open(dataDir);
    try {
      assert.deepEqual(await db.query("SELECT note FROM before_panic"), [{ note: "committed" }]);
    } finally {
      await db.close();
    }
  });
});
