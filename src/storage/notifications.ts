/**
 * PostgreSQL only: the one connection per process that LISTENs for other processes' notifications (the
 * caches' channel, src/eventstore/broadcast.ts, and the event deliveries' wake-up, src/execution). LISTEN
 * needs a session of its own, so it lives outside the pool.
 *
 * When PostgreSQL ends the connection (restart, failover, `pg_terminate_backend`) it is opened again every
 * second until it succeeds. Notifications sent meanwhile are lost, so after every connection (the first
 * one too: changes before it were not heard either) each channel's `connected` runs once LISTEN is in
 * place: the caches forget everything, the worker looks for due deliveries.
 *
 * A channel's `notified` runs one at a time, in the order the notifications arrived; it gets the listening
 * connection for a query of its own (it answers even while the pool is exhausted). A query failing there
 * means the connection is lost: it is opened again and `connected` runs.
 */
import pg from "pg";
import type { Queryable, Row } from "./database.ts";

const RECONNECT_MS = 1_000;
const CONNECT_TIMEOUT_MS = 5_000;

export interface ChannelHandler {
  /** One notification of the channel, with the listening connection to query on. */
  notified(payload: string, db: Queryable): Promise<void> | void;
  /** LISTEN is (again) in place: whatever was sent before may have been missed. */
  connected(): void;
}

export interface NotificationLog {
  warn(object: Record<string, unknown>, message: string): void;
}

export class NotificationListener {
  private readonly channels = new Map<string, ChannelHandler>();
  private client: pg.Client | undefined;
  private timer: NodeJS.Timeout | undefined;
  private started = false;
  private closed = false;
  private failures = 0;
  /** Notifications are handled one after the other. */
  private queue: Promise<void> = Promise.resolve();
  private firstConnection: Promise<void> | undefined;

  constructor(
    private readonly url: string,
    private readonly log: NotificationLog,
    /** `application_name` of the connection (shown in pg_stat_activity). */
    private readonly applicationName = "platform listen",
  ) {}

  /** Registers a channel; before `start`. Channel names are SQL identifiers of this code, never input. */
  channel(name: string, handler: ChannelHandler): void {
    if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new Error(`bad channel name ${name}`);
    if (this.started) throw new Error("channels are registered before the listener starts");
    this.channels.set(name, handler);
  }

  /**
   * Connects and LISTENs. Resolves once the first attempt is done, listening or not (a failed attempt is
   * retried in the background and logged once).
   */
  start(): Promise<void> {
    if (!this.started) {
      this.started = true;
      this.firstConnection = this.connect();
    }
    return this.firstConnection!;
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    const c = this.client;
    this.client = undefined;
    await c?.end().catch(() => {});
    await this.queue;
  }

  private async connect(): Promise<void> {
    this.timer = undefined;
    if (this.closed) return;
    const c = new pg.Client({
      connectionString: this.url,
      connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
      application_name: this.applicationName,
    });
    this.client = c;
    const lost = () => {
      if (this.closed || this.client !== c) return;
      this.client = undefined;
      c.end().catch(() => {});
      this.timer = setTimeout(() => void this.connect(), RECONNECT_MS).unref();
    };
    // Listening from the start: an 'error' without a listener would end the process.
    c.on("error", lost);
    c.on("end", lost);
    c.on("notification", (message) => {
      const handler = this.channels.get(message.channel);
      if (!handler || this.client !== c) return;
      const db: Queryable = {
        query: async <T extends Row = Row>(sql: string, params: readonly unknown[] = []) =>
          (await c.query(sql, params as unknown[])).rows as T[],
        exec: async (sql: string) => {
          await c.query(sql);
        },
      };
      this.queue = this.queue
        .then(() => handler.notified(message.payload ?? "", db))
        .catch((error) => {
          if (this.client !== c) return; // lost meanwhile: the next connection runs `connected`
          // the connection is gone or the handler failed: start over, which runs `connected`
          this.log.warn({ err: error, channel: message.channel }, "notification could not be handled");
          lost();
        });
    });
    try {
      await c.connect();
      for (const name of this.channels.keys()) await c.query(`LISTEN ${name}`);
      this.failures = 0;
      for (const handler of this.channels.values()) handler.connected();
    } catch (error) {
      if (this.failures++ === 0 && !this.closed)
        this.log.warn({ err: error }, "cannot listen for notifications of other processes; retrying");
      lost();
    }
  }
}
