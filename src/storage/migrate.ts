import { readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import type { Database } from "./database.ts";
import { migrationSteps } from "./migrations/code.ts";

const migrationsDir = fileURLToPath(new URL("./migrations/", import.meta.url));

/** Arbitrary constant shared by every Platform process: the key of the migration advisory lock. */
const MIGRATION_LOCK_KEY = 7_340_211;

export interface Migration {
  version: number;
  name: string;
  sql: string;
}

/** `NNNN_name.sql` files of src/storage/migrations, in version order. */
export function listMigrations(): Migration[] {
  return readdirSync(migrationsDir)
    .filter((file) => /^\d{4}_[\w-]+\.sql$/.test(file))
    .sort()
    .map((file) => ({
      version: Number(file.slice(0, 4)),
      name: file.slice(5, -4),
      sql: readFileSync(migrationsDir + file, "utf8"),
    }));
}

/**
 * Applies the migrations not applied yet, each once. The whole run holds a transaction-scoped advisory
 * lock, so processes starting at the same moment apply them once: the others wait, then find nothing
 * to do. A version may have a code step (./migrations/code.ts), run after its SQL in the same transaction.
 * Returns the versions this call applied.
 */
export async function migrate(db: Database): Promise<number[]> {
  const migrations = listMigrations();
  return db.transaction(
    async (tx) => {
      await tx.query("SELECT pg_advisory_xact_lock($1)", [MIGRATION_LOCK_KEY]);
      await tx.query(
        `CREATE TABLE IF NOT EXISTS schema_migrations (
         version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`,
      );
      const done = new Set(
        (await tx.query<{ version: number }>("SELECT version FROM schema_migrations")).map(
          (row) => row.version,
        ),
      );
      const applied: number[] = [];
      for (const migration of migrations) {
        if (done.has(migration.version)) continue;
        await tx.exec(migration.sql);
        await migrationSteps[migration.version]?.(tx);
        await tx.query("INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", [
          migration.version,
          migration.name,
        ]);
        applied.push(migration.version);
      }
      return applied;
    },
    { unbounded: true },
  );
}

/** True when every known migration is applied (readiness). */
export async function migrationsComplete(db: Database): Promise<boolean> {
  const latest = listMigrations().at(-1)?.version ?? 0;
  const rows = await db.query<{ version: number | null }>(
    "SELECT max(version) AS version FROM schema_migrations",
  );
  return (rows[0]?.version ?? 0) >= latest;
}
