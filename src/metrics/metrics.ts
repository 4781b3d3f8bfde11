/**
 * The process's Prometheus metrics (prom-client): one registry per Platform, the instruments the server,
 * the event store, the OIDC provider and the delivery worker record into, and the gauges read at scrape
 * time (database connections, outbox backlog). docs/operations.md "Metrics" lists them.
 *
 * Labels are bounded: a route template or an RPC name, never a raw path, an ID, a host or an instance, so
 * the number of series does not grow with tenants, users or traffic.
 */
import { Counter, collectDefaultMetrics, Gauge, Histogram, type LabelValues, Registry } from "prom-client";
import { SESSION, SessionEvent } from "../domain/session/events.ts";
import { USER, UserEvent } from "../domain/user/events.ts";
import type { EventStore, PushOutcome } from "../eventstore/eventstore.ts";
import type { StoredEvent } from "../eventstore/types.ts";
import type { Database, Queryable } from "../storage/database.ts";

/** Request latencies: from 1 ms (cached reads) to 10 s (timeouts). */
const REQUEST_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
/** Event delivery lag: from an event's append to the target's answer, up to a day of retries. */
const LAG_BUCKETS = [0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600, 21600, 86400];

export type RequestLabel = "protocol" | "method" | "route" | "status" | "rpc_code";

/** How a token request ended with tokens: the grant types of the token endpoint, and implicit. */
export type GrantName =
  | "authorization_code"
  | "refresh_token"
  | "client_credentials"
  | "jwt_bearer"
  | "token_exchange"
  | "implicit";

export class Metrics {
  readonly registry = new Registry();

  /** Every HTTP request, whatever the protocol (its `_count` is the request count). */
  readonly requests = new Histogram<RequestLabel>({
    name: "platform_http_request_duration_seconds",
    help: "HTTP requests by protocol, route template or RPC, HTTP status and RPC status code: time from arrival to the last byte of the answer",
    labelNames: ["protocol", "method", "route", "status", "rpc_code"],
    buckets: REQUEST_BUCKETS,
    registers: [this.registry],
  });

  readonly tokensIssued = new Counter<"grant">({
    name: "platform_oidc_tokens_issued_total",
    help: "Token responses of the OIDC provider by grant (implicit: tokens of the authorization endpoint)",
    labelNames: ["grant"],
    registers: [this.registry],
  });

  readonly signIns = new Counter<"method" | "result">({
    name: "platform_sign_ins_total",
    help: "Checks of a user signing in (password, identity provider) by result: succeeded, failed (wrong password), locked (the wrong password that locked the user)",
    labelNames: ["method", "result"],
    registers: [this.registry],
  });

  readonly eventsAppended = new Counter<"aggregate_type">({
    name: "platform_events_appended_total",
    help: "Events appended to the event store, by aggregate type",
    labelNames: ["aggregate_type"],
    registers: [this.registry],
  });

  readonly eventPushes = new Histogram<"result">({
    name: "platform_event_push_duration_seconds",
    help: "Commands of the event store (one transaction each, retries included) by result: appended, unchanged (no event), failed",
    labelNames: ["result"],
    buckets: REQUEST_BUCKETS,
    registers: [this.registry],
  });

  readonly eventPushRetries = new Counter({
    name: "platform_event_push_retries_total",
    help: "Commands run again after losing an optimistic-concurrency race on an aggregate",
    registers: [this.registry],
  });

  readonly deliveries = new Counter<"result">({
    name: "platform_outbox_deliveries_total",
    help: "Attempts of this process to deliver an event to a target, by result: delivered, retry (failed, tried again later), failed (given up)",
    labelNames: ["result"],
    registers: [this.registry],
  });

  readonly notifications = new Counter<"result">({
    name: "platform_notification_messages_total",
    help: "Attempts of this process to send a notification message, by result: sent, retry (failed, tried again later), failed (given up)",
    labelNames: ["result"],
    registers: [this.registry],
  });

  readonly deliveryLag = new Histogram({
    name: "platform_outbox_delivery_lag_seconds",
    help: "Time from an event's append to its delivery to a target (delivered by this process)",
    buckets: LAG_BUCKETS,
    registers: [this.registry],
  });

  constructor(options: { processMetrics?: boolean } = {}) {
    // CPU, memory, event loop lag, GC, handles: only where the metrics are served (they sample all the time).
    if (options.processMetrics) collectDefaultMetrics({ register: this.registry });
  }

