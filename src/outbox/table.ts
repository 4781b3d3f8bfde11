/**
 * The statements of a durable outbox table, shared by every outbox (the event deliveries'
 * `execution_deliveries`, the notifications' `notification_messages`): each describes its table
 * (`OutboxTable`) and its claim (`ClaimQuery`); the life of a row is the same for all.
 *
 * A row is written pending in the transaction of the event that causes it; taken by one worker at a time
 * (`claimRows`: `FOR UPDATE SKIP LOCKED`, counting the attempt and leasing the row by moving
 * `next_attempt_at` to the end of the lease, all in one statement, so no transaction stays open while the
 * item is sent); then done, pending again after a back-off (`retryDelayMs`), or failed (`recordOutcomes`,
 * each only while the row is still the recording process's lease). A worker that dies while sending leaves
 * its lease to run out: the row is then due again (at least once). Finished rows are deleted after the
 * table's retention (`purgeRows`).
 */
import type { Queryable } from "../storage/database.ts";

/** The states of a row, the same numbers in every outbox table (the APIs map them to their enums). */
export const RowState = { pending: 1, done: 2, failed: 3 } as const;
export type RowState = (typeof RowState)[keyof typeof RowState];

/** Seconds a lease lasts beyond the longest a send may take. */
export const LEASE_MARGIN_SECONDS = 10;
/** Longest delay between two attempts. */
export const MAX_RETRY_DELAY_MS = 60 * 60 * 1000;

/**
 * An outbox table. Every one has the key `(instance_id, id)` and the columns `attempts`, `next_attempt_at`,
 * `leased_by`, `last_error`, `changed_at`, besides those named here.
 */
export interface OutboxTable {
  name: string;
  /** The smallint column holding the RowState. */
  stateColumn: string;
  /** The column set to the time the row was done (null otherwise). */
  doneAtColumn: string;
  /** Finished rows are kept this long (the record), then deleted. */
  retentionDays: number;
  /** The column recording the other side's answer code (an HTTP status), where the table keeps one. */
  answerColumn?: string;
  /** Columns emptied once a row is finished: what only sending needed (a sealed secret). */
  clearedWhenFinished?: string[];
}

/** What every claimed row has. */
export interface OutboxRow {
  [column: string]: unknown;
  instance_id: string;
  id: string;
  /** This attempt's number, counted by the claim. */
  attempts: number;
}

/** The outcome of an attempt; `answer`: the other side's answer code, where the table keeps one. */
export type Outcome =
  | { state: typeof RowState.done; answer?: number }
  | { state: typeof RowState.pending; error: string; retryInMs: number; answer?: number }
  | { state: typeof RowState.failed; error: string; answer?: number };

/** What an outbox reads with the rows it takes. */
export interface ClaimQuery {
  /**
   * How long a lease lasts, in seconds: an SQL expression over the row `r`, in which `$3` is
   * `leaseSeconds`.
   */
  lease: string;
  leaseSeconds: number;
  /** The row's columns sending needs, besides `instance_id, id, attempts`: `r.a, r.b`. */
  returning: string;
  /** The claim's answer: `SELECT … FROM claimed c` with the joins sending needs. */
  select: string;
}

/**
 * Takes up to `limit` due rows for process `processId`: counts the attempt and leases each row. One
 * statement: rows another worker is taking at the same moment are skipped (`SKIP LOCKED`), rows it has
 * taken are no longer due.
 */
export function claimRows<Row extends OutboxRow>(
  db: Queryable,
  table: OutboxTable,
  query: ClaimQuery,
  limit: number,
  processId: string,
): Promise<Row[]> {
  return db.query<Row>(
    `WITH due AS (
       SELECT r.instance_id, r.id FROM ${table.name} r
       WHERE r.${table.stateColumn} = ${RowState.pending} AND r.next_attempt_at <= now()
       ORDER BY r.next_attempt_at LIMIT $1
       FOR UPDATE SKIP LOCKED
     ), claimed AS (
       UPDATE ${table.name} r
       SET attempts = r.attempts + 1, leased_by = $2, changed_at = now(),
           next_attempt_at = now() + make_interval(secs => ${query.lease})
       FROM due WHERE r.instance_id = due.instance_id AND r.id = due.id
       RETURNING r.instance_id, r.id, r.attempts, ${query.returning}
     )
     ${query.select}`,
    [limit, processId, query.leaseSeconds],
  );
}

