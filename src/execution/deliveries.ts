/**
 * The `execution_deliveries` table (migration 0030): the outbox of event conditions and its delivery log,
 * one of the durable outboxes of ../outbox (the life of a row: ../outbox/table.ts).
 *
 * Written `pending` in the transaction of its event (./outbox.ts); claimed with its event and its target,
 * leased for the target's timeout plus LEASE_MARGIN_SECONDS; then `delivered` (with the target's HTTP
 * status in `last_status`), `pending` again after a back-off, or `failed`. Finished rows are deleted after
 * RETENTION_DAYS.
 */
import {
  type ClaimQuery,
  claimRows,
  LEASE_MARGIN_SECONDS,
  type OutboxTable,
  RowState,
} from "../outbox/table.ts";
import type { Queryable } from "../storage/database.ts";

export const DeliveryStatus = {
  pending: RowState.pending,
  delivered: RowState.done,
  failed: RowState.failed,
} as const;
export type DeliveryStatus = (typeof DeliveryStatus)[keyof typeof DeliveryStatus];

/** Delivered and failed rows are kept this long (the delivery log), then deleted. */
export const RETENTION_DAYS = 7;

export const DELIVERIES: OutboxTable = {
  name: "execution_deliveries",
  stateColumn: "status",
  doneAtColumn: "delivered_at",
  retentionDays: RETENTION_DAYS,
  answerColumn: "last_status",
};

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

/** The claim: each row with its event and its target as they are now. */
const CLAIM: ClaimQuery = {
  lease: `(coalesce(
             (SELECT t.timeout_ns FROM action_targets t WHERE t.instance_id = r.instance_id AND t.id = r.target_id),
             0) / 1e9)::double precision + $3`,
  leaseSeconds: LEASE_MARGIN_SECONDS,
  returning: "r.execution_id, r.target_id, r.event_position",
  select: `SELECT c.instance_id, c.id, c.attempts, c.execution_id, c.target_id, e.event_type, e.aggregate_type,
            e.aggregate_id, e.resource_owner, e.sequence, e.created_at, e.creator, e.payload,
            t.name AS target_name, t.url, t.timeout_ns, k.signing_key, k.previous_signing_key,
            k.previous_valid_until
     FROM claimed c
     JOIN events e ON e.position = c.event_position
     LEFT JOIN action_targets t ON t.instance_id = c.instance_id AND t.id = c.target_id
     LEFT JOIN action_target_signing_keys k ON k.instance_id = c.instance_id AND k.target_id = c.target_id`,
};

/** Takes up to `limit` due rows for process `processId` (../outbox/table.ts `claimRows`). */
export function claimDeliveries(db: Queryable, limit: number, processId: string): Promise<ClaimedDelivery[]> {
  return claimRows<ClaimedDelivery>(db, DELIVERIES, CLAIM, limit, processId);
}
