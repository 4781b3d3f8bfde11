import { EXECUTION, TARGET } from "../domain/action/events.ts";
import type { Queryable } from "../storage/database.ts";
import { type Page, type SearchResult, search, Where } from "./search.ts";

/** A row of `action_targets` with its signing key. */
export interface TargetRow extends Record<string, unknown> {
  id: string;
  name: string;
  target_type: number;
  url: string;
  timeout_ns: string | number;
  execution_choice: number;
  is_async: boolean;
  interrupt_on_error: boolean;
  created_at: Date;
  changed_at: Date;
  sequence: number;
  signing_key: string;
}

/** A row of `action_executions`. */
export interface ExecutionRow extends Record<string, unknown> {
  id: string;
  execution_type: number;
  condition_kind: string;
  condition_value: string;
  targets: string[];
  includes: string[];
  created_at: Date;
  changed_at: Date;
  sequence: number;
}

const TARGET_COLUMNS =
  "t.id, t.name, t.target_type, t.url, t.timeout_ns, t.execution_choice, t.is_async, t.interrupt_on_error, t.created_at, t.changed_at, t.sequence, k.signing_key";
const TARGET_FROM =
  "action_targets t JOIN action_target_signing_keys k ON k.instance_id = t.instance_id AND k.target_id = t.id";

export async function getTarget(
  db: Queryable,
  instanceId: string,
  id: string,
): Promise<TargetRow | undefined> {
  const rows = await db.query<TargetRow>(
    `SELECT ${TARGET_COLUMNS} FROM ${TARGET_FROM} WHERE t.instance_id = $1 AND t.id = $2`,
    [instanceId, id],
  );
  return rows[0];
}

/** Sort columns of TargetFieldName (0 / unspecified: creation date). */
export const targetSortColumns: Record<number, string> = {
  0: "t.created_at",
  1: "t.id",
  2: "t.created_at",
  3: "t.changed_at",
  4: "t.name",
  5: "t.target_type",
  6: "t.url",
  7: "t.timeout_ns",
  8: "t.is_async",
  9: "t.interrupt_on_error",
};

export type TargetFilter = { name: string; method: number } | { ids: string[] };

export function searchTargets(
  db: Queryable,
  instanceId: string,
  filters: TargetFilter[],
  sortColumn: number,
  page: Page,
): Promise<SearchResult<TargetRow>> {
  const where = new Where().and((p) => `t.instance_id = ${p(instanceId)}`);
  for (const f of filters) {
    if ("ids" in f) where.in("t.id", f.ids);
    else where.text("t.name", f.method, f.name);
  }
  return search<TargetRow>(db, {
    select: TARGET_COLUMNS,
    from: TARGET_FROM,
    where,
    orderBy: targetSortColumns[sortColumn] ?? "t.created_at",
    tiebreak: "t.id",
    page,
    instanceId,
    aggregateTypes: [TARGET],
  });
}

export type ExecutionFilter =
  | { ids: string[] }
  | { executionType: number }
  | { targetId: string }
  | { include: string };

export function searchExecutions(
  db: Queryable,
  instanceId: string,
  filters: ExecutionFilter[],
  page: Page,
): Promise<SearchResult<ExecutionRow>> {
  const where = new Where().and((p) => `instance_id = ${p(instanceId)}`);
  for (const f of filters) {
    if ("ids" in f) where.in("id", f.ids);
    else if ("executionType" in f) where.and((p) => `execution_type = ${p(f.executionType)}`);
    else if ("targetId" in f) where.and((p) => `targets @> ARRAY[${p(f.targetId)}]::text[]`);
    else where.and((p) => `includes @> ARRAY[${p(f.include)}]::text[]`);
  }
  return search<ExecutionRow>(db, {
    select:
      "id, execution_type, condition_kind, condition_value, targets, includes, created_at, changed_at, sequence",
    from: "action_executions",
    where,
    orderBy: "created_at",
    tiebreak: "id",
    page,
    instanceId,
    aggregateTypes: [EXECUTION],
  });
}

/** One target to call, in call order. */
export interface ExecutionTarget {
  /** The execution that applies (the most specific one). */
  execution_id: string;
  /** The execution that lists the target: the applying one or one it includes. */
  listed_by: string;
  target_id: string;
  /** The target's name (named in errors and logs). */
  target_name: string;
  target_type: number;
  url: string;
  timeout_ns: string | number;
  is_async: boolean;
  interrupt_on_error: boolean;
  signing_key: string;
  /** The key before the last rotation, while it is still valid (null otherwise). */
  previous_signing_key: string | null;
  previous_valid_until: Date | null;
}

/**
 * The targets to call when a condition triggers, for the execution engine (src/execution), in one
 * indexed query. `candidates` are the execution IDs that may apply, most specific first
 * (`executionCandidates` of src/domain/action/conditions.ts, e.g. `request./pkg.S/M`, `request.pkg.S`,
 * `request`).
 *
 *   1. `chosen`: the most specific existing execution: a primary-key lookup (instance_id, id) per
 *      candidate, ordered by the candidate's position; only it applies (method over service over all,
 *      event over group over all).
 *   2. `tree`: it and the executions it includes, recursively (primary-key lookups again), at most
 *      MAX_INCLUDE_DEPTH levels deep; `ord` is the path of include positions, so ordering by it gives
 *      the execution's own targets first, then each include's in order (depth first).
 *   3. the targets each of those lists, in list order (`WITH ORDINALITY`), joined with `action_targets`
 *      and their signing keys by primary key.
 *
 * No row: no execution applies, or the one that applies calls nothing.
 */
export async function findExecutionTargets(
  db: Queryable,
  instanceId: string,
  candidates: string[],
): Promise<ExecutionTarget[]> {
  return db.query<ExecutionTarget & Record<string, unknown>>(
    `WITH RECURSIVE chosen AS (
       SELECT e.id, e.targets, e.includes FROM action_executions e
       WHERE e.instance_id = $1 AND e.id = ANY($2::text[])
       ORDER BY array_position($2::text[], e.id) LIMIT 1
     ), tree AS (
       SELECT c.id, c.targets, c.includes, ARRAY[]::bigint[] AS ord, 0 AS depth FROM chosen c
       UNION ALL
       SELECT e.id, e.targets, e.includes, tree.ord || i.n, tree.depth + 1
       FROM tree CROSS JOIN LATERAL unnest(tree.includes) WITH ORDINALITY AS i(id, n)
       JOIN action_executions e ON e.instance_id = $1 AND e.id = i.id
       WHERE tree.depth < 3
     )
     SELECT (SELECT id FROM chosen) AS execution_id, tree.id AS listed_by, t.id AS target_id,
            t.name AS target_name, t.target_type, t.url, t.timeout_ns, t.is_async, t.interrupt_on_error,
            k.signing_key, k.previous_signing_key, k.previous_valid_until
     FROM tree CROSS JOIN LATERAL unnest(tree.targets) WITH ORDINALITY AS u(target_id, n)
     JOIN action_targets t ON t.instance_id = $1 AND t.id = u.target_id
     JOIN action_target_signing_keys k ON k.instance_id = $1 AND k.target_id = t.id
     ORDER BY tree.ord, u.n`,
    [instanceId, candidates],
  );
}
