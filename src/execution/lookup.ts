/**
 * Which targets a condition calls, cached per instance, because the lookup runs on every API call:
 *
 * - per instance, the set of execution IDs that exist (one query): a call whose candidate IDs (method,
 *   service, all) are all missing from it costs no query at all, the common case;
 * - per instance and candidate list, the targets of the most specific execution and its includes, in call
 *   order, each target once (`findExecutionTargets` of src/query/actions.ts: one primary-key lookup).
 *
 * Target and execution events clear the instance's entry at once (`onCommitted`: this process's, and other
 * processes' when their notification arrives); entries expire after `ttlMs` in any case
 * (docs/architecture.md "Many processes").
 */
import { EXECUTION, TARGET, TargetType } from "../domain/action/events.ts";
import { INSTANCE } from "../domain/instance/events.ts";
import type { EventStore } from "../eventstore/eventstore.ts";
import { findExecutionTargets } from "../query/actions.ts";
import type { Queryable } from "../storage/database.ts";

/** A target as the engine calls it. */
export interface ResolvedTarget {
  /** The execution that applied (the most specific one). */
  executionId: string;
  id: string;
  name: string;
  type: TargetType;
  url: string;
  timeoutMs: number;
  isAsync: boolean;
  interruptOnError: boolean;
  signingKey: string;
  /** The key before the last rotation, and until when it is still sent. */
  previousSigningKey?: string;
  previousValidUntil?: number;
}

interface Entry {
  expires: number;
  ids: Promise<Set<string>>;
  /** The IDs once loaded (what a transaction may use without waiting on another query). */
  settled?: Set<string>;
  targets: Map<string, Promise<ResolvedTarget[]>>;
}

const MAX_INSTANCES = 10_000;

export class ExecutionLookup {
  private readonly entries = new Map<string, Entry>();

  constructor(
    private readonly db: Queryable,
    eventStore: EventStore,
    private readonly ttlMs = 5_000,
  ) {
    eventStore.onCommitted((events) => {
      for (const e of events) {
        if (e.aggregateType === TARGET || e.aggregateType === EXECUTION) this.entries.delete(e.instanceId);
        else if (e.aggregateType === INSTANCE) this.entries.delete(e.aggregateId);
      }
    });
    eventStore.onStale(() => this.clear());
  }

  /** Forgets everything (tests, or after a change made outside the event store). */
  clear(): void {
    this.entries.clear();
  }

  private entry(instanceId: string): Entry {
    const now = Date.now();
    const cached = this.entries.get(instanceId);
    if (cached && cached.expires > now) return cached;
    if (this.entries.size >= MAX_INSTANCES) this.entries.delete(this.entries.keys().next().value!);
    const entry: Entry = {
      expires: now + this.ttlMs,
      ids: loadIds(this.db, instanceId),
      targets: new Map(),
    };
    entry.ids.then(
      (ids) => (entry.settled = ids),
      () => this.entries.get(instanceId) === entry && this.entries.delete(instanceId),
    );
    this.entries.set(instanceId, entry);
    return entry;
  }

  /**
   * The targets to call for `candidates` (execution IDs, most specific first: `executionCandidates` of
   * src/domain/action/conditions.ts); empty when no execution applies.
   */
  async targets(instanceId: string, candidates: string[]): Promise<ResolvedTarget[]> {
    const entry = this.entry(instanceId);
    const ids = entry.settled ?? (await entry.ids);
    if (!candidates.some((c) => ids.has(c))) return [];
    const key = candidates.join("\n");
    let targets = entry.targets.get(key);
    if (!targets) {
      targets = resolveTargets(this.db, instanceId, candidates);
      entry.targets.set(key, targets);
      targets.catch(() => entry.targets.delete(key));
    }
    return targets;
  }

  /**
   * The execution IDs of an instance for code running inside a transaction `tx` (the event outbox): the
   * cached set when it is loaded, else read through `tx` (never waiting on a query outside the
   * transaction: PGlite runs one transaction at a time, so that would wait forever). `cache` false when
   * the transaction changes executions itself (its view must not outlive it).
   */
  async idsInTransaction(tx: Queryable, instanceId: string, cache: boolean): Promise<Set<string>> {
    const cached = this.entries.get(instanceId);
    if (cache && cached?.settled && cached.expires > Date.now()) return cached.settled;
    const ids = await loadIds(tx, instanceId);
    // kept when absent or expired (an expired entry left in place made every later push read again,
    // until an API call's lookup replaced it); an entry still loading is left to finish
    const current = this.entries.get(instanceId);
    if (cache && (!current || current.expires <= Date.now())) {
      this.entries.set(instanceId, {
        expires: Date.now() + this.ttlMs,
        ids: Promise.resolve(ids),
        settled: ids,
        targets: new Map(),
      });
    }
    return ids;
  }
}

async function loadIds(db: Queryable, instanceId: string): Promise<Set<string>> {
  const rows = await db.query<{ id: string }>("SELECT id FROM action_executions WHERE instance_id = $1", [
    instanceId,
  ]);
  return new Set(rows.map((r) => r.id));
}

/** The targets of the most specific execution among `candidates` and its includes, each target once. */
export async function resolveTargets(
  db: Queryable,
  instanceId: string,
  candidates: string[],
): Promise<ResolvedTarget[]> {
  const rows = await findExecutionTargets(db, instanceId, candidates);
  const seen = new Set<string>();
  const out: ResolvedTarget[] = [];
  for (const r of rows) {
    if (seen.has(r.target_id)) continue;
    seen.add(r.target_id);
    const validUntil = r.previous_valid_until ? new Date(r.previous_valid_until).getTime() : undefined;
    out.push({
      executionId: r.execution_id,
      id: r.target_id,
      name: r.target_name,
      type:
        Number(r.target_type) === TargetType.restRequestResponse
          ? TargetType.restRequestResponse
          : TargetType.restWebhook,
      url: r.url,
      timeoutMs: Math.max(1, Math.round(Number(r.timeout_ns) / 1e6)),
      isAsync: r.is_async,
      interruptOnError: r.interrupt_on_error,
      signingKey: r.signing_key,
      previousSigningKey: r.previous_signing_key ?? undefined,
      previousValidUntil: validUntil,
    });
  }
  return out;
}