  /** The exposition in Prometheus text format. */
  text(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  observeRequest(labels: LabelValues<RequestLabel>, seconds: number): void {
    this.requests.observe(labels, seconds);
  }

  tokenIssued(grant: GrantName): void {
    this.tokensIssued.inc({ grant });
  }

  /** Counts the store's pushes and appended events, and the sign-ins its events record. */
  watchEventStore(store: EventStore): void {
    store.onPushed((outcome: PushOutcome) => {
      this.eventPushes.observe({ result: outcome.result }, outcome.seconds);
      if (outcome.retries > 0) this.eventPushRetries.inc(outcome.retries);
      for (const event of outcome.events) this.eventsAppended.inc({ aggregate_type: event.aggregateType });
    });
    store.onCommitted((events) => this.countSignIns(events));
  }

  /**
   * Sign-ins as the events of every sign-in path record them (the login UI and the sessions API alike): a
   * password or identity provider check of a session succeeded; a wrong password, which locked the user
   * when a lock comes with it.
   */
  private countSignIns(events: StoredEvent[]): void {
    for (const event of events) {
      if (event.aggregateType === SESSION) {
        if (event.type === SessionEvent.passwordChecked)
          this.signIns.inc({ method: "password", result: "succeeded" });
        else if (event.type === SessionEvent.idpChecked)
          this.signIns.inc({ method: "idp", result: "succeeded" });
      } else if (event.aggregateType === USER && event.type === UserEvent.passwordCheckFailed) {
        const locked = events.some(
          (e) =>
            e.type === UserEvent.locked &&
            e.aggregateType === USER &&
            e.aggregateId === event.aggregateId &&
            e.instanceId === event.instanceId,
        );
        this.signIns.inc({ method: "password", result: locked ? "locked" : "failed" });
      }
    }
  }

  /** Gauges of the database's connections, read at scrape time. */
  watchDatabase(db: Database): void {
    const stats = () => db.poolStats?.();
    new Gauge<"state">({
      name: "platform_db_connections",
      help: "Database connections by state: in_use (running a query or transaction), idle",
      labelNames: ["state"],
      registers: [this.registry],
      collect() {
        const s = stats();
        if (!s) return;
        this.set({ state: "in_use" }, s.inUse);
        this.set({ state: "idle" }, s.idle);
      },
    });
    new Gauge({
      name: "platform_db_connections_max",
      help: "Most database connections the pool opens (1: the embedded database)",
      registers: [this.registry],
      collect() {
        const s = stats();
        if (s) this.set(s.max);
      },
    });
    new Gauge({
      name: "platform_db_waiting",
      help: "Queries and transactions waiting for a database connection (the embedded database: its queue)",
      registers: [this.registry],
      collect() {
        const s = stats();
        if (s) this.set(s.waiting);
      },
    });
    if (db.kind === "pglite")
      new Counter({
        name: "platform_db_queue_refused_total",
        help: "Queries and transactions the embedded database refused (503), its queue being full (PLATFORM_EMBEDDED_QUEUE_LIMIT)",
        registers: [this.registry],
        collect() {
          const refused = stats()?.refused;
          if (refused === undefined) return;
          // the count is kept by the database: the counter shows it as it is
          this.reset();
          this.inc(refused);
        },
      });
  }

  /**
   * Gauges of the event outbox (src/execution), read at scrape time with one query on the index of pending
   * deliveries. They describe the database, not this process: every process reports the same values.
   */
  watchOutbox(db: Queryable): void {
    const read = sharedPerScrape(async () => {
      const rows = await db.query<{ pending: number; oldest_due: Date | string | null; now: Date | string }>(
        `SELECT count(*)::int AS pending, min(next_attempt_at) FILTER (WHERE next_attempt_at <= now()) AS oldest_due,
                now() AS now
           FROM execution_deliveries WHERE status = 1`,
      );
      const row = rows[0];
      const overdue = row?.oldest_due
        ? Math.max(0, new Date(row.now).getTime() - new Date(row.oldest_due).getTime()) / 1000
        : 0;
      return { pending: Number(row?.pending ?? 0), overdue };
    });
    new Gauge({
      name: "platform_outbox_pending_deliveries",
      help: "Event deliveries waiting to be sent or retried (all processes, all instances)",
      registers: [this.registry],
      async collect() {
        const outbox = await read();
        if (outbox) this.set(outbox.pending);
      },
    });
    new Gauge({
      name: "platform_outbox_oldest_due_seconds",
      help: "How long the oldest due event delivery has waited for a worker (0: none waiting; growing: the workers fall behind)",
      registers: [this.registry],
      async collect() {
        const outbox = await read();
        if (outbox) this.set(outbox.overdue);
      },
    });
  }
}

/**
 * One read shared by the gauges of one scrape (prom-client collects them concurrently). A failed read
 * (the database is unreachable) leaves the gauges out of that scrape instead of failing it.
 */
function sharedPerScrape<T>(read: () => Promise<T>): () => Promise<T | undefined> {
  let current: Promise<T | undefined> | undefined;
  return () => {
    if (!current) {
      current = read().catch(() => undefined);
      const clear = () => {
        current = undefined;
      };
      current.then(clear, clear);
    }
    return current;
  };
}
