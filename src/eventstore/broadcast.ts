/**
 * What one process changed, told to the other processes on the same PostgreSQL database, so that each
 * drops what its caches hold of it at once (docs/architecture.md "Many processes").
 *
 * One channel, CACHE_CHANNEL, with JSON payloads `{"p": process, "t": topic, "m": message}`; a process
 * skips its own (its listeners ran already). Topics: `events` (the first and last position of appended
 * events: the receivers read those events and run the event store's `onCommitted` listeners with them, the
 * same code path as a local commit), `revoked` (OIDC token revocations, which are rows rather than events)
 * and `stale` (anything may have changed: every cache is cleared). A message that would not fit PostgreSQL's
 * 8000 bytes goes out as `stale`.
 *
 * Sent right after the change committed, not inside its transaction: a transaction that NOTIFYs holds a
 * lock that is global to the PostgreSQL server from its commit until the commit is flushed to disk, so
 * every writing transaction notifying would serialize all commits (no group commit; bench/caches.ts).
 * Instead the messages of the commits that happen while one statement is on its way are sent together by
 * the next one, a transaction of its own that commits without waiting for the disk (it writes no data).
 * Writers do not wait for it (it would add a round trip to every write); whoever closes the database first
 * waits for `flushed()`. The price: a process that dies between its commit and that statement leaves the
 * others' caches to their expiry (2–5 s), as when the statement fails.
 *
 * The embedded database serves one process: nothing is sent there, and nobody listens.
 */
import { randomToken } from "../crypto/tokens.ts";
import type { Queryable } from "../storage/database.ts";
import type { ChannelHandler, NotificationLog } from "../storage/notifications.ts";

export const CACHE_CHANNEL = "platform_cache";
export const EVENTS_TOPIC = "events";
const STALE = "stale";
/** PostgreSQL refuses payloads of 8000 bytes and more. */
const MAX_PAYLOAD_BYTES = 7_999;
/** Ranges of positions sent together are merged when this close: fewer notifications, fewer reads. */
const MERGE_GAP = 64;
/**
 * At most one statement per this interval and process: under load the messages of many commits share one
 * (and their close ranges one notification), which keeps the cost per write small; when idle the first
 * message goes at once.
 */
const SEND_INTERVAL_MS = 10;
/** A failed send is logged at most this often. */
const WARN_EVERY_MS = 60_000;

/**
 * The messages of one statement. Its transaction writes no WAL before its commit record, and PostgreSQL
 * flushes only the commits of transactions that did (pg_stat_wal: no sync for 500 of them), so it holds the
 * notification lock only for a moment.
 */
const SEND_SQL = "SELECT pg_notify($1, payload) FROM unnest($2::text[]) AS payload";

export type TopicHandler = (message: unknown, db: Queryable) => Promise<void> | void;

interface Pending {
  topic: string;
  message: unknown;
}

export class Broadcast {
  /** Names this process in its messages, so that it skips them when they come back. */
  readonly processId = randomToken(12);
  /** Where failed sends are reported (the server's log; silent in command line tools). */
  log: NotificationLog | undefined;
  private readonly topics = new Map<string, TopicHandler>();
  private readonly staleListeners: Array<() => void> = [];
  private queue: Pending[] = [];
  private waiting: Array<() => void> = [];
  private sending: Promise<void> | undefined;
  private lastWarning = 0;
  private lastSent = 0;

  /**
   * `db` sends the messages: PostgreSQL, where several processes may share the database. Without it (the
   * embedded database) nothing is sent.
   */
  constructor(private readonly db?: Queryable) {}

  get enabled(): boolean {
    return this.db !== undefined;
  }

  /**
   * Tells the other processes about `message`; call it after the change committed. Resolves once
   * PostgreSQL has it (or sending failed, which is logged): never rejects.
   */
  publish(topic: string, message: unknown): Promise<void> {
    if (!this.db) return Promise.resolve();
    this.queue.push({ topic, message });
    const sent = new Promise<void>((resolve) => this.waiting.push(resolve));
    this.sending ??= this.drain(this.db);
    return sent;
  }

