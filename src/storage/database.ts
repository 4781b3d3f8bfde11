/**
 * The one storage interface. Both implementations speak the same PostgreSQL dialect, so every query,
 * migration and test runs unchanged on the embedded PGlite and on a PostgreSQL server.
 */
export type Row = Record<string, unknown>;

export interface Queryable {
  /** Runs one statement with `$1`-style parameters and returns its rows. */
  query<T extends Row = Row>(sql: string, params?: readonly unknown[]): Promise<T[]>;
  /** Runs a script of several statements without parameters (migrations). */
  exec(sql: string): Promise<void>;
}

export interface Database extends Queryable {
  readonly kind: "pglite" | "postgres";
  /** Lines for the start-up output about what opening the database did (e.g. a stale lock taken over). */
  readonly notices?: readonly string[];
  /**
   * Runs `fn` in one transaction: committed when it resolves, rolled back when it throws. Its statements are
   * bounded like every statement (PLATFORM_DATABASE_STATEMENT_TIMEOUT_MS) unless `unbounded` (migrations,
   * projection rebuilds: work an operator started, which may take long).
   */
  transaction<T>(fn: (tx: Queryable) => Promise<T>, options?: TransactionOptions): Promise<T>;
  /**
   * Marks this process as running under `processId` until the lease is released or the process ends, so
   * that other processes can tell (`isProcessAlive`) whether rows it left behind belong to work still
   * running. PostgreSQL: a session-level advisory lock held on a connection of its own (process-lease.ts).
   */
  holdProcessLease(processId: string): Promise<ProcessLease>;
  /** Whether the process that holds the lease of `processId` is still running (process-lease.ts). */
  isProcessAlive(processId: string): Promise<boolean>;
  /**
   * Why the database refuses changes right now, for `/ready` (the embedded database: too little free disk
   * space); undefined when it takes them.
   */
  storageProblem?(): string | undefined;
  /** The connections right now, for the metrics (read at scrape time; must be cheap). */
  poolStats?(): PoolStats;
  close(): Promise<void>;
}

export interface TransactionOptions {
  unbounded?: boolean;
}

export interface ProcessLease {
  release(): Promise<void>;
}

/** Connections of a database: the PostgreSQL pool, or the embedded database's one connection. */
export interface PoolStats {
  /** Most connections the pool opens. */
  max: number;
  /** Connections running a query or transaction. */
  inUse: number;
  /** Connections open and free. */
  idle: number;
  /** Queries and transactions waiting for a connection. */
  waiting: number;
  /** The embedded database: queries and transactions refused since start, its queue being full. */
  refused?: number;
}

/** PostgreSQL SQLSTATE of an error from either driver, if it has one. */
export function sqlState(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" ? code : undefined;
}

/** The constraint a unique violation (23505) hit. */
export function violatedConstraint(error: unknown): string | undefined {
  const constraint = (error as { constraint?: unknown } | null)?.constraint;
  return typeof constraint === "string" ? constraint : undefined;
}

export const UNIQUE_VIOLATION = "23505";
