import type { Queryable } from "./database.ts";

/**
 * Table statistics for the embedded database, which has no autovacuum daemon to gather them (PGlite runs
 * PostgreSQL as a single backend).
 *
 * Its statements are prepared once (pglite-statements.ts), and PostgreSQL may keep a generic plan for a
 * prepared statement. A plan made while a table was empty and never analyzed stays when the table grows:
 * on the migrated schema the browser's sessions query by user was planned on the index by creation time,
 * filtering by user, which took 500 ms a call at 200,000 sessions instead of 0.4 ms. ANALYZE gives the
 * planner the table's size and distributions and invalidates the cached plans that read the table.
 *
 * A table is analyzed when its file has grown to twice its size at its last analysis (`relpages`, 0 when
 * never analyzed) and is at least MIN_PAGES: so a table is analyzed about once per doubling, whatever
 * its size, and tables too small for a plan to matter never are. Sizes come from the files, so the rule
 * holds after a restart or a crash too (the activity counters of `pg_stat_user_tables` may not).
 */
export const ANALYZE_INTERVAL_MS = 30_000;

/** 64 KB: below this a table's plans cost about the same whichever they are. */
const MIN_PAGES = 8;

/**
 * Rows sampled per column statistic: 300 × this. PostgreSQL's default of 100 took 1.6 s of the server's
 * one thread for 50,000 users; 30 takes 0.4 s, and plans of lookups by key need no finer histograms.
 */
const STATISTICS_TARGET = 30;

const GROWN_TABLES = `SELECT c.relname AS name
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
  WHERE n.nspname = current_schema() AND c.relkind = 'r'
    AND pg_relation_size(c.oid) >= current_setting('block_size')::bigint * GREATEST($1::int, 2 * c.relpages)
  ORDER BY c.relname`;

/** Analyzes the tables that grew enough since their last analysis (see above); returns their names. */
export async function analyzeGrownTables(db: Queryable): Promise<string[]> {
  const tables = await db.query<{ name: string }>(GROWN_TABLES, [MIN_PAGES]);
  for (const { name } of tables) {
    // one table per call, so that requests waiting for the database go in between
    await db.exec(
      `SET default_statistics_target = ${STATISTICS_TARGET}; ANALYZE ${quoteIdent(name)}; RESET default_statistics_target`,
    );
  }
  return tables.map((table) => table.name);
}

function quoteIdent(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}
