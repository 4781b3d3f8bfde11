import assert from "node:assert/strict";
import { cpSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, describe, it } from "node:test";
import { PgliteDatabase } from "../src/storage/pglite.ts";
import { PostgresDatabase } from "../src/storage/postgres.ts";
import { freshBackend, type TestBackend } from "./helpers.ts";
import { runPlatform, runPlatformIn, startProcess } from "./process.ts";

const onPostgres = Boolean(process.env.DATABASE_URL);

async function countEvents(backend: TestBackend): Promise<number> {
  const db = backend.env.DATABASE_URL
    ? new PostgresDatabase(backend.env.DATABASE_URL)
    : await PgliteDatabase.open(backend.env.PLATFORM_DATA_DIR);
  try {
    return Number((await db.query<{ n: number }>("SELECT count(*)::int AS n FROM events"))[0].n);
  } finally {
    await db.close();
  }
}

// Each test has a backend of its own: three at a time (they mostly wait for the processes they start).
describe("platform CLI", { concurrency: 3 }, () => {
  const backends: TestBackend[] = [];
  const backend = async () => {
    const b = await freshBackend();
    backends.push(b);
    return b;
  };
  after(async () => {
    for (const b of backends) await b.cleanup();
  });

  it("--help lists the commands and every variable", async () => {
    const { code, stdout } = await runPlatform(["--help"], {});
    assert.equal(code, 0);
    for (const word of [
      "start",
      "migrate",
      "projections rebuild",
      "PLATFORM_PORT",
      "DATABASE_URL",
      "PLATFORM_DATA_DIR",
    ]) {
      assert.match(stdout, new RegExp(word));
    }
  });

  it("every line of --help is aligned and at most 110 characters wide", async () => {
    const { stdout } = await runPlatform(["--help"], {});
    const lines = stdout.split("\n");
    assert.deepEqual(
      lines.filter((line) => line.length > 110),
      [],
    );
    // each variable's description starts in the same column
    const starts = lines
      .filter((line) => /^ {2}[A-Z_]+ +\S/.test(line))
      .map((line) => line.indexOf(" ", 2) + line.slice(line.indexOf(" ", 2)).search(/\S/));
    assert.ok(starts.length > 20);
    assert.equal(new Set(starts).size, 1, `descriptions start in columns ${[...new Set(starts)].join(", ")}`);
  });

  it("<command> --help and help <command> print that command's help", async () => {
    for (const args of [
      ["admin-token", "--help"],
      ["help", "admin-token"],
      ["admin-token", "-h"],
    ]) {
      const { code, stdout } = await runPlatform(args, {});
      assert.equal(code, 0);
      assert.match(stdout, /^Usage: platform admin-token --out FILE/);
      assert.match(stdout, /--user NAME/);
      assert.doesNotMatch(stdout, /^Commands:/m);
    }
    const keys = await runPlatform(["keys", "--help"], {});
    assert.match(keys.stdout, /^Usage: platform keys rotate/);
    assert.doesNotMatch(keys.stdout, /--user NAME/);
  });

  it("--version answers from package.json alone, without building", async () => {
    // a checkout with neither dist/ nor a compiler: only a version query can answer there
    const checkout = mkdtempSync(path.join(os.tmpdir(), "platform-version-"));
    try {
      cpSync(new URL("../bin", import.meta.url), path.join(checkout, "bin"), { recursive: true });
      cpSync(new URL("../package.json", import.meta.url), path.join(checkout, "package.json"));
      const { version } = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8"));
      for (const flag of ["--version", "-v", "version"]) {
        const { code, stdout, stderr } = await runPlatformIn(checkout, [flag], {});
        assert.equal(stderr, "");
        assert.equal(stdout, `platform ${version}\n`);
        assert.equal(code, 0);
      }
    } finally {
      rmSync(checkout, { recursive: true, force: true });
    }
  });

  it("--version and -v print the package's version", async () => {
    const { version } = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8"));
    for (const flag of ["--version", "-v", "version"]) {
      const { code, stdout } = await runPlatform([flag], {});
      assert.equal(code, 0);
      assert.equal(stdout, `platform ${version}\n`);
    }
  });

  it("an invalid PLATFORM_PORT exits non-zero with one line naming it", async () => {
    const { code, stderr, stdout } = await runPlatform(["start"], { PLATFORM_PORT: "http" });
    assert.equal(code, 1);
    assert.equal(stdout, "");
    assert.equal(stderr, 'platform: PLATFORM_PORT: "http" is not a port number (0-65535)\n');
  });

  it("an unreachable DATABASE_URL exits non-zero with one line naming it", async () => {
    const { code, stderr } = await runPlatform(["start"], {
      DATABASE_URL: "postgres://platform@127.0.0.1:1/none",
    });
    assert.equal(code, 1);
    assert.equal(stderr.trim().split("\n").length, 1, stderr);
    assert.match(
      stderr,
      /^platform: DATABASE_URL: cannot connect to PostgreSQL at postgres:\/\/platform@127\.0\.0\.1:1\/none/,
    );
  });

  it("start serves /ready once it prints its URL, keeps its data across a restart and stops on SIGTERM", async () => {
    const b = await backend();
    const env = { ...b.env, PLATFORM_PORT: "0" };
    // How fast a start is belongs to the benchmarks; here only that the printed URL is ready at once.
    const first = await startProcess(env);
    const readyResponse = await fetch(`${first.url}/ready`);
    assert.equal(readyResponse.status, 200);
    assert.match(first.stdout(), /first start: created instance (\d+)/);
    assert.match(first.stdout(), /password: \S+ {3}\(generated; shown only this once\)/);
    assert.equal(await first.stop(), 0);

    const eventsAfterFirst = await countEvents(b);
    assert.ok(eventsAfterFirst > 10);

    const second = await startProcess(env);
    assert.equal((await fetch(`${second.url}/ready`)).status, 200);
    assert.doesNotMatch(second.stdout(), /first start:/);
    assert.doesNotMatch(second.stdout(), /password: \S/);
    assert.equal(await second.stop(), 0);
    assert.equal(await countEvents(b), eventsAfterFirst, "a restart appends no event");
  });

  it("migrate applies the migrations once", async () => {
    const b = await backend();
    const first = await runPlatform(["migrate"], b.env);
    assert.equal(first.code, 0, first.stderr);
    const second = await runPlatform(["migrate"], b.env);
    assert.equal(second.stdout, "database is up to date\n");
  });

  it("a second process on the same embedded data directory exits with a clear error", {
    skip: onPostgres && "embedded database only",
  }, async () => {
    const b = await backend();
    const env = { ...b.env, PLATFORM_PORT: "0" };
    const first = await startProcess(env);
    const events = await fetch(`${first.url}/ready`);
    assert.equal(events.status, 200);

    const second = await runPlatform(["start"], env);
    assert.equal(second.code, 1);
    assert.match(
      second.stderr,
      /^platform: PLATFORM_DATA_DIR: .* is in use by another Platform process \(pid \d+\)/,
    );
    assert.equal(second.stderr.trim().split("\n").length, 1);

    assert.equal((await fetch(`${first.url}/ready`)).status, 200, "the first process still serves");
    assert.equal(await first.stop(), 0);
    const after = await runPlatform(["projections", "rebuild", "users"], b.env);
    assert.equal(after.code, 0, after.stderr);
    assert.match(after.stdout, /users: replayed [1-9]\d* events/);
  });

  it("two processes on one PostgreSQL database both start, migrate once and serve", {
    skip: !onPostgres && "PostgreSQL only",
  }, async () => {
    const b = await backend();
    const env = { ...b.env, PLATFORM_PORT: "0" };
    const [one, two] = await Promise.all([startProcess(env), startProcess(env)]);
    try {
      assert.equal((await fetch(`${one.url}/ready`)).status, 200);
      assert.equal((await fetch(`${two.url}/ready`)).status, 200);
      const created = [one, two].filter((p) => /first start: created instance/.test(p.stdout()));
      assert.equal(created.length, 1, "exactly one process bootstrapped");
      const db = new PostgresDatabase(b.env.DATABASE_URL);
      try {
        const migrations = await db.query<{ n: number; d: number }>(
          "SELECT count(*)::int AS n, count(DISTINCT version)::int AS d FROM schema_migrations",
        );
        assert.equal(migrations[0].n, migrations[0].d);
        const instances = await db.query("SELECT id FROM instances");
        assert.equal(instances.length, 1);
      } finally {
        await db.close();
      }
    } finally {
      await Promise.all([one.stop(), two.stop()]);
    }
  });
});