  /** Resolves once everything published so far is sent (before the database closes). */
  async flushed(): Promise<void> {
    await this.sending;
  }

  /**
   * Tells the other processes to clear their caches (after a change made outside the event store, once
   * committed); the caller runs `stale()` for its own.
   */
  publishStale(): Promise<void> {
    return this.publish(STALE, null);
  }

  /** Handles the messages of `topic` from other processes. */
  subscribe(topic: string, handler: TopicHandler): void {
    if (topic === STALE || this.topics.has(topic)) throw new Error(`topic ${topic} is taken`);
    this.topics.set(topic, handler);
  }

  /** Called when this process may have missed changes of others: a cache drops everything it holds. */
  onStale(listener: () => void): void {
    this.staleListeners.push(listener);
  }

  /** Runs the `onStale` listeners. */
  stale(): void {
    for (const listener of this.staleListeners) listener();
  }

  /** Receives CACHE_CHANNEL on the process's listening connection (src/storage/notifications.ts). */
  channel(log: NotificationLog): ChannelHandler {
    return {
      connected: () => this.stale(),
      notified: async (payload, db) => {
        let parsed: { p?: unknown; t?: unknown; m?: unknown };
        try {
          parsed = JSON.parse(payload);
        } catch {
          log.warn({ payload: payload.slice(0, 200) }, "cache notification is not JSON; clearing the caches");
          return this.stale();
        }
        if (parsed.p === this.processId) return;
        if (parsed.t === STALE) return this.stale();
        const handler = this.topics.get(String(parsed.t));
        // a topic this version does not know (a newer process during an upgrade): assume the worst
        if (!handler) return this.stale();
        await handler(parsed.m, db);
      },
    };
  }

  /** Sends what is queued, one statement at a time; what arrives meanwhile goes with the next one. */
  private async drain(db: Queryable): Promise<void> {
    await Promise.resolve(); // `sending` is set before the loop looks at the queue
    while (this.queue.length > 0) {
      const wait = this.lastSent + SEND_INTERVAL_MS - Date.now();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      this.lastSent = Date.now();
      const batch = this.queue;
      const waiting = this.waiting;
      this.queue = [];
      this.waiting = [];
      try {
        await db.query(SEND_SQL, [CACHE_CHANNEL, this.payloads(batch)]);
      } catch (error) {
        if (Date.now() - this.lastWarning > WARN_EVERY_MS) {
          this.lastWarning = Date.now();
          this.log?.warn(
            { err: error },
            "cannot notify the other processes of a change: their caches see it when their entries expire",
          );
        }
      }
      for (const resolve of waiting) resolve();
    }
    this.sending = undefined;
  }

  /** The payloads of a batch: event ranges merged where they are close, each message within the limit. */
  private payloads(batch: Pending[]): string[] {
    const ranges: [number, number][] = [];
    const others: Pending[] = [];
    for (const pending of batch) {
      if (pending.topic === EVENTS_TOPIC) ranges.push(pending.message as [number, number]);
      else others.push(pending);
    }
    ranges.sort((x, y) => x[0] - y[0]);
    const merged: [number, number][] = [];
    for (const [first, last] of ranges) {
      const previous = merged.at(-1);
      if (previous && first <= previous[1] + MERGE_GAP) previous[1] = Math.max(previous[1], last);
      else merged.push([first, last]);
    }
    const payloads = new Set<string>();
    const add = (topic: string, message: unknown) => {
      const payload = JSON.stringify({ p: this.processId, t: topic, m: message });
      payloads.add(
        Buffer.byteLength(payload) > MAX_PAYLOAD_BYTES
          ? JSON.stringify({ p: this.processId, t: STALE })
          : payload,
      );
    };
    for (const range of merged) add(EVENTS_TOPIC, range);
    for (const { topic, message } of others) add(topic, message);
    return [...payloads];
  }
}
