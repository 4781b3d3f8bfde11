/**
 * The sending side of a durable outbox (./table.ts), shared by every outbox: one worker per process and
 * outbox takes due rows (`claim`, `FOR UPDATE SKIP LOCKED`, so with several processes on one PostgreSQL
 * each row is taken by one of them at a time), sends each outside any transaction (`send`, what the
 * outbox supplies), and records the outcome: done; pending again after a back-off with jitter; failed at
 * once on a permanent failure, or once `maxAttempts` are used up. Outcomes are recorded one statement at a
 * time, those that arrive meanwhile together in the next (fewer commits, each of which the embedded
 * database flushes to disk).
 *
 * It wakes on this process's commits that queued rows (`wake`), on a PostgreSQL notification from other
 * processes (`listen`), when the next retry is due, and at the latest every POLL_MS. Rows a dead process
 * leased become due again when their lease runs out, so after a crash or restart nothing is lost (at least
 * once: an item is sent again only when the process died between sending it and recording that).
 */
import { setMaxListeners } from "node:events";
import type { Queryable } from "../storage/database.ts";
import type { NotificationListener } from "../storage/notifications.ts";
import { activeTracer, inRootSpan } from "../tracing/tracing.ts";
import {
  nextDue,
  type OutboxRow,
  type OutboxTable,
  type Outcome,
  purgeRows,
  RowState,
  recordOutcomes,
  releaseRow,
  retryDelayMs,
} from "./table.ts";

/** Longest sleep when nothing is due (catches rows whose notification was missed). */
const POLL_MS = 5_000;
/** With sends in flight, rows are taken only once this many slots are free (fewer, larger claims). */
const CLAIM_BATCH = 8;
const PURGE_EVERY_MS = 60 * 60 * 1000;
/** Outcomes recorded by one statement at most. */
const RECORD_BATCH = 500;
/** The error recorded for an attempt cancelled by a stop. */
const CUT_OFF = "cut off: the process stopped during the attempt";

/** Whether `promise` settles within `ms`. */
async function settlesWithin(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), Math.max(0, ms));
  });
  try {
    return await Promise.race([promise.then(() => true), late]);
  } finally {
    clearTimeout(timer);
  }
}

/** An attempt that did not send its item; `permanent`: retrying cannot help. */
export class AttemptFailure extends Error {
  constructor(
    message: string,
    readonly permanent: boolean,
    /** The other side's answer code, recorded where the table keeps one. */
    readonly answer?: number,
  ) {
    super(message);
    this.name = "AttemptFailure";
  }
}

/**
 * An attempt abandoned because the worker stops. `tried`: the item may have reached the other side (the
 * attempt counts, and the row is due again at once); otherwise the row is given back untried.
 */
export class AttemptCancelled extends Error {
  constructor(readonly tried = true) {
    super("cancelled: the worker stops");
    this.name = "AttemptCancelled";
  }
}

/** What a stop did with the sends in flight (`OutboxWorker.stop`). */
export interface StopCounts {
  /** Sends that ended (sent, failed or to be retried) and were recorded while the worker stopped. */
  finished: number;
  /** Sends cancelled at the stop's deadline (their attempt counts, due again at once), or left running. */
  cutOff: number;
}

/** How long a stop waits by default for the sends in flight before it cancels them. */
export const STOP_GRACE_MS = 25_000;
/** After cancelling, how long a stop waits for the cancelled sends to be recorded. */
const CANCEL_RECORD_MS = 2_000;

export interface RetrySettings {
  maxAttempts: number;
  /** The first retry's delay (doubling with each attempt, with jitter). */
  retryDelayMs: number;
}

export interface OutboxLog {
  error(object: Record<string, unknown>, message: string): void;
}

/** What an outbox's worker is told beyond its sending (./table.ts describes its table). */
export interface OutboxWorkerOptions {
  table: OutboxTable;
  db: Queryable;
  processId: string;
  /** Sends in flight at once. */
  concurrency: number;
  retry: RetrySettings;
  log: OutboxLog;
  /** Its log lines: what cannot be read, what one item is, and the log field naming an item's ID. */
  names: { outbox: string; item: string; idField: string };
}

export abstract class OutboxWorker<Row extends OutboxRow> {
  private stopped = false;
  private woken = false;
  private wakeUp?: () => void;
  private loop?: Promise<void>;
  private readonly inFlight = new Map<string, Promise<void>>();
  private readonly abort = new AbortController();
  private nextPurge = Date.now() + 60_000;
  private outcomes: { row: Row; outcome: Outcome; done: (error?: unknown) => void }[] = [];
  private recording?: Promise<void>;
  private stopping?: Promise<StopCounts>;
  private readonly counts: StopCounts = { finished: 0, cutOff: 0 };
  protected readonly db: Queryable;
  readonly processId: string;

  constructor(private readonly options: OutboxWorkerOptions) {
    this.db = options.db;
    this.processId = options.processId;
    setMaxListeners(0, this.abort.signal); // one listener per send in flight
  }

  /** Takes up to `limit` due rows (./table.ts `claimRows` with the outbox's query), ready to send. */
  protected abstract claim(limit: number): Promise<Row[]>;

  /**
   * Sends one row's item. Resolves once it is sent (with the other side's answer code, if any); throws
   * AttemptFailure when it was not, AttemptCancelled when `signal` (the worker stops) ended it. Anything
   * else thrown is logged and the row left to its lease.
   */
  protected abstract send(row: Row, signal: AbortSignal): Promise<{ answer?: number } | undefined>;

