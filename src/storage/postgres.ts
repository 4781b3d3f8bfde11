import pg from "pg";
import {
  type Database,
  type PoolStats,
  type ProcessLease,
  type Queryable,
  type Row,
  sqlState,
} from "./database.ts";
import { holdLease, LEASE_HELD_SQL, processLeaseKey } from "./process-lease.ts";
import { PLAN_CHANGED, StatementNames } from "./statement-names.ts";

export { StatementNames };

// int8 and numeric as JS numbers, like PGlite: positions and counts stay far below 2^53.
pg.types.setTypeParser(20, (value) => Number(value));
pg.types.setTypeParser(1700, (value) => Number(value));

const CONNECT_TIMEOUT_MS = 5000;

/** A PostgreSQL server through a connection pool: the production and scale-out backend. */
export class PostgresDatabase implements Database {
  readonly kind = "postgres" as const;
  readonly pool: pg.Pool;
  private readonly max: number;

  private readonly statements: StatementNames | undefined;

  constructor(
    private readonly url: string,
    options: { max?: number; preparedStatements?: boolean } = {},
  ) {
    this.max = options.max ?? 20;
    this.statements = options.preparedStatements === false ? undefined : new StatementNames();
    this.pool = new pg.Pool({
      connectionString: url,
      max: this.max,
      connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    });
    // A connection the server ends (restart, failover, pg_terminate_backend) makes pg emit 'error' on its
    // client, and an 'error' without a listener ends the process. The pool listens only while a client is
    // idle (and re-emits that error on itself); a client checked out for a transaction has no listener of
    // its own. So every client gets one for life, as soon as it connects: the failure reaches the statement
    // running on it (or the next one, "not queryable") as an error, the pool drops the client when it comes
    // back, and the next query opens a new connection.
    this.pool.on("connect", (client) => client.on("error", () => {}));
    this.pool.on("error", () => {});
  }

  async query<T extends Row = Row>(sql: string, params: readonly unknown[] = []): Promise<T[]> {
    return (await this.run(this.pool, sql, params)).rows as T[];
  }

  async exec(sql: string): Promise<void> {
    await this.pool.query(sql);
  }

  async transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    try {
      await client.query("BEGIN");
      const tx: Queryable = {
        query: async <R extends Row = Row>(sql: string, params: readonly unknown[] = []) =>
          (await this.run(client, sql, params)).rows as R[],
        exec: async (sql: string) => {
          await client.query(sql);
        },
      };
      const result = await fn(tx);
      await client.query("COMMIT");
      return result;
    } catch (error) {
      await client.query("ROLLBACK").catch(() => {});
      throw error;
    } finally {
      client.release();
    }
  }

  /** A statement with parameters runs as a named (prepared) one: see StatementNames. */
  private async run(
    on: pg.Pool | pg.PoolClient,
    sql: string,
    params: readonly unknown[],
  ): Promise<pg.QueryResult> {
    const values = params as unknown[];
    const name = values.length > 0 ? this.statements?.nameFor(sql) : undefined;
    if (name === undefined) return on.query({ text: sql, values });
    try {
      return await on.query({ name, text: sql, values });
    } catch (error) {
      if (sqlState(error) !== PLAN_CHANGED) throw error;
      this.statements?.forget(sql);
      // Inside a transaction the failure has aborted it: this attempt fails, the next runs unnamed.
      if ("release" in on) throw error;
      return on.query({ text: sql, values });
    }
  }

  holdProcessLease(processId: string): Promise<ProcessLease> {
    // outside the pool: the lease lives as long as its connection
    return holdLease(
      () => new pg.Client({ connectionString: this.url, connectionTimeoutMillis: CONNECT_TIMEOUT_MS }),
      processId,
    );
  }

  async isProcessAlive(processId: string): Promise<boolean> {
    const rows = await this.query<{ held: boolean }>(LEASE_HELD_SQL, [processLeaseKey(processId)]);
    return rows[0]?.held === true;
  }

  poolStats(): PoolStats {
    const { totalCount, idleCount, waitingCount } = this.pool;
    return { max: this.max, inUse: totalCount - idleCount, idle: idleCount, waiting: waitingCount };
  }

  async close(): Promise<void> {
    await this.pool.end();
  }
}

/** Fails fast with a clear message when the server cannot be reached. */
export async function connectPostgres(
  url: string,
  options: { preparedStatements?: boolean } = {},
): Promise<PostgresDatabase> {
  const db = new PostgresDatabase(url, options);
  try {
    await db.query("SELECT 1");
  } catch (error) {
    await db.close().catch(() => {});
    const reason = (error as Error).message || (error as { code?: string }).code || String(error);
    throw new Error(`DATABASE_URL: cannot connect to PostgreSQL at ${redactUrl(url)}: ${reason}`);
  }
  return db;
}

export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = "***";
    return parsed.toString();
  } catch {
    return "(unparsable URL)";
  }
}
