import { closeSync, mkdirSync, openSync, readFileSync, rmSync, writeSync } from "node:fs";
import path from "node:path";
import { PGlite } from "@electric-sql/pglite";
import type { Database, Queryable, Row } from "./database.ts";

/**
 * The embedded database: PostgreSQL compiled to WebAssembly, persisted in `<dataDir>/pgdata`.
 * It has one connection; PGlite queues every query and runs a transaction exclusively, so writes are
 * serialized. A lock file keeps a second process off the same directory.
 */
export class PgliteDatabase implements Database {
  readonly kind = "pglite" as const;

  private constructor(
    private readonly pg: PGlite,
    private readonly releaseLock: () => void,
  ) {}

  static async open(dataDir: string): Promise<PgliteDatabase> {
    mkdirSync(dataDir, { recursive: true });
    const release = acquireLock(dataDir);
    try {
      const pg = new PGlite(path.join(dataDir, "pgdata"));
      await pg.waitReady;
      return new PgliteDatabase(pg, release);
    } catch (error) {
      release();
      throw new Error(
        `PLATFORM_DATA_DIR: cannot open the embedded database in ${dataDir}: ${(error as Error).message}`,
      );
    }
  }

  async query<T extends Row = Row>(sql: string, params: readonly unknown[] = []): Promise<T[]> {
    const result = await this.pg.query<T>(sql, params as unknown[]);
    return result.rows;
  }

  async exec(sql: string): Promise<void> {
    await this.pg.exec(sql);
  }

  async transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
    return this.pg.transaction(async (tx) =>
      fn({
        query: async <R extends Row = Row>(sql: string, params: readonly unknown[] = []) =>
          (await tx.query<R>(sql, params as unknown[])).rows,
        exec: async (sql: string) => {
          await tx.exec(sql);
        },
      }),
    );
  }

  async close(): Promise<void> {
    try {
      await this.pg.close();
    } finally {
      this.releaseLock();
    }
  }
}

export class DataDirLockedError extends Error {}

/** Takes `<dataDir>/platform.lock` (holding our pid); a lock whose process is gone is taken over. */
function acquireLock(dataDir: string): () => void {
  const lockPath = path.join(dataDir, "platform.lock");
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(lockPath, "wx", 0o600);
      writeSync(fd, String(process.pid));
      closeSync(fd);
      let released = false;
      return () => {
        if (released) return;
        released = true;
        rmSync(lockPath, { force: true });
      };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
      const holder = Number.parseInt(readFileSync(lockPath, "utf8"), 10);
      if (Number.isInteger(holder) && isAlive(holder)) {
        throw new DataDirLockedError(
          `PLATFORM_DATA_DIR: ${dataDir} is in use by another Platform process (pid ${holder}); stop it or use another directory`,
        );
      }
      rmSync(lockPath, { force: true });
    }
  }
  throw new DataDirLockedError(`PLATFORM_DATA_DIR: cannot lock ${dataDir}`);
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}