/** When the next pending row is due (undefined: none pending). */
export async function nextDue(db: Queryable, table: OutboxTable): Promise<Date | undefined> {
  const rows = await db.query<{ at: Date | null }>(
    `SELECT min(next_attempt_at) AS at FROM ${table.name} WHERE ${table.stateColumn} = ${RowState.pending}`,
  );
  const at = rows[0]?.at;
  return at ? new Date(at) : undefined;
}

/** The outcomes of attempts, in one statement, each recorded only while its row is this process's lease. */
export async function recordOutcomes(
  db: Queryable,
  table: OutboxTable,
  outcomes: { row: OutboxRow; outcome: Outcome }[],
  processId: string,
): Promise<void> {
  if (outcomes.length === 0) return;
  const finished = (table.clearedWhenFinished ?? []).map(
    (column) => `, ${column} = CASE WHEN o.state = ${RowState.pending} THEN r.${column} END`,
  );
  const answer = table.answerColumn ? `, ${table.answerColumn} = o.answer` : "";
  await db.query(
    `UPDATE ${table.name} r
     SET ${table.stateColumn} = o.state, last_error = coalesce(o.error, r.last_error), leased_by = NULL,
         changed_at = now(), ${table.doneAtColumn} = CASE WHEN o.state = ${RowState.done} THEN now() END,
         next_attempt_at = now() + make_interval(secs => o.retry_ms / 1000)${answer}${finished.join("")}
     FROM unnest($1::text[], $2::text[], $3::int[], $4::smallint[], $5::text[], $6::double precision[],
                 $7::int[])
       AS o(instance_id, id, attempts, state, error, retry_ms, answer)
     WHERE r.instance_id = o.instance_id AND r.id = o.id AND r.attempts = o.attempts AND r.leased_by = $8`,
    [
      outcomes.map((o) => o.row.instance_id),
      outcomes.map((o) => o.row.id),
      outcomes.map((o) => o.row.attempts),
      outcomes.map((o) => o.outcome.state),
      outcomes.map((o) => (o.outcome.state === RowState.done ? null : o.outcome.error.slice(0, 1000))),
      outcomes.map((o) => (o.outcome.state === RowState.pending ? o.outcome.retryInMs : 0)),
      outcomes.map((o) => o.outcome.answer ?? null),
      processId,
    ],
  );
}

/** Gives a lease back untried (the process is stopping): due at once, the attempt not counted. */
export async function releaseRow(
  db: Queryable,
  table: OutboxTable,
  row: OutboxRow,
  processId: string,
): Promise<void> {
  await db.query(
    `UPDATE ${table.name} SET attempts = attempts - 1, leased_by = NULL, next_attempt_at = now()
     WHERE instance_id = $1 AND id = $2 AND leased_by = $3 AND attempts = $4`,
    [row.instance_id, row.id, processId, row.attempts],
  );
}

/** Deletes up to 1000 finished rows older than the table's retention; returns how many. */
export async function purgeRows(db: Queryable, table: OutboxTable): Promise<number> {
  const rows = await db.query(
    `DELETE FROM ${table.name} WHERE (instance_id, id) IN (
       SELECT instance_id, id FROM ${table.name}
       WHERE ${table.stateColumn} <> ${RowState.pending}
         AND changed_at < now() - make_interval(days => ${table.retentionDays})
       ORDER BY changed_at LIMIT 1000)
     RETURNING id`,
  );
  return rows.length;
}

/**
 * Wakes the workers of every process when the transaction `tx` commits (PostgreSQL `NOTIFY` on the
 * outbox's channel, which each process's `LISTEN` connection hears).
 */
export async function notifyWorkers(tx: Queryable, channel: string): Promise<void> {
  await tx.query("SELECT pg_notify($1, '')", [channel]);
}

/**
 * The delay before attempt `attempts + 1` after `attempts` failed ones: `baseMs · 2^(attempts-1)`, at
 * most MAX_RETRY_DELAY_MS, with "equal jitter" (half fixed, half random), so that items failing together
 * (a target or provider down) do not all come back at the same moment.
 */
export function retryDelayMs(attempts: number, baseMs: number, random = Math.random()): number {
  const delay = Math.min(MAX_RETRY_DELAY_MS, baseMs * 2 ** Math.max(0, attempts - 1));
  return Math.round(delay / 2 + (random * delay) / 2);
}
