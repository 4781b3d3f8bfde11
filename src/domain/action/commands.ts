/**
 * Commands of targets and executions. Everything that changes the graph of executions (deleting a target,
 * putting or deleting an execution) first takes a per-instance transaction lock (`lockActions`), so
 * reference checks (targets and includes exist, no cycles) and cascades (removing a deleted target or
 * execution from the executions that use it) see every committed change: nothing can add a reference to
 * a target while it is being deleted. These writes are rare administrative calls, so serializing them per
 * instance costs nothing noticeable; creating and patching targets take no lock.
 *
 * Signing keys are secrets that must be read back (they key the HMAC of each call), so a hash is of no use;
 * they are kept out of the events (event payloads are sent to event targets and kept forever) in the
 * table `action_target_signing_keys`, written by these commands in the same transaction as the events.
 * It is not a projection: a projection rebuild leaves it alone.
 */
import { FailedPreconditionError, InvalidArgumentError, NotFoundError } from "../../errors.ts";
import type { EventStore } from "../../eventstore/eventstore.ts";
import type { CommandTx, NewEvent, PushContext, StoredEvent } from "../../eventstore/types.ts";
import { type Condition, executionId, executionTypeOf, parseExecutionId } from "./conditions.ts";
import {
  EXECUTION,
  ExecutionEvent,
  type ExecutionFields,
  foldExecution,
  foldTarget,
  TARGET,
  TargetEvent,
  type TargetFields,
} from "./events.ts";

/** Maximum number of nested include levels (A includes B includes C includes D). */
export const MAX_INCLUDE_DEPTH = 3;

/** Result of a command: the version of the aggregate after it. */
export interface Version {
  id: string;
  sequence: number;
  changeDate: Date;
}

const nameConstraint = (name: string) => ({
  action: "add" as const,
  type: "target_name",
  field: name,
  message: `a target named "${name}" already exists`,
});
const releaseName = (name: string) => ({ action: "remove" as const, type: "target_name", field: name });

/** Serializes the commands that change references between targets and executions in one instance. */
async function lockActions(tx: CommandTx, instanceId: string): Promise<void> {
  await tx.query("SELECT pg_advisory_xact_lock(4004, hashtext($1))", [instanceId]);
}

function versionOf(event: StoredEvent): Version {
  return { id: event.aggregateId, sequence: event.sequence, changeDate: event.createdAt };
}

export async function addTarget(
  store: EventStore,
  ctx: PushContext,
  id: string,
  fields: TargetFields,
  signingKey: string,
): Promise<Version> {
  const [event] = await store.push(ctx, async (tx) => {
    await tx.query(
      `INSERT INTO action_target_signing_keys (instance_id, target_id, signing_key) VALUES ($1, $2, $3)
       ON CONFLICT (instance_id, target_id) DO UPDATE SET signing_key = EXCLUDED.signing_key`,
      [ctx.instanceId, id, signingKey],
    );
    return [
      {
        aggregateType: TARGET,
        aggregateId: id,
        type: TargetEvent.added,
        resourceOwner: ctx.instanceId,
        payload: { ...fields },
        uniqueConstraints: [nameConstraint(fields.name)],
      },
    ];
  });
  return versionOf(event);
}

/** Changes the fields that differ; no event when nothing differs. NOT_FOUND when the target does not exist. */
export async function changeTarget(
  store: EventStore,
  ctx: PushContext,
  id: string,
  change: Partial<TargetFields>,
): Promise<Version> {
  let current: Version | undefined;
  const events = await store.push(ctx, async (tx) => {
    const state = foldTarget(await tx.load(TARGET, id));
    if (!state) throw new NotFoundError(`target ${id} not found`);
    current = { id, sequence: state.sequence, changeDate: state.changedAt };
    const changed: Partial<TargetFields> = {};
    for (const [key, value] of Object.entries(change) as [keyof TargetFields, unknown][]) {
      if (value !== undefined && state[key] !== value) (changed as Record<string, unknown>)[key] = value;
    }
    // a new execution choice keeps its value with it, even when only the choice differs
    if (changed.execution_choice !== undefined || changed.execution_value !== undefined) {
      changed.execution_choice = change.execution_choice ?? state.execution_choice;
      changed.execution_value = change.execution_value ?? state.execution_value;
    }
    if (Object.keys(changed).length === 0) return [];
    return [
      {
        aggregateType: TARGET,
        aggregateId: id,
        type: TargetEvent.changed,
        resourceOwner: ctx.instanceId,
        payload: changed,
        uniqueConstraints:
          changed.name !== undefined ? [releaseName(state.name), nameConstraint(changed.name)] : undefined,
      },
    ];
  });
  return events.length ? versionOf(events[0]) : current!;
}

