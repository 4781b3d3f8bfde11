/**
 * The audit log: a search over the events table itself (no read model). Its order is the global `position`
 * (ever-counting across all aggregates), served by indexes that start with the instance
 * (migration 0093_event_search.sql), so a page costs what the page and its filter's selectivity cost, not what
 * the instance's history costs: no window count over all matches, the end of the list from one row more
 * than the page, a count only when more matches follow, and that count bounded (COUNT_CAP).
 */
import type { Queryable } from "../storage/database.ts";
import type { Page, SearchResult } from "./search.ts";
import { Where } from "./search.ts";

/** `total_result` is exact up to this many matches beyond the offset, a lower bound above. */
export const COUNT_CAP = 10_000;

export interface EventQuery {
  instanceId: string;
  /** Resource owners whose events the caller may read ("all": the whole instance). */
  readableOwners: "all" | readonly string[];
  aggregateType?: string;
  aggregateId?: string;
  eventTypes?: readonly string[];
  editorUserId?: string;
  resourceOwner?: string;
  /** RFC 3339 with microseconds (the precision of `created_at`). */
  createdAfter?: string;
  createdBefore?: string;
  /** Cursor (a position): events after it in the direction of the page. */
  fromSequence?: bigint;
  /** The instance's audit-log retention: older events are hidden (null: all kept visible). */
  retentionSeconds: number | null;
  page: Page;
}

export interface EventRow {
  position: string | number;
  sequence: string | number;
  /** `created_at` in microseconds since the epoch (its full precision; a Date keeps milliseconds). */
  created_us: string | number;
  event_type: string;
  aggregate_type: string;
  aggregate_id: string;
  resource_owner: string;
  creator: string;
  payload: Record<string, unknown> | null;
  /** Of the editor, when it is a user of the instance. */
  display_name: string | null;
  given_name: string | null;
  family_name: string | null;
  machine_name: string | null;
  [key: string]: unknown;
}

/** The instance's audit-log retention in seconds (`_limit` of the instances API), null when unlimited. */
export async function auditLogRetention(db: Queryable, instanceId: string): Promise<number | null> {
  const rows = await db.query<{ seconds: string | number | null }>(
    "SELECT audit_log_retention_seconds AS seconds FROM instances WHERE id = $1",
    [instanceId],
  );
  const seconds = rows[0]?.seconds;
  return seconds === null || seconds === undefined ? null : Number(seconds);
}

/** The conditions every query of one search shares: instance, readable owners, retention. */
function scope(query: EventQuery): Where {
  const where = new Where().and((p) => `e.instance_id = ${p(query.instanceId)}`);
  const owners = query.readableOwners;
  // One owner as `=`, so the (instance, resource owner, position) index serves the order too.
  if (owners !== "all")
    where.and((p) =>
      owners.length === 1 ? `e.resource_owner = ${p(owners[0])}` : `e.resource_owner = ANY(${p(owners)})`,
    );
  if (query.retentionSeconds !== null)
    where.and((p) => `e.created_at >= now() - ${p(query.retentionSeconds)}::bigint * interval '1 second'`);
  return where;
}

function filtered(query: EventQuery): Where {
  const where = scope(query);
  if (query.aggregateType) where.and((p) => `e.aggregate_type = ${p(query.aggregateType)}`);
  if (query.aggregateId) where.and((p) => `e.aggregate_id = ${p(query.aggregateId)}`);
  if (query.eventTypes?.length) where.in("e.event_type", query.eventTypes);
  if (query.editorUserId) where.and((p) => `e.creator = ${p(query.editorUserId)}`);
  if (query.resourceOwner) where.and((p) => `e.resource_owner = ${p(query.resourceOwner)}`);
  if (query.createdAfter) where.and((p) => `e.created_at > ${p(query.createdAfter)}::timestamptz`);
  if (query.createdBefore) where.and((p) => `e.created_at < ${p(query.createdBefore)}::timestamptz`);
  if (query.fromSequence) {
    const operator = query.page.asc ? ">" : "<";
    where.and((p) => `e.position ${operator} ${p(query.fromSequence!.toString())}::bigint`);
  }
  return where;
}

/** One page of events, the editor's names joined to the page only. */
export async function searchEvents(db: Queryable, query: EventQuery): Promise<SearchResult<EventRow>> {
  const { page } = query;
  const direction = page.asc ? "ASC" : "DESC";
  const where = filtered(query);
  const conditions = where.toString();
  const filterParams = [...where.params];
  const limit = where.param(page.limit + 1);
  const offset = where.param(page.offset);
  const fetched = await db.query<EventRow>(
    `SELECT e.position, e.sequence, (extract(epoch FROM e.created_at) * 1000000)::bigint AS created_us, e.event_type, e.aggregate_type, e.aggregate_id,
            e.resource_owner, e.creator, e.payload,
            u.display_name, u.given_name, u.family_name, u.machine_name
       FROM (SELECT e.instance_id, e.position, e.sequence, e.created_at, e.event_type, e.aggregate_type,
                    e.aggregate_id, e.resource_owner, e.creator, e.payload
               FROM events e WHERE ${conditions}
              ORDER BY e.position ${direction} LIMIT ${limit} OFFSET ${offset}) e
       LEFT JOIN users u ON u.instance_id = e.instance_id AND u.id = e.creator
      ORDER BY e.position ${direction}`,
    where.params,
  );
  const more = fetched.length > page.limit;
  const rows = more ? fetched.slice(0, page.limit) : fetched;

  let total = page.offset + rows.length;
  if (more || (rows.length === 0 && page.offset > 0)) {
    // Bounded: a page deep in a long history never counts all of it.
    const cap = filterParams.length + 1;
    const counted = await db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM (SELECT 1 FROM events e WHERE ${conditions} LIMIT $${cap}) matches`,
      [...filterParams, page.offset + Math.max(COUNT_CAP, page.limit + 1)],
    );
    total = Number(counted[0].n);
  }

  const newest = scope(query);
  const processed = await db.query<{ position: string | number; created_at: Date }>(
    `SELECT e.position, e.created_at FROM events e WHERE ${newest} ORDER BY e.position DESC LIMIT 1`,
    newest.params,
  );
  return {
    rows,
    total,
    appliedLimit: page.limit,
    endOfList: !more,
    processedSequence: Number(processed[0]?.position ?? 0),
    timestamp: processed[0]?.created_at,
  };
}
