/**
 * Telling "the database cannot be reached" apart from every other database error, so that the API answers
 * it with UNAVAILABLE (503, retry later) instead of INTERNAL (500, give up): the database is restarting, a
 * failover is in progress, the network is cut, the pool cannot get a connection in time, or the embedded
 * database was closed (shutdown).
 *
 * `withAvailabilityErrors(db)` wraps a Database so that such failures come out as
 * `DatabaseUnavailableError` (the driver's error kept as `cause`, for the log only), and a full disk
 * (SQLSTATE 53100) as `DatabaseFullError` (507 to clients). Only errors of the database are classified this
 * way, so a refused connection of some other outbound call never reads as "database unavailable".
 */
import { DatabaseFullError } from "../errors.ts";
import { type Database, type Queryable, type Row, sqlState, type TransactionOptions } from "./database.ts";

/** The database cannot be reached right now; retrying later may succeed. */
export class DatabaseUnavailableError extends Error {
  constructor(cause: unknown) {
    super("database unavailable", { cause });
    this.name = "DatabaseUnavailableError";
  }
}

/** Socket errors of a connection to the server (refused, reset, timed out, unreachable, name lookup). */
const NETWORK_ERRORS = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ECONNABORTED",
  "ETIMEDOUT",
  "EPIPE",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EHOSTDOWN",
  "ENOTFOUND",
  "EAI_AGAIN",
]);

/**
 * SQLSTATEs of a server that is going away or not accepting connections: class 08 (connection exception)
 * is matched by prefix, but for 08P01; 57P01 admin_shutdown, 57P02 crash_shutdown, 57P03 cannot_connect_now
 * (starting up, recovery), 53300 too_many_connections; and 55000 with the refused connection's message.
 */
const UNAVAILABLE_STATES = new Set(["57P01", "57P02", "57P03", "53300"]);

const PROTOCOL_VIOLATION = "08P01";

/**
 * 55000 object_not_in_prerequisite_state is an outage only when the server refuses a connection to the
 * database (`ALTER DATABASE … ALLOW_CONNECTIONS false`, a database being dropped or recreated); the same
 * code is also the answer to statements that are wrong in the current state, which are bugs.
 */
const NOT_IN_PREREQUISITE_STATE = "55000";
const NOT_ACCEPTING_CONNECTIONS = /is not currently accepting connections/;

/**
 * 57014 query_canceled is an outage when the server cancelled a statement for running past
 * statement_timeout (PLATFORM_DATABASE_STATEMENT_TIMEOUT_MS: the database is overloaded or blocked); a
 * cancel for another reason is not.
 */
const QUERY_CANCELED = "57014";
const STATEMENT_TIMEOUT = /statement timeout/;

/** Messages of pg, pg-pool and PGlite that carry no code. */
const UNAVAILABLE_MESSAGES = [
  /^database did not answer within \d+ ms$/, // ./postgres.ts: a statement unanswered past its bound
  /^Connection terminated/, // pg: socket closed under a query; "... due to connection timeout"
  /^timeout exceeded when trying to connect$/, // pg-pool: no connection within connectionTimeoutMillis
  /^timeout expired$/, // pg: the server accepted no connection within connectionTimeoutMillis
  /is not queryable$/, // pg: a client whose connection failed or that was closed
  /^Cannot use a pool after calling end on the pool$/, // pg-pool during shutdown
  /^PGlite is closed$/, // PGlite after close()
];

/** Whether a database driver error means "cannot reach the database" (see the constants above). */
export function isConnectionFailure(error: unknown): boolean {
  if (error instanceof DatabaseUnavailableError) return true;
  if (typeof error !== "object" || error === null) return false;
  const code = (error as { code?: unknown }).code;
  if (typeof code === "string") {
    if (NETWORK_ERRORS.has(code) || UNAVAILABLE_STATES.has(code)) return true;
    if (code === NOT_IN_PREREQUISITE_STATE)
      return NOT_ACCEPTING_CONNECTIONS.test(error instanceof Error ? error.message : "");
    if (code === QUERY_CANCELED) return STATEMENT_TIMEOUT.test(error instanceof Error ? error.message : "");
    // 08P01 protocol_violation is the server refusing what we sent (a bind with the wrong number of
    // parameters): a bug to answer with INTERNAL, not an outage to retry.
    if (/^08[0-9A-Z]{3}$/.test(code) && code !== PROTOCOL_VIOLATION) return true;
  }
  // Connecting to a name with several addresses (localhost: ::1 and 127.0.0.1) fails with all of them.
  if (error instanceof AggregateError && error.errors.length > 0 && error.errors.every(isConnectionFailure)) {
    return true;
  }
  const message = error instanceof Error ? error.message : "";
  return UNAVAILABLE_MESSAGES.some((pattern) => pattern.test(message));
}

/** SQLSTATE disk_full: a file of the database could not grow (ENOSPC). */
const DISK_FULL = "53100";

function classified(error: unknown): unknown {
  if (sqlState(error) === DISK_FULL)
    return new DatabaseFullError(`disk full: ${(error as Error).message}`, error);
  return !(error instanceof DatabaseUnavailableError) && isConnectionFailure(error)
    ? new DatabaseUnavailableError(error)
    : error;
}

async function classifying<T>(run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (error) {
    throw classified(error);
  }
}

/** `db` with its connectivity failures thrown as DatabaseUnavailableError; everything else unchanged. */
export function withAvailabilityErrors<D extends Database>(db: D): D {
  const wrapped: Database = {
    get kind() {
      return db.kind;
    },
    query: <T extends Row = Row>(sql: string, params?: readonly unknown[]) =>
      classifying(() => db.query<T>(sql, params)),
    exec: (sql: string) => classifying(() => db.exec(sql)),
    transaction: <T>(fn: (tx: Queryable) => Promise<T>, options?: TransactionOptions) =>
      classifying(() => db.transaction(fn, options)),
    holdProcessLease: (processId: string) => classifying(() => db.holdProcessLease(processId)),
    isProcessAlive: (processId: string) => classifying(() => db.isProcessAlive(processId)),
    storageProblem: () => db.storageProblem?.(),
    close: () => db.close(),
  };
  // Anything else the implementation offers (e.g. the pool of PostgreSQL) stays reachable.
  return Object.setPrototypeOf(wrapped, db) as D;
}
