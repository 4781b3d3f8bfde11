import pg from "pg";
import {
  type Database,
  type PoolStats,
  type ProcessLease,
  type Queryable,
  type Row,
  sqlState,
  type TransactionOptions,
} from "./database.ts";
import { holdLease, LEASE_HELD_SQL, processLeaseKey } from "./process-lease.ts";
import { PLAN_CHANGED, StatementNames } from "./statement-names.ts";

export { StatementNames };

// int8 and numeric as JS numbers, like PGlite: positions and counts stay far below 2^53.
pg.types.setTypeParser(20, (value) => Number(value));
pg.types.setTypeParser(1700, (value) => Number(value));

const CONNECT_TIMEOUT_MS = 5000;
/** How much longer than statement_timeout a statement may go unanswered before its connection is dropped. */
const ANSWER_GRACE_MS = 1000;

/** A statement the server did not answer within its bound: its connection was dropped (503 to clients). */
export class UnansweredStatementError extends Error {
  constructor(ms: number) {
    super(`database did not answer within ${ms} ms`);
    this.name = "UnansweredStatementError";
  }
}

/** A PostgreSQL server through a connection pool: the production and scale-out backend. */
export class PostgresDatabase implements Database {
  readonly kind = "postgres" as const;
  readonly pool: pg.Pool;
  private readonly max: number;

  private readonly statements: StatementNames | undefined;
  /**
   * Every statement is bounded twice (0: neither). The server cancels one that runs past
   * `statement_timeout` (57014: a slow or blocked database). A server that does not answer at all (frozen,
   * a peer gone without closing the connection) cannot cancel anything: then the statement fails here
   * `ANSWER_GRACE_MS` later and its connection is dropped, so that no later statement queues behind it.
   */
  private readonly statementTimeoutMs: number;

  constructor(
    private readonly url: string,
    options: { max?: number; preparedStatements?: boolean; statementTimeoutMs?: number } = {},
  ) {
    this.max = options.max ?? 20;
    this.statements = options.preparedStatements === false ? undefined : new StatementNames();
    this.statementTimeoutMs = options.statementTimeoutMs ?? 5000;
    this.pool = new pg.Pool({
      connectionString: url,
      max: this.max,
      // also the longest wait for a free connection of the pool
      connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
      ...(this.statementTimeoutMs ? { statement_timeout: this.statementTimeoutMs } : {}),
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
    return this.onClient(async (client) => (await this.run(client, sql, params, true)).rows as T[]);
  }

  async exec(sql: string): Promise<void> {
    await this.onClient((client) => this.bounded(client, client.query(sql), true));
  }

  async transaction<T>(fn: (tx: Queryable) => Promise<T>, options: TransactionOptions = {}): Promise<T> {
    const bound = !options.unbounded;
    return this.onClient(async (client) => {
      try {
        await this.bounded(client, client.query("BEGIN"), bound);
        if (!bound) await client.query("SET LOCAL statement_timeout = 0");
        const tx: Queryable = {
          query: async <R extends Row = Row>(sql: string, params: readonly unknown[] = []) =>
            (await this.run(client, sql, params, bound, true)).rows as R[],
          exec: async (sql: string) => {
            await this.bounded(client, client.query(sql), bound);
          },
        };
        const result = await fn(tx);
        await this.bounded(client, client.query("COMMIT"), bound);
        return result;
      } catch (error) {
        if (!(error instanceof UnansweredStatementError))
          await this.bounded(client, client.query("ROLLBACK"), true).catch(() => {});
        throw error;
      }
    });
  }

  /** `use` on a connection of the pool; one whose server stopped answering is dropped, not reused. */
  private async onClient<T>(use: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    let broken = false;
    try {
      return await use(client);
    } catch (error) {
      broken = error instanceof UnansweredStatementError;
      throw error;
    } finally {
      client.release(broken);
    }
  }

  /**
   * `statement`, failed with UnansweredStatementError when the server has not answered it
   * `ANSWER_GRACE_MS` after its statement_timeout: the connection is then destroyed (pg fails whatever runs
   * on it), since a late answer would be read as the answer to the next statement.
   */
  private async bounded<R>(client: pg.PoolClient, statement: Promise<R>, bound: boolean): Promise<R> {
    if (!bound || !this.statementTimeoutMs) return statement;
    const ms = this.statementTimeoutMs + ANSWER_GRACE_MS;
    let timer: NodeJS.Timeout | undefined;
    const unanswered = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        reject(new UnansweredStatementError(ms));
        (client as unknown as { connection: { stream: { destroy(): void } } }).connection.stream.destroy();
      }, ms);
    });
    statement.catch(() => {}); // its own failure after the bound is no one's concern
    try {
      return await Promise.race([statement, unanswered]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** A statement with parameters runs as a named (prepared) one: see StatementNames. */
  private async run(
    client: pg.PoolClient,
    sql: string,
    params: readonly unknown[],
    bound: boolean,
    inTransaction = false,
  ): Promise<pg.QueryResult> {
    const values = params as unknown[];
    const name = values.length > 0 ? this.statements?.nameFor(sql) : undefined;
    if (name === undefined) return this.bounded(client, client.query({ text: sql, values }), bound);
    try {
      return await this.bounded(client, client.query({ name, text: sql, values }), bound);
    } catch (error) {
      if (sqlState(error) !== PLAN_CHANGED) throw error;
      this.statements?.forget(sql);
      // Inside a transaction the failure has aborted it: this attempt fails, the next runs unnamed.
      if (inTransaction) throw error;
      return this.bounded(client, client.query({ text: sql, values }), bound);
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
  options: { preparedStatements?: boolean; statementTimeoutMs?: number } = {},
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
