import assert from "node:assert/strict";
import fs from "node:fs";
import { syncBuiltinESMExports } from "node:module";
import { after, before, describe, it } from "node:test";
import type { PGlite } from "@electric-sql/pglite";
import { freshBackend, type TestBackend } from "../../test/helpers.ts";
import { DataDirLockedError, PgliteDatabase } from "./pglite.ts";

const onPostgres = Boolean(process.env.DATABASE_URL);

describe("embedded database (PGlite)", { skip: onPostgres && "embedded database only" }, () => {
  const backends: TestBackend[] = [];
  const dataDir = async () => {
    const backend = await freshBackend();
    backends.push(backend);
    return backend.env.PLATFORM_DATA_DIR;
  };
  after(async () => {
    for (const backend of backends) await backend.cleanup();
  });

  it("flushes every commit to disk (fsync) before the commit returns", async () => {
    const db = await PgliteDatabase.open(await dataDir());
    // Counts fsync(2) calls made through Node while letting them through.
    const fsyncSync = fs.fsyncSync;
    let flushes = 0;
    fs.fsyncSync = (fd) => {
      flushes++;
      fsyncSync(fd);
    };
    syncBuiltinESMExports();
    try {
      await db.exec("CREATE TABLE durability_probe (n int)");
      for (let n = 1; n <= 10; n++) {
        const before = flushes;
        await db.transaction((tx) => tx.query("INSERT INTO durability_probe VALUES ($1)", [n]));
        assert.ok(flushes > before, `commit ${n} returned without an fsync`);
      }
    } finally {
      fs.fsyncSync = fsyncSync;
      syncBuiltinESMExports();
      await db.close();
    }
  });

  it("refuses a second open of the same directory by this process", async () => {
    const dir = await dataDir();
    const db = await PgliteDatabase.open(dir);
    try {
      await assert.rejects(PgliteDatabase.open(dir), (error: Error) => {
        assert.ok(error instanceof DataDirLockedError);
        assert.match(error.message, /is already open in this process/);
        return true;
      });
      assert.deepEqual(await db.query("SELECT 1 AS one"), [{ one: 1 }], "the first stays usable");
    } finally {
      await db.close();
    }
    const again = await PgliteDatabase.open(dir);
    await again.close();
  });

  describe("statements prepared once", () => {
    let db: PgliteDatabase;
    const prepared = async () =>
      (
        await db.query<{ statement: string }>(
          "SELECT statement FROM pg_prepared_statements WHERE statement <> $1 ORDER BY statement",
          ["SELECT statement FROM pg_prepared_statements WHERE statement <> $1 ORDER BY statement"],
        )
      ).map((row) => row.statement);
    before(async () => {
      db = await PgliteDatabase.open(await dataDir());
    });
    after(async () => {
      await db.close();
    });

    it("a statement is prepared the first time it runs, then only executed, inside transactions too", async () => {
      for (const n of [1, 2, 3])
        assert.deepEqual(await db.query("SELECT $1::int + 1 AS n", [n]), [{ n: n + 1 }]);
      await db.transaction(async (tx) => {
        assert.deepEqual(await tx.query("SELECT $1::int + 1 AS n", [9]), [{ n: 10 }]);
      });
      assert.deepEqual(await prepared(), ["SELECT $1::int + 1 AS n"]);
    });

    it("parameters and results convert as PGlite's own query converts them", async () => {
      await db.exec(`CREATE TABLE conversions (
        id int PRIMARY KEY, at timestamptz, doc jsonb, tags text[], bytes bytea, big bigint, flag boolean, note text)`);
      const at = new Date("2026-11-27T01:02:03.456Z");
      const row = {
        id: 1,
        at,
        doc: { a: [1, "two"], b: null },
        tags: ["x", "y,z", 'q"uote'],
        bytes: new Uint8Array([0, 1, 254, 255]),
        big: 9007199254740991,
        flag: true,
        note: null,
      };
      const insert = "INSERT INTO conversions VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING *";
      const params = [row.id, row.at, row.doc, row.tags, row.bytes, row.big, row.flag, row.note];
      const inserted = await db.query(insert, params);
      const viaPglite = await (db as unknown as { pg: PGlite }).pg.query("SELECT * FROM conversions");
      assert.deepEqual(inserted, viaPglite.rows);
      assert.deepEqual(inserted, [row]);
      assert.deepEqual(await db.query("SELECT count(*) AS n FROM conversions WHERE at = $1", [at]), [
        { n: 1 },
      ]);
    });

    it("PostgreSQL's errors come through with their SQLSTATE and constraint, and the connection stays usable", async () => {
      await db.exec("CREATE TABLE uniques (id int PRIMARY KEY)");
      const insert = "INSERT INTO uniques VALUES ($1)";
      await db.query(insert, [1]);
      await assert.rejects(db.query(insert, [1]), (error: Error & { code?: string; constraint?: string }) => {
        assert.equal(error.code, "23505");
        assert.equal(error.constraint, "uniques_pkey");
        return true;
      });
      await assert.rejects(db.query("SELEC nothing WHERE $1", [1]), { code: "42601" });
      await assert.rejects(
        db.transaction(async (tx) => {
          await tx.query(insert, [2]);
          await tx.query(insert, [2]);
        }),
        { code: "23505" },
      );
      assert.deepEqual(await db.query("SELECT id FROM uniques ORDER BY id"), [{ id: 1 }], "rolled back");
    });

    it("a prepared `SELECT t.*` keeps working after a migration adds a column", async () => {
      await db.exec("CREATE TABLE upgraded (id int PRIMARY KEY); INSERT INTO upgraded VALUES (1)");
      const sql = "SELECT u.* FROM upgraded u WHERE u.id = $1";
      assert.deepEqual(await db.query(sql, [1]), [{ id: 1 }]);
      await db.exec("ALTER TABLE upgraded ADD COLUMN note text DEFAULT 'new'");
      // PostgreSQL refuses the prepared form now ("cached plan must not change result type"): it runs unnamed
      assert.deepEqual(await db.query(sql, [1]), [{ id: 1, note: "new" }]);
      assert.deepEqual(await db.query(sql, [1]), [{ id: 1, note: "new" }]);
      await db.transaction(async (tx) => {
        assert.deepEqual(await tx.query(sql, [1]), [{ id: 1, note: "new" }]);
      });
      assert.ok(!(await prepared()).includes(sql), "the broken prepared form was closed");
    });

    it("a statement waits for another caller's transaction instead of running inside it", async () => {
      await db.exec("CREATE TABLE isolation_probe (n int)");
      let release!: () => void;
      const held = new Promise<void>((resolve) => (release = resolve));
      const transaction = db.transaction(async (tx) => {
        await tx.query("INSERT INTO isolation_probe VALUES ($1)", [1]);
        await held;
        throw new Error("rolled back on purpose");
      });
      const outside = db.query("INSERT INTO isolation_probe VALUES ($1)", [2]);
      await new Promise((resolve) => setTimeout(resolve, 50));
      release();
      await assert.rejects(transaction, /rolled back on purpose/);
      await outside;
      assert.deepEqual(await db.query("SELECT n FROM isolation_probe"), [{ n: 2 }]);
    });

    it("a table that grew is analyzed, once per doubling, and prepared statements are planned again", async () => {
      await db.exec(`CREATE TABLE grown (tenant text NOT NULL, id text NOT NULL, owner text NOT NULL,
        PRIMARY KEY (tenant, id));
        CREATE INDEX grown_owner_idx ON grown (tenant, owner)`);
      const pages = async () =>
        (
          await db.query<{ relpages: number; size: number }>(
            "SELECT relpages, pg_relation_size('grown') / 8192 AS size FROM pg_class WHERE relname = 'grown'",
          )
        )[0]!;
      const select = "SELECT id FROM grown WHERE tenant = $1 AND owner = $2";
      for (let i = 0; i < 10; i++) await db.query(select, ["t", `o${i}`]);
      const pg = (db as unknown as { pg: PGlite }).pg;
      const [{ name }] = (
        await pg.query<{ name: string }>("SELECT name FROM pg_prepared_statements WHERE statement = $1", [
          select,
        ])
      ).rows as [{ name: string }];
      const plan = async () =>
        (await pg.exec(`EXPLAIN EXECUTE "${name}"('t', 'o7')`))[0]!.rows
          .map((row) => row["QUERY PLAN"])
          .join("\n");
      const planWhenEmpty = await plan();

      await db.exec(
        "INSERT INTO grown SELECT 't', 'id' || g, 'o' || (g % 50) FROM generate_series(1, 100) g",
      );
      assert.ok((await pages()).size < 8);
      assert.ok(!(await db.analyzeGrownTables()).includes("grown"), "under 8 pages: not worth it");

      await db.exec(
        "INSERT INTO grown SELECT 't', 'id' || g, 'o' || (g % 50) FROM generate_series(101, 5000) g",
      );
      assert.equal(
        await plan(),
        planWhenEmpty,
        "the plan made on the empty table stays while nothing analyzes",
      );
      assert.deepEqual(await db.analyzeGrownTables(), ["grown"]);
      const analyzed = await pages();
      assert.equal(analyzed.relpages, analyzed.size);
      assert.notEqual(await plan(), planWhenEmpty, "planned again with the table's statistics");
      assert.match(await plan(), /rows=100 /, "5,000 rows over 50 owners");

      assert.deepEqual(await db.analyzeGrownTables(), [], "not grown since");
      await db.exec(
        "INSERT INTO grown SELECT 't', 'id' || g, 'o' || (g % 50) FROM generate_series(5001, 8000) g",
      );
      assert.ok((await pages()).size < 2 * analyzed.relpages);
      assert.deepEqual(await db.analyzeGrownTables(), [], "grown by less than half");
      await db.exec(
        "INSERT INTO grown SELECT 't', 'id' || g, 'o' || (g % 50) FROM generate_series(8001, 12000) g",
      );
      assert.deepEqual(await db.analyzeGrownTables(), ["grown"], "twice the size of the last analysis");
    });
  });
});
