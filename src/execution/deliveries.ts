/**
 * The `execution_deliveries` table (migration 0030): the outbox of event conditions and its delivery log.
 *
 * Life of a row: written `pending` in the transaction of its event (./outbox.ts); taken by one worker at a
 * time (`claim`: `FOR UPDATE SKIP LOCKED`, counting the attempt and leasing the row until the target's
 * timeout plus a margin by moving `next_attempt_at`, all in one statement, so no transaction stays open
 * while the target is called); then `delivered`, `pending` again with a backoff delay, or `failed` once
 * the attempts are used up. A worker that dies while sending leaves its lease to run out: the row is then
 * due again (at least once). Finished rows are deleted after RETENTION_DAYS.
 */
import type { Queryable } from "../storage/database.ts";

export const DeliveryStatus = { pending: 1, delivered: 2, failed: 3 } as const;
export type DeliveryStatus = (typeof DeliveryStatus)[keyof typeof DeliveryStatus];

/** Seconds a lease lasts beyond the target's timeout. */
export const LEASE_MARGIN_SECONDS = 10;
/** Delivered and failed rows are kept this long (the delivery log), then deleted. */
export const RETENTION_DAYS = 7;
/** Longest delay between two attempts. */
export const MAX_RETRY_DELAY_MS = 60 * 60 * 1000;

/** A new row of the outbox. */
export interface NewDelivery {
  instanceId: string;
  id: string;
  eventPosition: number;
  eventType: string;
  aggregateType: string;
  aggregateId: string;
  executionId: string;
  targetId: string;
}

/** A row a worker took, with its event and its target as they are now. */
export interface ClaimedDelivery {
  instance_id: string;
  id: string;
  attempts: number;
  execution_id: string;
  target_id: string;
  event_type: string;
  aggregate_type: string;
  aggregate_id: string;
  resource_owner: string;
  sequence: number;
  created_at: Date;
  creator: string;
  payload: Record<string, unknown> | null;
  /** null when the target was deleted since. */
  target_name: string | null;
  url: string | null;
  timeout_ns: number | string | null;
  signing_key: string | null;
  previous_signing_key: string | null;
  previous_valid_until: Date | null;
  [key: string]: unknown;
}

/** A row of the delivery log. */
export interface DeliveryRow {
  instance_id: string;
  id: string;
  event_position: number;
  event_type: string;
  aggregate_type: string;
  aggregate_id: string;
  execution_id: string;
  target_id: string;
  status: number;
  attempts: number;
  next_attempt_at: Date;
  last_error: string | null;
  last_status: number | null;
  created_at: Date;
  changed_at: Date;
  delivered_at: Date | null;
  [key: string]: unknown;
}

/** Writes new rows (in the transaction of their events). */
export async function insertDeliveries(tx: Queryable, rows: NewDelivery[]): Promise<void> {
  for (let start = 0; start < rows.length; start += 500) {
    const batch = rows.slice(start, start + 500);
    const values: unknown[] = [];
    const tuples = batch.map((r) => {
      const base = values.length;
      values.push(
        r.instanceId,
        r.id,
        r.eventPosition,
        r.eventType,
        r.aggregateType,
        r.aggregateId,
        r.executionId,
        r.targetId,
      );
      const p = Array.from({ length: 8 }, (_, i) => `$${base + i + 1}`).join(", ");
      return `(${p}, ${DeliveryStatus.pending}, 0, now(), now(), now())`;
    });
    await tx.query(
      `INSERT INTO execution_deliveries (instance_id, id, event_position, event_type, aggregate_type, aggregate_id,
         execution_id, target_id, status, attempts, next_attempt_at, created_at, changed_at)
       VALUES ${tuples.join(", ")}`,
      values,
    );
  }
}

/**
 * Takes up to `limit` due rows for process `processId`: counts the attempt and leases each row for its
 * target's timeout plus LEASE_MARGIN_SECONDS. One statement: rows another worker is taking at the same
 * moment are skipped (`SKIP LOCKED`), rows it has taken are no longer due.
 */