/**
 * Gives a target a new signing key. The key it had stays valid until `previousValidUntil` (calls carry a
 * signature under each), replacing any older previous key. The key is not in the event (its payload says
 * until when the previous one is valid); it is written to `action_target_signing_keys` in the same
 * transaction. NOT_FOUND when the target does not exist.
 */
export async function rotateSigningKey(
  store: EventStore,
  ctx: PushContext,
  id: string,
  signingKey: string,
  graceSeconds: number,
): Promise<Version> {
  const [event] = await store.push(ctx, async (tx) => {
    if (!foldTarget(await tx.load(TARGET, id))) throw new NotFoundError(`target ${id} not found`);
    const rows = await tx.query<{ until: Date }>(
      `UPDATE action_target_signing_keys
       SET previous_signing_key = signing_key, signing_key = $3,
           previous_valid_until = now() + make_interval(secs => $4::double precision)
       WHERE instance_id = $1 AND target_id = $2 RETURNING previous_valid_until AS until`,
      [ctx.instanceId, id, signingKey, graceSeconds],
    );
    const until = rows[0] ? new Date(rows[0].until) : new Date();
    return [
      {
        aggregateType: TARGET,
        aggregateId: id,
        type: TargetEvent.signingKeyRotated,
        resourceOwner: ctx.instanceId,
        payload: { previous_valid_until: until.toISOString() },
      },
    ];
  });
  return versionOf(event);
}

/**
 * Removes a target and, in the same push, removes it from every execution that lists it (an
 * `execution.set` per execution, the executions stay).
 */
export async function removeTarget(store: EventStore, ctx: PushContext, id: string): Promise<Version> {
  const events = await store.push(ctx, async (tx) => {
    await lockActions(tx, ctx.instanceId);
    const state = foldTarget(await tx.load(TARGET, id));
    if (!state) throw new NotFoundError(`target ${id} not found`);
    const users = await tx.query<{ id: string }>(
      "SELECT id FROM action_executions WHERE instance_id = $1 AND targets @> ARRAY[$2]::text[]",
      [ctx.instanceId, id],
    );
    const out: NewEvent[] = [];
    for (const row of users) {
      const execution = foldExecution(await tx.load(EXECUTION, row.id));
      if (!execution?.targets.includes(id)) continue;
      out.push(
        setExecutionEvent(ctx, row.id, {
          ...fieldsOf(execution),
          targets: execution.targets.filter((t) => t !== id),
        }),
      );
    }
    await tx.query("DELETE FROM action_target_signing_keys WHERE instance_id = $1 AND target_id = $2", [
      ctx.instanceId,
      id,
    ]);
    out.push({
      aggregateType: TARGET,
      aggregateId: id,
      type: TargetEvent.removed,
      resourceOwner: ctx.instanceId,
      payload: { name: state.name },
      uniqueConstraints: [releaseName(state.name)],
    });
    return out;
  });
  return versionOf(events.find((e) => e.aggregateType === TARGET)!);
}

function fieldsOf(e: ExecutionFields): ExecutionFields {
  return {
    execution_type: e.execution_type,
    condition_kind: e.condition_kind,
    condition_value: e.condition_value,
    targets: e.targets,
    includes: e.includes,
  };
}

function setExecutionEvent(ctx: PushContext, id: string, fields: ExecutionFields): NewEvent {
  return {
    aggregateType: EXECUTION,
    aggregateId: id,
    type: ExecutionEvent.set,
    resourceOwner: ctx.instanceId,
    payload: { ...fields },
  };
}

export interface PutExecutionResult extends Version {
  /** True when no execution of the condition existed before. */
  created: boolean;
}

/**
 * Creates or replaces the execution of a condition. Checks, under the instance's actions lock: every
 * target exists (NOT_FOUND naming `execution.targets[i]`); every include is a well-formed execution ID of
 * the same condition type (INVALID_ARGUMENT), exists (NOT_FOUND), is not the execution itself and does not
 * lead back to it (FAILED_PRECONDITION), and no chain of includes gets deeper than MAX_INCLUDE_DEPTH
 * (FAILED_PRECONDITION). Putting the same targets and includes again appends nothing.
 */
export async function putExecution(
  store: EventStore,
  ctx: PushContext,
  condition: Condition,
  targets: string[],
  includes: string[],
): Promise<PutExecutionResult> {
  const id = executionId(condition);
  let result: PutExecutionResult | undefined;
  const events = await store.push(ctx, async (tx) => {
    await lockActions(tx, ctx.instanceId);
    if (targets.length) {
      const found = await tx.query<{ id: string }>(
        "SELECT id FROM action_targets WHERE instance_id = $1 AND id = ANY($2::text[])",
        [ctx.instanceId, targets],
      );
      const existing = new Set(found.map((r) => r.id));
      targets.forEach((t, i) => {
        if (!existing.has(t)) throw new NotFoundError(`execution.targets[${i}]: target ${t} not found`);
      });
    }
    if (includes.length) await checkIncludes(tx, ctx.instanceId, id, condition, includes);

    const current = foldExecution(await tx.load(EXECUTION, id));
    if (current && same(current.targets, targets) && same(current.includes, includes)) {
      result = { id, sequence: current.sequence, changeDate: current.changedAt, created: false };
      return [];
    }
    result = { id, sequence: 0, changeDate: new Date(), created: current === undefined };
    return [
      setExecutionEvent(ctx, id, {
        execution_type: executionTypeOf(condition.type),
        condition_kind: condition.kind,
        condition_value: "value" in condition ? condition.value : "",
        targets,
        includes,
      }),
    ];
  });
  if (events.length) return { ...versionOf(events[0]), created: result!.created };
  return result!;
}