  /** After an outcome was recorded (metrics). */
  protected recorded(_row: Row, _outcome: Outcome): void {}

  /** The root span of an attempt, when traced (undefined: not traced). */
  protected span(_row: Row): { name: string; attributes: Record<string, string | number> } | undefined {
    return undefined;
  }

  start(): void {
    this.loop ??= this.run();
  }

  /** Something may be due now. */
  wake(): void {
    this.woken = true;
    this.wakeUp?.();
  }

  /**
   * PostgreSQL: wakes the worker when any process committed rows on `channel` (./table.ts `notifyWorkers`),
   * and whenever the listening connection is (re)established, in case a notification was missed.
   */
  listen(listener: NotificationListener, channel: string): void {
    listener.channel(channel, { notified: () => this.wake(), connected: () => this.wake() });
  }

  /**
   * Stops taking rows and lets the sends in flight finish until `deadline` (ms since the epoch; default
   * STOP_GRACE_MS from now); then cancels those left (an outbox whose sends ignore the signal lets them run)
   * and waits a moment for their attempts to be recorded: due again at once, each attempt counted, since
   * the other side may have received it. Safe to call twice (the first deadline holds).
   */
  stop(deadline = Date.now() + STOP_GRACE_MS): Promise<StopCounts> {
    this.stopping ??= this.drain(deadline);
    return this.stopping;
  }

  private async drain(deadline: number): Promise<StopCounts> {
    this.stopped = true;
    this.wake();
    await this.loop;
    const all = Promise.allSettled([...this.inFlight.values()]);
    if (!(await settlesWithin(all, deadline - Date.now()))) {
      this.abort.abort();
      await settlesWithin(all, CANCEL_RECORD_MS);
    }
    return { finished: this.counts.finished, cutOff: this.counts.cutOff + this.inFlight.size };
  }

  private async run(): Promise<void> {
    const { concurrency } = this.options;
    let failures = 0;
    while (!this.stopped) {
      this.woken = false;
      let waitMs = POLL_MS;
      try {
        const free = concurrency - this.inFlight.size;
        if (free >= CLAIM_BATCH || (free > 0 && this.inFlight.size === 0)) {
          const rows = await this.claim(free);
          for (const row of rows) this.dispatch(row);
          if (rows.length === free) continue; // more may be due
          const due = await nextDue(this.db, this.options.table);
          if (due) waitMs = Math.max(0, Math.min(POLL_MS, due.getTime() - Date.now()));
        }
        if (Date.now() >= this.nextPurge) {
          this.nextPurge = Date.now() + PURGE_EVERY_MS;
          await purgeRows(this.db, this.options.table);
        }
        failures = 0;
      } catch (error) {
        if (this.stopped) break;
        failures++;
        waitMs = Math.min(POLL_MS, 100 * 2 ** failures);
        this.options.log.error({ err: error }, `${this.options.names.outbox}: cannot read the outbox`);
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

  private dispatch(row: Row): void {
    const key = `${row.instance_id}\u0000${row.id}`;
    const span = this.span(row);
    const tracer = span && activeTracer();
    const attempting =
      span && tracer
        ? inRootSpan(tracer, span.name, span.attributes, () => this.attempt(row))
        : this.attempt(row);
    const { names, log } = this.options;
    const sending = attempting
      .catch((error) => log.error({ err: error, [names.idField]: row.id }, `${names.item} failed`))
      .finally(() => {
        this.inFlight.delete(key);
        this.wake(); // a slot is free
      });
    this.inFlight.set(key, sending);
  }

  private async attempt(row: Row): Promise<void> {
    const { table, retry } = this.options;
    if (this.stopped) {
      await releaseRow(this.db, table, row, this.processId);
      return;
    }
    let outcome: Outcome;
    try {
      const sent = await this.send(row, this.abort.signal);
      outcome = { state: RowState.done, answer: sent?.answer };
    } catch (error) {
      if (error instanceof AttemptCancelled) {
        if (!error.tried) {
          await releaseRow(this.db, table, row, this.processId);
          return;
        }
        // the attempt counts (the other side may have it); never a reason to give the row up
        await this.record(row, { state: RowState.pending, error: CUT_OFF, retryInMs: 0 });
        this.counts.cutOff++;
        return;
      }
      if (!(error instanceof AttemptFailure)) throw error;
      const { message, answer } = error;
      outcome =
        error.permanent || row.attempts >= retry.maxAttempts
          ? { state: RowState.failed, error: message, answer }
          : {
              state: RowState.pending,
              error: message,
              answer,
              retryInMs: retryDelayMs(row.attempts, retry.retryDelayMs),
            };
    }
    await this.record(row, outcome);
    if (this.stopped) this.counts.finished++;
    this.recorded(row, outcome);
  }

  /** Records an outcome, together with those that arrive while the statement before runs. */
  private record(row: Row, outcome: Outcome): Promise<void> {
    return new Promise((resolve, reject) => {
      this.outcomes.push({ row, outcome, done: (error) => (error ? reject(error) : resolve()) });
      this.recording ??= this.recordAll();
    });
  }

  private async recordAll(): Promise<void> {
    while (this.outcomes.length > 0) {
      const batch = this.outcomes.splice(0, RECORD_BATCH);
      try {
        await recordOutcomes(this.db, this.options.table, batch, this.processId);
        for (const b of batch) b.done();
      } catch (error) {
        for (const b of batch) b.done(error);
      }
    }
    this.recording = undefined;
  }
}
