import assert from "node:assert/strict";
import fs from "node:fs";
import { syncBuiltinESMExports } from "node:module";
import { after, describe, it } from "node:test";
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
});
