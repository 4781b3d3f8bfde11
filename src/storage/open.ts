import type { Config } from "../config.ts";
import type { Database } from "./database.ts";
import { PgliteDatabase } from "./pglite.ts";
import { connectPostgres } from "./postgres.ts";

/** PostgreSQL when DATABASE_URL is set, else the embedded database in PLATFORM_DATA_DIR. */
export async function openDatabase(config: Pick<Config, "databaseUrl" | "dataDir">): Promise<Database> {
  return config.databaseUrl ? connectPostgres(config.databaseUrl) : PgliteDatabase.open(config.dataDir);
}
