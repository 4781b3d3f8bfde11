/**
 * Event conditions, the sending side: one worker per process takes due outbox rows (./deliveries.ts
 * `claimDeliveries`, `FOR UPDATE SKIP LOCKED`, so with several processes on one PostgreSQL each row is
 * taken by one of them at a time), sends them outside any transaction, and records the outcome:
 * delivered; pending again after a backoff with jitter; failed once PLATFORM_EXECUTION_MAX_ATTEMPTS are
 * used up, or at once when the target was deleted or the instance's `actions` feature is off.
 *
 * It wakes on this process's commits that queued deliveries, on a PostgreSQL notification from other
 * processes (src/storage/notifications.ts), when the next retry is due, and at the latest every POLL_MS. Rows a dead process
 * leased become due again when their lease runs out, so after a crash or restart nothing is lost
 * (delivery is at least once: a target may see an event again, e.g. after a crash mid-call).
 */
import { setMaxListeners } from "node:events";
import type { Metrics } from "../metrics/metrics.ts";
import type { Queryable } from "../storage/database.ts";
import { activeTracer, inRootSpan } from "../tracing/tracing.ts";
import {
  type ClaimedDelivery,
  claimDeliveries,
  DeliveryStatus,
  nextDue,
  purgeDeliveries,
  recordAttempt,
  releaseDelivery,
  retryDelayMs,
} from "./deliveries.ts";
import { type ExecutionEngine, TargetFailure } from "./engine.ts";
import { eventBody } from "./outbox.ts";

/** Longest sleep when nothing is due (catches rows whose notification was missed). */
const POLL_MS = 5_000;
/** Sends in flight at once per process. */
const CONCURRENCY = 16;
/** With sends in flight, rows are taken only once this many slots are free (fewer, larger claims). */
const CLAIM_BATCH = 8;
const PURGE_EVERY_MS = 60 * 60 * 1000;

export class DeliveryWorker {
  private stopped = false;
  private woken = false;
  private wakeUp?: () => void;
  private loop?: Promise<void>;
  private readonly inFlight = new Map<string, Promise<void>>();
  private readonly abort = new AbortController();
  private nextPurge = Date.now() + 60_000;

  constructor(
    private readonly engine: ExecutionEngine,
    private readonly db: Queryable,
    readonly processId: string,
    private readonly metrics?: Metrics,
  ) {
    setMaxListeners(0, this.abort.signal); // one listener per send in flight
  }

  start(): void {
    this.loop ??= this.run();
  }

  /** Something may be due now. */
  wake(): void {
    this.woken = true;
    this.wakeUp?.();
  }

  /** Stops taking rows, gives back the rows being sent (due again at once), and waits for the loop. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.abort.abort();
    this.wake();
    await this.loop;
    await Promise.allSettled([...this.inFlight.values()]);
  }

  private async run(): Promise<void> {
    let failures = 0;
    while (!this.stopped) {
      this.woken = false;
      let waitMs = POLL_MS;
      try {
        const free = CONCURRENCY - this.inFlight.size;
        if (free >= CLAIM_BATCH || (free > 0 && this.inFlight.size === 0)) {
          const rows = await claimDeliveries(this.db, free, this.processId);
          for (const row of rows) this.dispatch(row);
          if (rows.length === free) continue; // more may be due
          const due = await nextDue(this.db);
          if (due) waitMs = Math.max(0, Math.min(POLL_MS, due.getTime() - Date.now()));
        }
        if (Date.now() >= this.nextPurge) {
          this.nextPurge = Date.now() + PURGE_EVERY_MS;
          await purgeDeliveries(this.db);
        }
        failures = 0;
      } catch (error) {
        if (this.stopped) break;
        failures++;
        waitMs = Math.min(POLL_MS, 100 * 2 ** failures);
        this.engine.log.error({ err: error }, "event deliveries: cannot read the outbox");
      }
      if (this.stopped) break;
      if (!this.woken && waitMs > 0) await this.sleep(waitMs);
    }
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      // a waiting worker never keeps the process alive
      const timer = setTimeout(done, ms).unref();
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.wakeUp = () => {
        this.wakeUp = undefined;
        done();
      };
    });
  }

  private dispatch(row: ClaimedDelivery): void {
    const key = `${row.instance_id}\u0000${row.id}`;
    const tracer = activeTracer();
    const delivering = tracer
      ? inRootSpan(
          tracer,
          "event delivery",
          {
            "platform.instance_id": row.instance_id,
            "platform.event.type": row.event_type,
            "platform.target.id": row.target_id,
            "platform.delivery.attempt": row.attempts,
          },
          () => this.deliver(row),
        )
      : this.deliver(row);
    const sending = delivering
      .catch((error) => this.engine.log.error({ err: error, delivery: row.id }, "event delivery failed"))
      .finally(() => {
        this.inFlight.delete(key);
        this.wake(); // a slot is free
      });
    this.inFlight.set(key, sending);
  }

  private async deliver(row: ClaimedDelivery): Promise<void> {
    const { engine, metrics } = this;
    if (row.url === null || row.signing_key === null || row.target_name === null) {
      await recordAttempt(this.db, row, this.processId, {
        status: DeliveryStatus.failed,
        error: `target ${row.target_id} was deleted`,
      });
      metrics?.deliveries.inc({ result: "failed" });
      return;
    }
    if (!(await engine.enabled(row.instance_id))) {
      await recordAttempt(this.db, row, this.processId, {
        status: DeliveryStatus.failed,
        error: 'not sent: feature "actions" is disabled for this instance',
      });
      metrics?.deliveries.inc({ result: "failed" });
      return;
    }
    const target = {
      id: row.target_id,
      name: row.target_name,
      url: row.url,
      timeoutMs: Math.max(1, Math.round(Number(row.timeout_ns) / 1e6)),
      signingKey: row.signing_key,
      previousSigningKey: row.previous_signing_key ?? undefined,
      previousValidUntil: row.previous_valid_until ? new Date(row.previous_valid_until).getTime() : undefined,
    };
    const body = JSON.stringify(eventBody({ ...row, instance_id: row.instance_id }));
    try {
      const answer = await engine.send(target, body, this.abort.signal);
      await recordAttempt(this.db, row, this.processId, {
        status: DeliveryStatus.delivered,
        httpStatus: answer.status,
      });
      metrics?.deliveries.inc({ result: "delivered" });
      // from the event's append (the database's clock) to now (this process's)
      metrics?.deliveryLag.observe(Math.max(0, Date.now() - new Date(row.created_at).getTime()) / 1000);
    } catch (error) {
      if (!(error instanceof TargetFailure)) throw error;
      if (error.kind === "cancelled") {
        await releaseDelivery(this.db, row, this.processId);
        return;
      }
      const { maxAttempts, retryDelayMs: baseMs } = engine.settings;
      const outcome =
        row.attempts >= maxAttempts
          ? { status: DeliveryStatus.failed, error: error.message, httpStatus: error.status }
          : {
              status: DeliveryStatus.pending,
              error: error.message,
              httpStatus: error.status,
              retryInMs: retryDelayMs(row.attempts, baseMs),
            };
      await recordAttempt(this.db, row, this.processId, outcome as Parameters<typeof recordAttempt>[3]);
      metrics?.deliveries.inc({ result: outcome.status === DeliveryStatus.failed ? "failed" : "retry" });
    }
  }
}
