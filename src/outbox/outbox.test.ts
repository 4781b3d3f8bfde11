import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { freshBackend, TEST_MASTER_KEY, type TestBackend, testTime } from "../../test/helpers.ts";
import { loadConfig } from "../config.ts";
import type { Database } from "../storage/database.ts";
import { openDatabase } from "../storage/open.ts";
import {
  claimRows,
  type OutboxRow,
  type OutboxTable,
  RowState,
  recordOutcomes,
  releaseRow,
} from "./table.ts";
import { AttemptCancelled, AttemptFailure, OutboxWorker } from "./worker.ts";

/** A scratch outbox table of the shape every outbox has, with an answer column and a secret. */
const TABLE: OutboxTable = {
  name: "outbox_test_items",
  stateColumn: "state",
  doneAtColumn: "done_at",
  retentionDays: 1,
  answerColumn: "last_answer",
  clearedWhenFinished: ["secret"],
};
const CLAIM = {
  lease: "$3::double precision",
  leaseSeconds: 60,
  returning: "r.what, r.secret",
  select: "SELECT * FROM claimed c",
};

interface Item extends OutboxRow {
  what: string;
  secret: string | null;
}

interface Stored {
  id: string;
  state: number;
  attempts: number;
  leased_by: string | null;
  last_error: string | null;
  last_answer: number | null;
  secret: string | null;
  done_at: Date | null;
  retry_in_ms: number;
  [key: string]: unknown;
}

/**
 * Sends by the item's `what`: ok (answer 201), flaky (a transient failure), refused (permanent), slow (ok
 * after 300 ms), hang (until cancelled), unsent (until cancelled, before anything went out).
 */
class TestWorker extends OutboxWorker<Item> {
  readonly sent: string[] = [];
  constructor(db: Database, processId: string, maxAttempts: number) {
    super({
      table: TABLE,
      db,
      processId,
      concurrency: 4,
      retry: { maxAttempts, retryDelayMs: 60_000 },
      log: { error: () => {} },
      names: { outbox: "test items", item: "test item", idField: "item" },
    });
  }
  protected claim(limit: number): Promise<Item[]> {
    return claimRows<Item>(this.db, TABLE, CLAIM, limit, this.processId);
  }
  protected async send(row: Item, signal: AbortSignal): Promise<{ answer?: number }> {
    this.sent.push(row.id);
    if (row.what === "flaky") throw new AttemptFailure("flaky: no answer", false);
    if (row.what === "refused") throw new AttemptFailure("refused for good", true, 403);
    if (row.what === "slow") await new Promise((r) => setTimeout(r, 300));
    if (row.what === "hang" || row.what === "unsent")
      await new Promise((_, reject) =>
        signal.addEventListener("abort", () => reject(new AttemptCancelled(row.what === "hang"))),
      );
    return { answer: 201 };
  }
}

