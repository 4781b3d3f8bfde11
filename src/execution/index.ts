/**
 * The execution engine assembled for one process (src/platform.ts): the engine (request, response and
 * function conditions), the outbox hook on the event store and the delivery worker (event conditions),
 * and on PostgreSQL the notification channel that wakes the worker on other processes' commits.
 */
import type { Interceptor } from "@connectrpc/connect";
import type { Config } from "../config.ts";
import { randomToken } from "../crypto/tokens.ts";
import type { EventStore } from "../eventstore/eventstore.ts";
import type { Metrics } from "../metrics/metrics.ts";
import type { OutboundPolicy } from "../net/outbound.ts";
import type { StopCounts } from "../outbox/worker.ts";
import type { FeatureGate } from "../query/features.ts";
import type { Database } from "../storage/database.ts";
import type { NotificationListener } from "../storage/notifications.ts";
import { ExecutionEngine, type ExecutionLog, type ExecutionSettings } from "./engine.ts";
import { executionInterceptor, type IdentifyCaller } from "./interceptor.ts";
import { DELIVERY_CHANNEL, outboxHook } from "./outbox.ts";
import { DeliveryWorker } from "./worker.ts";

export { ExecutionEngine } from "./engine.ts";
export { applyClaims, applyUserMetadata, runFunction } from "./functions.ts";

export interface Executions {
  engine: ExecutionEngine;
  worker: DeliveryWorker;
  /** The request/response interceptor (innermost, after idempotency). */
  interceptor(identify: IdentifyCaller): Interceptor;
  /**
   * PostgreSQL: wakes the worker when another process committed deliveries (and whenever the process's
   * listening connection is (re)established, in case one was missed). Before the listener starts.
   */
  listen(listener: NotificationListener): void;
  /** Starts the delivery worker. */
  start(): void;
  /**
   * Stops the worker (its deliveries in flight finish until `deadline`, ms since the epoch; default:
   * PLATFORM_SHUTDOWN_GRACE_SECONDS from now) and waits for asynchronous calls; before the database
   * closes. What the worker's stop did: `StopCounts`.
   */
  close(deadline?: number): Promise<StopCounts>;
}

export function settingsOf(config: Config, outbound: OutboundPolicy): ExecutionSettings {
  return {
    // targets are configured by the instance's administrators
    outbound: outbound.guard("instance"),
    maxResponseBytes: config.execution.maxResponseBytes,
    maxAttempts: config.execution.maxAttempts,
    retryDelayMs: config.execution.retryDelayMs,
    signingKeyGraceSeconds: config.execution.signingKeyGraceSeconds,
  };
}

export function createExecutions(options: {
  config: Config;
  db: Database;
  eventStore: EventStore;
  features: FeatureGate;
  outbound: OutboundPolicy;
  log: ExecutionLog;
  /** Counts deliveries and their lag (src/metrics). */
  metrics?: Metrics;
}): Executions {
  const { config, db, eventStore, log } = options;
  const engine = new ExecutionEngine(
    db,
    eventStore,
    options.features,
    settingsOf(config, options.outbound),
    log,
  );
  const worker = new DeliveryWorker(engine, db, randomToken(12), options.metrics);

  // Positions of events whose deliveries this process queued: their commit wakes the worker at once.
  const queued = new Set<number>();
  eventStore.onAppended(
    outboxHook({
      lookup: engine.lookup,
      notify: db.kind === "postgres",
      queued: (positions) => {
        if (queued.size > 10_000) queued.clear(); // rolled-back pushes leave theirs behind
        for (const p of positions) queued.add(p);
      },
    }),
  );
  eventStore.onCommitted((events) => {
    let wake = false;
    for (const e of events) if (queued.delete(e.position)) wake = true;
    if (wake) worker.wake();
  });

  let closing: Promise<StopCounts> | undefined;
  return {
    engine,
    worker,
    interceptor: (identify) => executionInterceptor(engine, identify),
    listen(listener) {
      worker.listen(listener, DELIVERY_CHANNEL);
    },
    start() {
      worker.start();
    },
    close(deadline = Date.now() + config.shutdownGraceSeconds * 1000) {
      closing ??= (async () => {
        const counts = await worker.stop(deadline);
        await engine.close(Math.max(0, deadline - Date.now()));
        return counts;
      })();
      return closing;
    },
  };
}
