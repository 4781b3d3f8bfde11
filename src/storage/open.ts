import type { Config } from "../config.ts";
import { withAvailabilityErrors } from "./availability.ts";
import type { Database } from "./database.ts";
import { PgliteDatabase } from "./pglite.ts";
import { connectPostgres } from "./postgres.ts";

/**
 * PostgreSQL when DATABASE_URL is set, else the embedded database in PLATFORM_DATA_DIR; either way a lost
 * connection comes out as DatabaseUnavailableError (503 to clients, see availability.ts).
 */
export async function openDatabase(
  config: Pick<Config, "databaseUrl" | "dataDir"> &
    Partial<Pick<Config, "preparedStatements" | "statementTimeoutMs" | "embeddedQueueLimit">>,
): Promise<Database> {
  return withAvailabilityErrors(
    config.databaseUrl
      ? await connectPostgres(config.databaseUrl, {
          preparedStatements: config.preparedStatements,
          statementTimeoutMs: config.statementTimeoutMs,
        })
      : await PgliteDatabase.open(config.dataDir, { queueLimit: config.embeddedQueueLimit }),
  );
}