describe("durable outbox (src/outbox)", () => {
  let backend: TestBackend;
  let db: Database;
  before(async () => {
    backend = await freshBackend();
    const masterKey = backend.env.DATABASE_URL ? { PLATFORM_MASTERKEY: TEST_MASTER_KEY } : {};
    db = await openDatabase(loadConfig({ PLATFORM_LOG_LEVEL: "silent", ...masterKey, ...backend.env }));
    await db.exec(
      `CREATE TABLE outbox_test_items (
         instance_id text NOT NULL, id text NOT NULL, what text NOT NULL, secret text,
         state smallint NOT NULL DEFAULT ${RowState.pending}, attempts integer NOT NULL DEFAULT 0,
         next_attempt_at timestamptz NOT NULL DEFAULT now(), leased_by text, last_error text, last_answer integer,
         changed_at timestamptz NOT NULL DEFAULT now(), done_at timestamptz, PRIMARY KEY (instance_id, id))`,
    );
  });
  after(async () => {
    await db?.close();
    await backend?.cleanup();
  });

  async function queue(items: Record<string, string>): Promise<void> {
    await db.query("DELETE FROM outbox_test_items");
    for (const [id, what] of Object.entries(items))
      await db.query(
        "INSERT INTO outbox_test_items (instance_id, id, what, secret) VALUES ('i1', $1, $2, 's')",
        [id, what],
      );
  }

  async function stored(): Promise<Map<string, Stored>> {
    const rows = await db.query<Stored>(
      `SELECT *, (extract(epoch FROM next_attempt_at - now()) * 1000)::int AS retry_in_ms
       FROM outbox_test_items ORDER BY id`,
    );
    return new Map(rows.map((r) => [r.id, r]));
  }

  async function drain(worker: TestWorker, until: (rows: Map<string, Stored>) => boolean): Promise<void> {
    worker.start();
    const deadline = Date.now() + testTime(20_000);
    while (!until(await stored())) {
      if (Date.now() > deadline) assert.fail("the worker did not get there");
      await new Promise((r) => setTimeout(r, 20));
    }
    await worker.stop();
  }

  it("records each outcome: done with its answer, retried with a back-off, failed at once when permanent", async () => {
    await queue({ a: "ok", b: "flaky", c: "refused" });
    const worker = new TestWorker(db, "p1", 3);
    await drain(worker, (rows) => [...rows.values()].every((r) => r.leased_by === null && r.attempts === 1));
    const rows = await stored();
    const [a, b, c] = ["a", "b", "c"].map((id) => rows.get(id) as Stored);
    assert.equal(a.state, RowState.done);
    assert.equal(a.last_answer, 201);
    assert.ok(a.done_at, "when it was done");
    assert.equal(a.secret, null, "a finished row loses what only sending needed");
    assert.equal(b.state, RowState.pending);
    assert.equal(b.last_error, "flaky: no answer");
    assert.equal(b.secret, "s", "a pending row keeps it");
    assert.ok(b.retry_in_ms >= 29_000 && b.retry_in_ms <= 60_000, `first retry in 30–60 s: ${b.retry_in_ms}`);
    assert.equal(c.state, RowState.failed);
    assert.equal(c.attempts, 1, "a permanent failure is not retried");
    assert.equal(c.last_answer, 403);
    assert.equal(c.secret, null);
  });

  it("fails a row once its attempts are used up", async () => {
    await queue({ d: "flaky" });
    await db.query("UPDATE outbox_test_items SET attempts = 2");
    await drain(new TestWorker(db, "p1", 3), (rows) => rows.get("d")?.state !== RowState.pending);
    const d = (await stored()).get("d") as Stored;
    assert.equal(d.state, RowState.failed);
    assert.equal(d.attempts, 3);
    assert.equal(d.last_error, "flaky: no answer");
  });

  it("leases a claimed row: no other process takes it or records over it; a release gives it back", async () => {
    await queue({ e: "ok" });
    const [taken] = await claimRows<Item>(db, TABLE, CLAIM, 10, "p1");
    assert.equal(taken.attempts, 1);
    assert.equal((await stored()).get("e")?.leased_by, "p1");
    assert.deepEqual(await claimRows<Item>(db, TABLE, CLAIM, 10, "p2"), [], "leased: not due for another");
    await recordOutcomes(db, TABLE, [{ row: taken, outcome: { state: RowState.done } }], "p2");
    assert.equal((await stored()).get("e")?.state, RowState.pending, "not p2's lease: nothing recorded");
    await releaseRow(db, TABLE, taken, "p1");
    const e = (await stored()).get("e") as Stored;
    assert.equal(e.attempts, 0, "the attempt is not counted");
    assert.equal(e.leased_by, null);
    const [again] = await claimRows<Item>(db, TABLE, CLAIM, 10, "p2");
    assert.equal(again?.id, "e", "due again at once");
  });

  async function sending(worker: TestWorker, count: number): Promise<void> {
    worker.start();
    const deadline = Date.now() + testTime(20_000);
    while (worker.sent.length < count) {
      if (Date.now() > deadline) assert.fail("not sent");
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  it("a stopping worker takes no more rows and lets the sends in flight finish", async () => {
    await queue({ f: "slow" });
    const worker = new TestWorker(db, "p1", 3);
    await sending(worker, 1);
    assert.deepEqual(await worker.stop(), { finished: 1, cutOff: 0 });
    const f = (await stored()).get("f") as Stored;
    assert.equal(f.state, RowState.done, "sent and recorded before the stop ended");
    assert.equal(f.attempts, 1);
    await queue({ g: "ok" });
    await new Promise((r) => setTimeout(r, 200));
    assert.equal((await stored()).get("g")?.attempts, 0, "a stopped worker takes nothing");
  });

  it("at the stop's deadline it cancels the sends left: a started attempt counts and is due again at once", async () => {
    await queue({ h: "hang", u: "unsent" });
    const worker = new TestWorker(db, "p1", 1);
    await sending(worker, 2);
    assert.deepEqual(await worker.stop(Date.now() + 200), { finished: 0, cutOff: 1 });
    const rows = await stored();
    const h = rows.get("h") as Stored;
    assert.equal(h.state, RowState.pending, "not failed by the stop, though its attempts are used up");
    assert.equal(h.attempts, 1, "the other side may have it: the attempt counts");
    assert.equal(h.leased_by, null);
    assert.match(h.last_error ?? "", /^cut off: the process stopped during the attempt$/);
    assert.ok(h.retry_in_ms <= 0, `due at once: ${h.retry_in_ms}`);
    const u = rows.get("u") as Stored;
    assert.equal(u.state, RowState.pending);
    assert.equal(u.attempts, 0, "nothing went out: given back untried");
    assert.equal(u.leased_by, null);
  });
});