export async function claimDeliveries(
  db: Queryable,
  limit: number,
  processId: string,
): Promise<ClaimedDelivery[]> {
  return db.query<ClaimedDelivery>(
    `WITH due AS (
       SELECT d.instance_id, d.id FROM execution_deliveries d
       WHERE d.status = ${DeliveryStatus.pending} AND d.next_attempt_at <= now()
       ORDER BY d.next_attempt_at LIMIT $1
       FOR UPDATE SKIP LOCKED
     ), claimed AS (
       UPDATE execution_deliveries d
       SET attempts = d.attempts + 1, leased_by = $2, changed_at = now(),
           next_attempt_at = now() + make_interval(secs => (coalesce(
             (SELECT t.timeout_ns FROM action_targets t WHERE t.instance_id = d.instance_id AND t.id = d.target_id),
             0) / 1e9)::double precision + $3)
       FROM due WHERE d.instance_id = due.instance_id AND d.id = due.id
       RETURNING d.instance_id, d.id, d.attempts, d.execution_id, d.target_id, d.event_position
     )
     SELECT c.instance_id, c.id, c.attempts, c.execution_id, c.target_id, e.event_type, e.aggregate_type,
            e.aggregate_id, e.resource_owner, e.sequence, e.created_at, e.creator, e.payload,
            t.name AS target_name, t.url, t.timeout_ns, k.signing_key, k.previous_signing_key,
            k.previous_valid_until
     FROM claimed c
     JOIN events e ON e.position = c.event_position
     LEFT JOIN action_targets t ON t.instance_id = c.instance_id AND t.id = c.target_id
     LEFT JOIN action_target_signing_keys k ON k.instance_id = c.instance_id AND k.target_id = c.target_id`,
    [limit, processId, LEASE_MARGIN_SECONDS],
  );
}

/** When the next pending row is due (undefined: none pending). */
export async function nextDue(db: Queryable): Promise<Date | undefined> {
  const rows = await db.query<{ at: Date | null }>(
    `SELECT min(next_attempt_at) AS at FROM execution_deliveries WHERE status = ${DeliveryStatus.pending}`,
  );
  const at = rows[0]?.at;
  return at ? new Date(at) : undefined;
}

/** The outcome of an attempt, recorded only while the row is still this process's lease. */
export async function recordAttempt(
  db: Queryable,
  row: Pick<ClaimedDelivery, "instance_id" | "id" | "attempts">,
  processId: string,
  outcome:
    | { status: typeof DeliveryStatus.delivered; httpStatus: number }
    | { status: typeof DeliveryStatus.pending; error: string; httpStatus?: number; retryInMs: number }
    | { status: typeof DeliveryStatus.failed; error: string; httpStatus?: number },
): Promise<void> {
  const delivered = outcome.status === DeliveryStatus.delivered;
  await db.query(
    `UPDATE execution_deliveries
     SET status = $1::smallint, last_error = coalesce($2, last_error), last_status = $3, leased_by = NULL,
         changed_at = now(), delivered_at = CASE WHEN $1::smallint = ${DeliveryStatus.delivered} THEN now() END,
         next_attempt_at = now() + make_interval(secs => $4::double precision / 1000)
     WHERE instance_id = $5 AND id = $6 AND leased_by = $7 AND attempts = $8`,
    [
      outcome.status,
      delivered ? null : outcome.error.slice(0, 1000),
      outcome.httpStatus ?? null,
      outcome.status === DeliveryStatus.pending ? outcome.retryInMs : 0,
      row.instance_id,
      row.id,
      processId,
      row.attempts,
    ],
  );
}

/** Gives a lease back untried (the process is stopping): due at once, the attempt not counted. */
export async function releaseDelivery(
  db: Queryable,
  row: Pick<ClaimedDelivery, "instance_id" | "id" | "attempts">,
  processId: string,
): Promise<void> {
  await db.query(
    `UPDATE execution_deliveries SET attempts = attempts - 1, leased_by = NULL, next_attempt_at = now()
     WHERE instance_id = $1 AND id = $2 AND leased_by = $3 AND attempts = $4`,
    [row.instance_id, row.id, processId, row.attempts],
  );
}

/** Deletes up to 1000 finished rows older than RETENTION_DAYS; returns how many. */
export async function purgeDeliveries(db: Queryable): Promise<number> {
  const rows = await db.query(
    `DELETE FROM execution_deliveries WHERE (instance_id, id) IN (
       SELECT instance_id, id FROM execution_deliveries
       WHERE status <> ${DeliveryStatus.pending} AND changed_at < now() - make_interval(days => ${RETENTION_DAYS})
       ORDER BY changed_at LIMIT 1000)
     RETURNING id`,
  );
  return rows.length;
}

/**
 * The delay before attempt `attempts + 1` after `attempts` failed ones: `baseMs · 2^(attempts-1)`, at
 * most MAX_RETRY_DELAY_MS, with "equal jitter" (half fixed, half random), so that deliveries failing
 * together do not all come back at the same moment.
 */
export function retryDelayMs(attempts: number, baseMs: number, random = Math.random()): number {
  const delay = Math.min(MAX_RETRY_DELAY_MS, baseMs * 2 ** Math.max(0, attempts - 1));
  return Math.round(delay / 2 + (random * delay) / 2);
}
