import type { Config } from "../config.ts";
import type { Database } from "../storage/database.ts";
import { migrate } from "../storage/migrate.ts";
import { openDatabase } from "../storage/open.ts";
import { DataDirLockedError } from "../storage/pglite.ts";

/** A command's failure, printed as one line (`platform: <message>`) with exit code 1. */
export class CommandError extends Error {}

/** The embedded database is held by a running server (`pid`): the command cannot open it itself. */
export class ServerRunningError extends CommandError {
  constructor(
    readonly dataDir: string,
    readonly pid: number,
    whileServing: string,
  ) {
    super(`the embedded database in ${dataDir} is in use by a running server (pid ${pid}): ${whileServing}`);
  }
}

/**
 * Opens and migrates the database for a command that changes data while servers may run. On PostgreSQL
 * that is always possible. The embedded database admits one process: while a server holds it, the command
 * stops with one line saying what to do instead (`whileServing`): a `ServerRunningError`.
 */
export async function openForCommand(config: Config, whileServing: string): Promise<Database> {
  let db: Database;
  try {
    db = await openDatabase(config);
  } catch (error) {
    const pid = /\(pid (\d+)\)/.exec((error as Error).message)?.[1];
    if (error instanceof DataDirLockedError && pid)
      throw new ServerRunningError(config.dataDir, Number(pid), whileServing);
    throw error;
  }
  try {
    await migrate(db);
    return db;
  } catch (error) {
    await db.close().catch(() => {});
    throw error;
  }
}

/** The instance a command works on: `--instance ID`, else the oldest (the one the first start created). */
export async function commandInstance(db: Database, instanceId: string | undefined): Promise<string> {
  const rows = await db.query<{ id: string }>(
    instanceId === undefined
      ? "SELECT id FROM instances ORDER BY created_at, id LIMIT 1"
      : "SELECT id FROM instances WHERE id = $1",
    instanceId === undefined ? [] : [instanceId],
  );
  if (rows[0]) return rows[0].id;
  throw new CommandError(
    instanceId === undefined
      ? "the database has no instance yet: run `platform start` once to create the first one"
      : `no instance ${instanceId}`,
  );
}
