/**
 * Event conditions, the sending side: the worker of the event deliveries' outbox (../outbox/worker.ts,
 * one per process), which takes due rows of `execution_deliveries` (./deliveries.ts) and calls their
 * targets: delivered on a 2xx answer; pending again after a back-off with jitter; failed once
 * PLATFORM_EXECUTION_MAX_ATTEMPTS are used up, or at once when the target was deleted or the instance's
 * `actions` feature is off. Delivery is at least once: a target may see an event again, e.g. after a
 * crash mid-call, or after a stop that cut its call off at the grace limit. A process that stops lets its
 * calls in flight finish (PLATFORM_SHUTDOWN_GRACE_SECONDS); a call it cuts off counts as an attempt.
 */
import type { Metrics } from "../metrics/metrics.ts";
import { type Outcome, RowState } from "../outbox/table.ts";
import { AttemptCancelled, AttemptFailure, OutboxWorker } from "../outbox/worker.ts";
import type { Queryable } from "../storage/database.ts";
import { type ClaimedDelivery, claimDeliveries, DELIVERIES } from "./deliveries.ts";
import { type ExecutionEngine, TargetFailure } from "./engine.ts";
import { eventBody } from "./outbox.ts";

/** Sends in flight at once per process. */
const CONCURRENCY = 16;

export class DeliveryWorker extends OutboxWorker<ClaimedDelivery> {
  constructor(
    private readonly engine: ExecutionEngine,
    db: Queryable,
    processId: string,
    private readonly metrics?: Metrics,
  ) {
    super({
      table: DELIVERIES,
      db,
      processId,
      concurrency: CONCURRENCY,
      retry: engine.settings,
      log: engine.log,
      names: { outbox: "event deliveries", item: "event delivery", idField: "delivery" },
    });
  }

  protected claim(limit: number): Promise<ClaimedDelivery[]> {
    return claimDeliveries(this.db, limit, this.processId);
  }

  protected override span(row: ClaimedDelivery) {
    return {
      name: "event delivery",
      attributes: {
        "platform.instance_id": row.instance_id,
        "platform.event.type": row.event_type,
        "platform.target.id": row.target_id,
        "platform.delivery.attempt": row.attempts,
      },
    };
  }

  protected async send(row: ClaimedDelivery, signal: AbortSignal): Promise<{ answer: number }> {
    const { engine } = this;
    if (row.url === null || row.signing_key === null || row.target_name === null)
      throw new AttemptFailure(`target ${row.target_id} was deleted`, true);
    if (!(await engine.enabled(row.instance_id)))
      throw new AttemptFailure('not sent: feature "actions" is disabled for this instance', true);
    if (signal.aborted) throw new AttemptCancelled(false); // not called: given back untried
    const target = {
      id: row.target_id,
      name: row.target_name,
      url: row.url,
      timeoutMs: Math.max(1, Math.round(Number(row.timeout_ns) / 1e6)),
      signingKey: row.signing_key,
      previousSigningKey: row.previous_signing_key ?? undefined,
      previousValidUntil: row.previous_valid_until ? new Date(row.previous_valid_until).getTime() : undefined,
    };
    const body = JSON.stringify(eventBody(row));
    try {
      const answer = await engine.send(target, body, signal);
      return { answer: answer.status };
    } catch (error) {
      if (!(error instanceof TargetFailure)) throw error;
      if (error.kind === "cancelled") throw new AttemptCancelled();
      throw new AttemptFailure(error.message, false, error.status);
    }
  }

  protected override recorded(row: ClaimedDelivery, outcome: Outcome): void {
    const { metrics } = this;
    const result = { [RowState.done]: "delivered", [RowState.pending]: "retry", [RowState.failed]: "failed" };
    metrics?.deliveries.inc({ result: result[outcome.state] });
    // from the event's append (the database's clock) to now (this process's)
    if (outcome.state === RowState.done)
      metrics?.deliveryLag.observe(Math.max(0, Date.now() - new Date(row.created_at).getTime()) / 1000);
  }
}
