/**
 * An Idempotency-Key whose call committed its change but whose process died before it stored the answer
 * (docs/api.md "Safe retries"): a retry through another process learns at once that the change was applied
 * and which resource it wrote, rather than "in progress; retry later" for a minute.
 *
 * PostgreSQL: two `platform start` processes on one database. A trigger the test adds holds the first
 * process's statement that stores the answer (after the commit of the change), so the process can be killed
 * with SIGKILL exactly in that window; its sleeping statement is then ended too, as if it had never been
 * sent. Embedded: one process per directory, so the second process starts on the directory after the first
 * was killed; there a trigger makes storing the answer fail (the row is left as a crash in that window
 * leaves it) and the first process is killed after it answered.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import path from "node:path";
import { after, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import { PgliteDatabase } from "../src/storage/pglite.ts";
import { freshBackend, type TestBackend, tempDir } from "./helpers.ts";
import { type RunningProcess, startProcess } from "./process.ts";
import { testTime } from "./time.ts";

const onPostgres = Boolean(process.env.DATABASE_URL);
const ORGS = "/resources/v3alpha/organizations";
/** The application_name of the first process's connections: the trigger and the test pick them by it. */
const FIRST = "platform-crash-first";

interface Reply {
  status: number;
  json: { code?: number; message?: string; details?: { id?: string }; name?: string };
}

/** A REST call; status 0 when no answer came (the process died). */
async function call(
  server: RunningProcess,
  token: string,
  method: string,
  route: string,
  options: { json?: unknown; key?: string } = {},
): Promise<Reply> {
  try {
    const response = await fetch(`${server.url}${route}`, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        "content-type": "application/json",
        ...(options.key ? { "idempotency-key": options.key } : {}),
      },
      body: options.json === undefined ? undefined : JSON.stringify(options.json),
      signal: AbortSignal.timeout(testTime(30_000)),
    });
    return { status: response.status, json: (await response.json()) as Reply["json"] };
  } catch {
    return { status: 0, json: {} };
  }
}

async function killed(server: RunningProcess): Promise<void> {
  const exited = new Promise((resolve) => server.child.once("exit", resolve));
  if (server.child.exitCode === null && server.child.signalCode === null) {
    server.child.kill("SIGKILL");
    await exited;
  }
}

/** The retry's answer: applied, naming the resource, which exists once. */
function assertAnswerLost(retry: Reply): string {
  assert.equal(retry.status, 409, JSON.stringify(retry.json));
  assert.equal(retry.json.code, 9, "FAILED_PRECONDITION, not ABORTED (in progress)");
  const id =
    /the request with this Idempotency-Key was applied \(it wrote resource (\d+)\) but its answer was lost/.exec(
      retry.json.message ?? "",
    )?.[1];
  assert.ok(id, retry.json.message ?? "no message");
  return id;
}

