/**
 * Migration 0087 on a database of an earlier release: users and username constraints as that release
 * wrote them (lowercased by JavaScript), including two names that only differ by width, which the old
 * index allowed. The migration's code step fills the keys and rewrites the constraints.
 */
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { after, before, describe, it } from "node:test";
import { freshBackend, type TestBackend, tempDir } from "../../test/helpers.ts";
import { findUser } from "../domain/session/commands.ts";
import type { Database } from "./database.ts";
import { listMigrations, migrate } from "./migrate.ts";
import { openDatabase } from "./open.ts";

const BEFORE = 87;

describe("migration 0087: username keys for existing users", () => {
  let backend: TestBackend;
  let db: Database;

  before(async () => {
    // an empty database (not the migrated template of embedded test servers)
    if (process.env.DATABASE_URL) backend = await freshBackend();
    else {
      const dataDir = tempDir("pglite-empty-");
      backend = {
        env: { PLATFORM_DATA_DIR: dataDir },
        cleanup: async () => rmSync(dataDir, { recursive: true, force: true }),
      };
    }
    db = await openDatabase({
      databaseUrl: backend.env.DATABASE_URL,
      dataDir: backend.env.PLATFORM_DATA_DIR ?? "",
    });
    // the schema of the release before: migrations below 0087 only
    await db.transaction(async (tx) => {
      await tx.query(
        "CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())",
      );
      for (const migration of listMigrations().filter((m) => m.version < BEFORE)) {
        await tx.exec(migration.sql);
        await tx.query("INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", [
          migration.version,
          migration.name,
        ]);
      }
      await tx.query(
        `INSERT INTO orgs (instance_id, id, name, primary_domain, created_at, changed_at, sequence)
         VALUES ('i1', 'o1', 'Org', 'org.example', now(), now(), 1)`,
      );
      const users: [string, string, string][] = [
        ["u1", "admin", "2026-01-01T00:00:00Z"],
        ["u2", "ａｄｍｉｎ", "2026-02-01T00:00:00Z"],
        ["u3", "Straße", "2026-03-01T00:00:00Z"],
      ];
      for (const [id, username, created] of users) {
        await tx.query(
          `INSERT INTO users (instance_id, id, org_id, type, username, created_at, changed_at, sequence)
           VALUES ('i1', $1, 'o1', 1, $2, $3, $3, 1)`,
          [id, username, created],
        );
        // as the earlier release claimed it: JavaScript's lowercase
        await tx.query(
          "INSERT INTO unique_constraints (instance_id, unique_type, unique_field) VALUES ('i1', 'username', $1)",
          [username.toLowerCase()],
        );
      }
    });
  });
  after(async () => {
    await db?.close();
    await backend?.cleanup();
  });

  it("fills every key, rewrites the constraints, and keeps both accounts whose names now share a key", async () => {
    const applied = await migrate(db);
    assert.ok(applied.includes(BEFORE), `applied ${applied.join(", ")}`);
    const users = await db.query<{ id: string; username_key: string }>(
      "SELECT id, username_key FROM users ORDER BY id",
    );
    assert.deepEqual(
      users.map((u) => [u.id, u.username_key]),
      [
        ["u1", "admin"],
        ["u2", "admin"],
        ["u3", "strasse"],
      ],
    );
    const constraints = await db.query<{ unique_field: string }>(
      "SELECT unique_field FROM unique_constraints WHERE unique_type = 'username' ORDER BY unique_field",
    );
    assert.deepEqual(
      constraints.map((c) => c.unique_field),
      ["admin", "strasse"],
    );
    // the key is required from now on
    await assert.rejects(
      db.query(
        `INSERT INTO users (instance_id, id, org_id, type, username, created_at, changed_at, sequence)
         VALUES ('i1', 'u4', 'o1', 1, 'x', now(), now(), 1)`,
      ),
    );

    // a login name finds the exact spelling typed, else the older account
    assert.equal((await findUser(db, "i1", { loginName: "ａｄｍｉｎ" })).id, "u2");
    assert.equal((await findUser(db, "i1", { loginName: "admin" })).id, "u1");
    assert.equal((await findUser(db, "i1", { loginName: "ＡＤＭＩＮ@ORG.example" })).id, "u1");
    assert.equal((await findUser(db, "i1", { loginName: "STRASSE" })).id, "u3");
  });
});
