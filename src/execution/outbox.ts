/**
 * Event conditions, the writing side: in the transaction of every append (`EventStore.onAppended`), one
 * outbox row per event and target of the most specific event execution that applies (event over its
 * groups, longest first, over all events; its includes' targets after its own, each target once). The
 * rows commit or roll back with the events, so an event that exists has its deliveries and a rolled-back
 * one has none. Nothing here touches the network; the execution IDs of an instance come from the lookup's
 * cache when loaded (no query for instances without event executions), the targets from one indexed
 * query through the transaction.
 *
 * On PostgreSQL a `pg_notify` in the same transaction wakes the workers of other processes when it
 * commits; this process's worker is woken by `onCommitted` (./worker.ts).
 */
import { executionCandidates } from "../domain/action/conditions.ts";
import { EXECUTION, TARGET } from "../domain/action/events.ts";
import { withoutSecrets } from "../domain/redaction.ts";
import type { AppendHook } from "../eventstore/eventstore.ts";
import type { StoredEvent } from "../eventstore/types.ts";
import { newId } from "../id.ts";
import { notifyWorkers } from "../outbox/table.ts";
import type { Queryable } from "../storage/database.ts";
import { insertDeliveries, type NewDelivery } from "./deliveries.ts";
import { type ExecutionLookup, resolveTargets } from "./lookup.ts";

/** The channel of the notification that new deliveries were committed (PostgreSQL). */
export const DELIVERY_CHANNEL = "platform_execution_deliveries";

export interface OutboxOptions {
  lookup: ExecutionLookup;
  /** Send `pg_notify(DELIVERY_CHANNEL)` with new rows (PostgreSQL: wakes other processes' workers). */
  notify: boolean;
  /** Called (in the transaction) with the positions of the events that got deliveries. */
  queued(positions: number[]): void;
}

export function outboxHook(options: OutboxOptions): AppendHook {
  const { lookup } = options;
  return async (tx, events) => {
    const byInstance = new Map<string, StoredEvent[]>();
    for (const event of events) {
      if (event.instanceId === "") continue; // system events belong to no instance
      const list = byInstance.get(event.instanceId) ?? [];
      list.push(event);
      byInstance.set(event.instanceId, list);
    }
    const rows: NewDelivery[] = [];
    for (const [instanceId, list] of byInstance) {
      // A push that changes targets or executions must not cache its own, uncommitted view of them.
      const changesActions = list.some((e) => e.aggregateType === TARGET || e.aggregateType === EXECUTION);
      const ids = await lookup.idsInTransaction(tx, instanceId, !changesActions);
      if (![...ids].some((id) => id === "event" || id.startsWith("event."))) continue;
      const resolved = new Map<string, Awaited<ReturnType<typeof resolveTargets>>>();
      for (const event of list) {
        const candidates = executionCandidates({ type: "event", event: event.type });
        if (!candidates.some((c) => ids.has(c))) continue;
        const key = candidates.join("\n");
        let targets = resolved.get(key);
        if (!targets) {
          targets = await resolveTargets(tx as Queryable, instanceId, candidates);
          resolved.set(key, targets);
        }
        for (const target of targets) {
          rows.push({
            instanceId,
            id: newId(),
            eventPosition: event.position,
            eventType: event.type,
            aggregateType: event.aggregateType,
            aggregateId: event.aggregateId,
            executionId: target.executionId,
            targetId: target.id,
          });
        }
      }
    }
    if (rows.length === 0) return;
    await insertDeliveries(tx, rows);
    if (options.notify) await notifyWorkers(tx, DELIVERY_CHANNEL);
    options.queued([...new Set(rows.map((r) => r.eventPosition))]);
  };
}

/** The body of an event delivery (docs/actions.md). */
export function eventBody(event: {
  event_type: string;
  aggregate_type: string;
  aggregate_id: string;
  resource_owner: string;
  instance_id: string;
  sequence: number | string;
  created_at: Date | string;
  creator: string;
  payload: unknown;
}): Record<string, unknown> {
  return {
    event_type: event.event_type,
    aggregate_type: event.aggregate_type,
    aggregate_id: event.aggregate_id,
    resource_owner: event.resource_owner,
    instance_id: event.instance_id,
    sequence: Number(event.sequence),
    created_at: new Date(event.created_at).toISOString(),
    user_id: event.creator,
    event_payload: withoutSecrets(event.payload ?? {}),
  };
}