describe("Idempotency-Key after a crash between commit and answer", () => {
  const cleanups: (() => Promise<unknown>)[] = [];
  after(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
  });

  it("PostgreSQL: the retry through another process answers at once that the change was applied", {
    skip: !onPostgres && "PostgreSQL only",
  }, async () => {
    const backend: TestBackend = await freshBackend();
    cleanups.push(() => backend.cleanup());
    const patPath = path.join(tempDir("crash-"), "admin.pat");
    const firstUrl = new URL(backend.env.DATABASE_URL);
    firstUrl.searchParams.set("application_name", FIRST);
    const first = await startProcess({
      DATABASE_URL: firstUrl.toString(),
      PLATFORM_PORT: "0",
      PLATFORM_FIRSTINSTANCE_PAT_PATH: patPath,
    });
    cleanups.push(() => killed(first));
    const second = await startProcess({ ...backend.env, PLATFORM_PORT: "0" });
    cleanups.push(() => second.stop());
    const token = readFileSync(patPath, "utf8").trim();
    const db = new pg.Client({ connectionString: backend.env.DATABASE_URL });
    await db.connect();
    cleanups.push(() => db.end());
    await db.query(`
      CREATE FUNCTION test_hold_answer() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF current_setting('application_name') = '${FIRST}' THEN PERFORM pg_sleep(600); END IF;
        RETURN NEW;
      END $$;
      CREATE TRIGGER test_hold_answer BEFORE UPDATE OF response ON idempotency_keys
        FOR EACH ROW WHEN (NEW.response IS NOT NULL) EXECUTE FUNCTION test_hold_answer();`);

    const request = { json: { name: "Crashed Before Answer" }, key: "crash-key-1" };
    const firstAnswer = call(first, token, "POST", ORGS, request);
    // the first process committed the organization and is storing the answer
    const held = async () =>
      (
        await db.query(
          "SELECT 1 FROM pg_stat_activity WHERE application_name = $1 AND wait_event = 'PgSleep'",
          [FIRST],
        )
      ).rowCount;
    for (let i = 0; i < testTime(300) && !(await held()); i++) await sleep(100);
    assert.equal(await held(), 1, "the first process is storing its answer");

    // while that process runs, a retry is in progress
    const early = await call(second, token, "POST", ORGS, request);
    assert.equal(early.status, 409, JSON.stringify(early.json));
    assert.equal(early.json.code, 10, "ABORTED: in progress");
    assert.match(early.json.message ?? "", /in progress; retry later/);

    await killed(first);
    // its statement storing the answer ends with it, uncommitted (as if it had never been sent)
    await db.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1", [
      FIRST,
    ]);
    for (let i = 0; i < testTime(100); i++) {
      const left = await db.query("SELECT 1 FROM pg_stat_activity WHERE application_name = $1", [FIRST]);
      if (left.rowCount === 0) break;
      await sleep(100);
    }
    assert.equal((await firstAnswer).status, 0, "the client never got the first answer");

    const id = assertAnswerLost(await call(second, token, "POST", ORGS, request));
    const org = await call(second, token, "GET", `${ORGS}/${id}`);
    assert.equal(org.status, 200);
    const { rows } = await db.query("SELECT id FROM orgs WHERE name = $1", [request.json.name]);
    assert.deepEqual(
      rows.map((r) => r.id),
      [id],
      "applied once",
    );
  });

  it("embedded: the retry through the restarted process answers at once that the change was applied", {
    skip: onPostgres && "embedded database only",
  }, async () => {
    const backend: TestBackend = await freshBackend();
    cleanups.push(() => backend.cleanup());
    const dataDir = backend.env.PLATFORM_DATA_DIR;
    const patPath = path.join(tempDir("crash-"), "admin.pat");
    // storing any answer fails: the row stays as a crash between commit and answer leaves it
    const setup = await PgliteDatabase.open(dataDir);
    await setup.exec(`
      CREATE FUNCTION test_lose_answer() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN RAISE EXCEPTION 'test: the answer is lost'; END $$;
      CREATE TRIGGER test_lose_answer BEFORE UPDATE OF response ON idempotency_keys
        FOR EACH ROW WHEN (NEW.response IS NOT NULL) EXECUTE FUNCTION test_lose_answer();`);
    await setup.close();

    const env = { ...backend.env, PLATFORM_PORT: "0", PLATFORM_FIRSTINSTANCE_PAT_PATH: patPath };
    const first = await startProcess(env);
    cleanups.push(() => killed(first));
    const token = readFileSync(patPath, "utf8").trim();
    const request = { json: { name: "Crashed Before Answer" }, key: "crash-key-1" };
    const created = await call(first, token, "POST", ORGS, request);
    assert.equal(created.status, 201, JSON.stringify(created.json));
    await killed(first);

    const second = await startProcess(env);
    cleanups.push(() => second.stop());
    const id = assertAnswerLost(await call(second, token, "POST", ORGS, request));
    assert.equal(id, created.json.details?.id);
    assert.equal((await call(second, token, "GET", `${ORGS}/${id}`)).status, 200);
  });
});
