/**
 * The INSERT of an append (EventStore.push): events with their sequences, and the unique values they claim
 * or release.
 */
import { AlreadyExistsError } from "../errors.ts";
import { type Queryable, sqlState, UNIQUE_VIOLATION, violatedConstraint } from "../storage/database.ts";
import type { NewEvent, PushContext, StoredEvent, UniqueConstraintAction } from "./types.ts";

const SYSTEM_SCOPE = "";

/** Another push wrote one of the aggregates first: the command runs again. */
export class SequenceConflict extends Error {}

/** What an append reads back of each event it inserted (and `claimed`, when the INSERT claims values). */
interface AppendedRow {
  instance_id: string;
  aggregate_type: string;
  aggregate_id: string;
  sequence: number;
  created_at: Date;
  position: number;
  [key: string]: unknown;
}
const APPENDED_COLUMNS = "instance_id, aggregate_type, aggregate_id, sequence, created_at, position";

/**
 * Inserts a push's events in one statement (with the unique values they claim, when it can) and returns
 * them as stored, in position order. A concurrent writer of one of the aggregates makes it throw
 * SequenceConflict (the push runs again); a value already claimed, AlreadyExistsError.
 */
export async function insertEvents(
  tx: Queryable,
  ctx: PushContext,
  events: NewEvent[],
  loaded: Map<string, number>,
): Promise<StoredEvent[]> {
  // The sequence of each event: the last one the command loaded (or this push's previous event) + 1. An
  // aggregate the command did not load (a new one, usually) gets its sequence in the INSERT itself (the
  // aggregate's last sequence + 1, read by the statement: no round trip of its own); a concurrent writer
  // of the same aggregate then makes the primary key fail, and the command runs again (SequenceConflict).
  const next = new Map<string, number>();
  /** Events so far of each aggregate whose sequence the INSERT reads. */
  const unknown = new Map<string, number>();
  const values: unknown[] = [];
  const rows: string[] = [];
  const keys: string[] = [];
  const payloads: Array<string | null> = [];
  for (const event of events) {
    const instanceId = event.instanceId ?? ctx.instanceId;
    const key = aggregateKey(instanceId, event.aggregateType, event.aggregateId);
    keys.push(key);
    const param = (value: unknown) => `$${values.push(value)}`;
    const [instance, type, id] = [param(instanceId), param(event.aggregateType), param(event.aggregateId)];
    const known = next.get(key) ?? loaded.get(key);
    let sequence: string;
    if (known === undefined) {
      const nth = (unknown.get(key) ?? 0) + 1;
      unknown.set(key, nth);
      sequence = `COALESCE((${lastSequenceSql(instance, type, id)}), 0) + ${nth}`;
    } else {
      next.set(key, known + 1);
      sequence = param(known + 1);
    }
    const payload =
      event.payload === undefined || event.payload === null ? null : JSON.stringify(event.payload);
    payloads.push(payload);
    rows.push(
      `(${instance}, ${type}, ${id}, ${sequence}, ${param(event.type)}, ${param(payload)}, ${param(ctx.creator)}, ${param(event.resourceOwner)}, now())`,
    );
  }

  // Unique values the events claim: when they are only claims of distinct values (a create), the INSERT
  // claims them too, in the same statement (one round trip); the values it could not claim are taken.
  // Releases (and a value released and claimed again in one push) are applied one by one, in order.
  const claims = events.flatMap((event) =>
    (event.uniqueConstraints ?? []).map((constraint) => ({
      constraint,
      key:
        constraint.action === "remove_instance"
          ? undefined
          : constraintKey(event.instanceId ?? ctx.instanceId, constraint),
    })),
  );
  const claimKeys = new Set(claims.map((c) => c.key?.join("\u0000")));
  const claimInInsert =
    claims.length > 0 &&
    claims.every((c) => c.constraint.action === "add") &&
    claimKeys.size === claims.length;
  let withClaims = "";
  let claimedColumn = "";
  if (claimInInsert) {
    const claimRows = claims.map((c) => `(${c.key!.map((v) => `$${values.push(v)}`).join(", ")})`);
    withClaims = `WITH claimed AS (INSERT INTO unique_constraints (instance_id, unique_type, unique_field) VALUES ${claimRows.join(", ")}
         ON CONFLICT DO NOTHING RETURNING instance_id, unique_type, unique_field) `;
    claimedColumn =
      ", (SELECT json_agg(json_build_array(instance_id, unique_type, unique_field)) FROM claimed) AS claimed";
  }

  // Back come only what the database decided (sequence, position, time) and the aggregate of each row:
  // the rest of each event is what was sent, its payload as the JSON it was sent as (sending every
  // column back, the payload above all, cost both sides CPU on every append).
  let inserted: AppendedRow[];
  try {
    inserted = await tx.query<AppendedRow>(
      `${withClaims}INSERT INTO events (instance_id, aggregate_type, aggregate_id, sequence, event_type, payload, creator, resource_owner, created_at)
         VALUES ${rows.join(", ")} RETURNING ${APPENDED_COLUMNS}${claimedColumn}`,
      values,
    );
  } catch (error) {
    if (sqlState(error) === UNIQUE_VIOLATION && violatedConstraint(error) === "events_pkey") {
      throw new SequenceConflict();
    }
    throw error;
  }
  if (claimInInsert) {
    const claimed = new Set(((inserted[0]?.claimed ?? []) as string[][]).map((key) => key.join("\u0000")));
    const taken = claims.find((c) => !claimed.has(c.key!.join("\u0000")));
    if (taken?.constraint.action === "add") throw new AlreadyExistsError(taken.constraint.message);
  }
  // The rows of each aggregate in sequence order are its events in push order.
  const rowsOf = new Map<string, AppendedRow[]>();
  for (const row of inserted) {
    const key = aggregateKey(row.instance_id, row.aggregate_type, row.aggregate_id);
    const list = rowsOf.get(key);
    if (list) list.push(row);
    else rowsOf.set(key, [row]);
  }
  for (const list of rowsOf.values()) {
    if (list.length > 1) list.sort((a, b) => Number(a.sequence) - Number(b.sequence));
  }
  const used = new Map<string, number>();
  const inOrder = events.map((event, i): StoredEvent => {
    const nth = used.get(keys[i]) ?? 0;
    used.set(keys[i], nth + 1);
    const row = rowsOf.get(keys[i])?.[nth];
    if (!row) throw new Error(`append: no row came back for event ${i} (${event.type})`);
    return {
      instanceId: row.instance_id,
      aggregateType: row.aggregate_type,
      aggregateId: row.aggregate_id,
      sequence: Number(row.sequence),
      type: event.type,
      payload: payloads[i] === null ? null : (JSON.parse(payloads[i]) as Record<string, unknown>),
      creator: ctx.creator,
      resourceOwner: event.resourceOwner,
      createdAt: row.created_at instanceof Date ? row.created_at : new Date(row.created_at),
      position: Number(row.position),
    };
  });
  const stored = [...inOrder].sort((a, b) => a.position - b.position);

  if (!claimInInsert) {
    for (let i = 0; i < events.length; i++) {
      for (const constraint of events[i].uniqueConstraints ?? []) {
        await applyUniqueConstraint(tx, inOrder[i].instanceId, constraint);
      }
    }
  }
  return stored;
}

