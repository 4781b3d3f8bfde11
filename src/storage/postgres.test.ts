import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import pg from "pg";
import { freshBackend, type TestBackend } from "../../test/helpers.ts";
import { PostgresDatabase, StatementNames } from "./postgres.ts";

describe("statement names", () => {
  it("the same text gets the same name; past the bound new texts get none, known ones keep theirs", () => {
    const names = new StatementNames(2);
    const a = names.nameFor("SELECT $1::int AS a");
    const b = names.nameFor("SELECT $1::int AS b");
    assert.ok(a && b && a !== b);
    assert.equal(names.nameFor("SELECT $1::int AS a"), a);
    assert.equal(new StatementNames(2).nameFor("SELECT $1::int AS a"), a, "every process agrees");
    assert.equal(names.nameFor("SELECT $1::int AS c"), undefined);
    assert.equal(names.nameFor("SELECT $1::int AS b"), b);
    names.forget("SELECT $1::int AS a");
    assert.equal(names.nameFor("SELECT $1::int AS a"), undefined);
  });
});

describe("prepared statements on PostgreSQL", {
  skip: !process.env.DATABASE_URL && "PostgreSQL only",
}, () => {
  let backend: TestBackend;
  const opened: PostgresDatabase[] = [];
  /** A pool of one connection, so that pg_prepared_statements shows what that connection prepared. */
  const open = (preparedStatements?: boolean) => {
    const db = new PostgresDatabase(backend.env.DATABASE_URL!, { max: 1, preparedStatements });
    opened.push(db);
    return db;
  };
  const prepared = async (db: PostgresDatabase) =>
    (await db.query<{ statement: string }>("SELECT statement FROM pg_prepared_statements")).map(
      (row) => row.statement,
    );

  before(async () => {
    backend = await freshBackend();
  });
  after(async () => {
    for (const db of opened) await db.close();
    await backend.cleanup();
  });

  it("a statement with parameters is prepared once per connection, then only executed", async () => {
    const db = open();
    for (const n of [1, 2, 3]) {
      assert.deepEqual(await db.query("SELECT $1::int + 1 AS n", [n]), [{ n: n + 1 }]);
    }
    await db.transaction(async (tx) => {
      assert.deepEqual(await tx.query("SELECT $1::int + 1 AS n", [9]), [{ n: 10 }]);
    });
    assert.deepEqual(await prepared(db), ["SELECT $1::int + 1 AS n"]);
  });

  it("PLATFORM_DATABASE_PREPARED_STATEMENTS=false: nothing is prepared", async () => {
    const db = open(false);
    assert.deepEqual(await db.query("SELECT $1::int + 1 AS n", [1]), [{ n: 2 }]);
    assert.deepEqual(await prepared(db), []);
  });

  it("a prepared `SELECT t.*` keeps working after another process adds a column (rolling upgrade)", async () => {
    const db = open();
    await db.exec("CREATE TABLE upgraded (id int PRIMARY KEY); INSERT INTO upgraded VALUES (1)");
    const sql = "SELECT u.* FROM upgraded u WHERE u.id = $1";
    assert.deepEqual(await db.query(sql, [1]), [{ id: 1 }]);
    const other = new pg.Client({ connectionString: backend.env.DATABASE_URL });
    await other.connect();
    await other.query("ALTER TABLE upgraded ADD COLUMN note text DEFAULT 'new'");
    await other.end();
    // PostgreSQL refuses the prepared form now ("cached plan must not change result type"): it runs unnamed
    assert.deepEqual(await db.query(sql, [1]), [{ id: 1, note: "new" }]);
    assert.deepEqual(await db.query(sql, [1]), [{ id: 1, note: "new" }]);
    // inside a transaction the statement runs unnamed too, from the start
    await db.transaction(async (tx) => {
      assert.deepEqual(await tx.query(sql, [1]), [{ id: 1, note: "new" }]);
    });
  });
});