const same = (a: string[], b: string[]) => a.length === b.length && a.every((v, i) => v === b[i]);

async function checkIncludes(
  tx: CommandTx,
  instanceId: string,
  id: string,
  condition: Condition,
  includes: string[],
): Promise<void> {
  includes.forEach((include, i) => {
    const field = `execution.includes[${i}]`;
    const parsed = parseExecutionId(include);
    if (!parsed) throw new InvalidArgumentError(`"${include}" is not an execution ID`, field);
    if (parsed.type !== condition.type) {
      throw new InvalidArgumentError(
        `"${include}" is a ${parsed.type} execution; a ${condition.type} execution can only include ${condition.type} executions`,
        field,
      );
    }
    if (include === id) throw new FailedPreconditionError(`${field}: an execution cannot include itself`);
  });
  // The include graph of this condition type, with the execution as it will be.
  const rows = await tx.query<{ id: string; includes: string[] }>(
    "SELECT id, includes FROM action_executions WHERE instance_id = $1 AND execution_type = $2",
    [instanceId, executionTypeOf(condition.type)],
  );
  const graph = new Map(rows.map((r) => [r.id, r.includes]));
  includes.forEach((include, i) => {
    if (!graph.has(include))
      throw new NotFoundError(`execution.includes[${i}]: execution ${include} not found`);
  });
  graph.set(id, includes);

  // A cycle through the execution: one of its includes reaches it again.
  const reaches = (from: string, seen: Set<string>): boolean => {
    if (from === id) return true;
    if (seen.has(from)) return false;
    seen.add(from);
    return (graph.get(from) ?? []).some((next) => reaches(next, seen));
  };
  includes.forEach((include, i) => {
    if (reaches(include, new Set())) {
      throw new FailedPreconditionError(
        `execution.includes[${i}]: including ${include} would form a cycle back to ${id}`,
      );
    }
  });

  // The graph was within the depth before, so only chains through this execution can be too deep.
  const below = new Map<string, number>();
  const depthBelow = (node: string): number => {
    const known = below.get(node);
    if (known !== undefined) return known;
    below.set(node, 0); // guards against pre-existing cycles elsewhere
    const depth = Math.max(0, ...(graph.get(node) ?? []).map((next) => 1 + depthBelow(next)));
    below.set(node, depth);
    return depth;
  };
  const above = (node: string, seen: Set<string>): number => {
    let best = 0;
    for (const [parent, children] of graph) {
      if (children.includes(node) && !seen.has(parent))
        best = Math.max(best, 1 + above(parent, new Set([...seen, parent])));
    }
    return best;
  };
  if (above(id, new Set([id])) + depthBelow(id) > MAX_INCLUDE_DEPTH) {
    throw new FailedPreconditionError(
      `execution.includes: includes would be nested more than ${MAX_INCLUDE_DEPTH} levels deep`,
    );
  }
}

/**
 * Deletes an execution and, in the same push, removes it from the includes of every execution that
 * includes it.
 */
export async function removeExecution(store: EventStore, ctx: PushContext, id: string): Promise<Version> {
  const events = await store.push(ctx, async (tx) => {
    await lockActions(tx, ctx.instanceId);
    if (!foldExecution(await tx.load(EXECUTION, id))) throw new NotFoundError(`execution ${id} not found`);
    const includers = await tx.query<{ id: string }>(
      "SELECT id FROM action_executions WHERE instance_id = $1 AND includes @> ARRAY[$2]::text[]",
      [ctx.instanceId, id],
    );
    const out: NewEvent[] = [];
    for (const row of includers) {
      const execution = foldExecution(await tx.load(EXECUTION, row.id));
      if (!execution?.includes.includes(id)) continue;
      out.push(
        setExecutionEvent(ctx, row.id, {
          ...fieldsOf(execution),
          includes: execution.includes.filter((i) => i !== id),
        }),
      );
    }
    out.push({
      aggregateType: EXECUTION,
      aggregateId: id,
      type: ExecutionEvent.removed,
      resourceOwner: ctx.instanceId,
      payload: {},
    });
    return out;
  });
  return versionOf(events.find((e) => e.aggregateId === id)!);
}