/** The unique_constraints key of a claim or release: scope (instance, or '' for the system), type, value. */
function constraintKey(
  instanceId: string,
  constraint: Exclude<UniqueConstraintAction, { action: "remove_instance" }>,
): [string, string, string] {
  const scope = constraint.scope === "system" ? SYSTEM_SCOPE : instanceId;
  const field = constraint.ignoreCase ? constraint.field.toLowerCase() : constraint.field;
  return [scope, constraint.type, field];
}

async function applyUniqueConstraint(tx: Queryable, instanceId: string, constraint: UniqueConstraintAction) {
  if (constraint.action === "remove_instance") {
    await tx.query("DELETE FROM unique_constraints WHERE instance_id = $1", [instanceId]);
    return;
  }
  const key = constraintKey(instanceId, constraint);
  if (constraint.action === "remove") {
    await tx.query(
      "DELETE FROM unique_constraints WHERE instance_id = $1 AND unique_type = $2 AND unique_field = $3",
      key,
    );
    return;
  }
  // ON CONFLICT keeps the transaction usable on PostgreSQL; no row back means the value is taken.
  const rows = await tx.query(
    `INSERT INTO unique_constraints (instance_id, unique_type, unique_field) VALUES ($1, $2, $3)
     ON CONFLICT DO NOTHING RETURNING unique_field`,
    key,
  );
  if (rows.length === 0) throw new AlreadyExistsError(constraint.message);
}

/**
 * The last sequence of an aggregate (no row when it has none), on the primary key's columns in its order: the
 * plan is a backward scan of the primary key whatever the table's statistics. (`max(sequence)` is planned
 * from statistics, and a fresh, never analyzed events table made it scan an instance's whole history
 * through another index.)
 */
export const lastSequenceSql = (instanceId: string, aggregateType: string, aggregateId: string) =>
  `SELECT sequence FROM events WHERE instance_id = ${instanceId} AND aggregate_type = ${aggregateType} AND aggregate_id = ${aggregateId} ORDER BY sequence DESC LIMIT 1`;

export function aggregateKey(instanceId: string, aggregateType: string, aggregateId: string): string {
  return `${instanceId}\u0000${aggregateType}\u0000${aggregateId}`;
}
