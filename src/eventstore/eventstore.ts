import { AbortedError } from "../errors.ts";
import { type Database, type Queryable, sqlState } from "../storage/database.ts";
import { Broadcast, EVENTS_TOPIC } from "./broadcast.ts";
import { currentPushClaim } from "./claim.ts";
import { aggregateKey, insertEvents, lastSequenceSql, SequenceConflict } from "./insert-events.ts";
import type { CommandTx, EventHandler, NewEvent, Projection, PushContext, StoredEvent } from "./types.ts";

export { lastSequenceSql };

/** How often a command runs again after losing an optimistic-concurrency race before it gives up. */
const MAX_ATTEMPTS = 25;

interface EventRow {
  instance_id: string;
  aggregate_type: string;
  aggregate_id: string;
  sequence: number;
  event_type: string;
  payload: Record<string, unknown> | null;
  creator: string;
  resource_owner: string;
  created_at: Date;
  position: number;
  [key: string]: unknown;
}

const COLUMNS =
  "instance_id, aggregate_type, aggregate_id, sequence, event_type, payload, creator, resource_owner, created_at, position";

export function toStoredEvent(row: EventRow): StoredEvent {
  return {
    instanceId: row.instance_id,
    aggregateType: row.aggregate_type,
    aggregateId: row.aggregate_id,
    sequence: Number(row.sequence),
    type: row.event_type,
    payload: row.payload,
    creator: row.creator,
    resourceOwner: row.resource_owner,
    createdAt: row.created_at instanceof Date ? row.created_at : new Date(row.created_at),
    position: Number(row.position),
  };
}

export type CommittedListener = (events: StoredEvent[]) => void;

/** How one `push` went, for the metrics: told after it committed, changed nothing, or failed. */
export interface PushOutcome {
  result: "appended" | "unchanged" | "failed";
  /** From the call to its end, retries and their back-off included. */
  seconds: number;
  /** The events committed (empty unless appended). */
  events: StoredEvent[];
  /** Times the command ran again after losing an optimistic-concurrency race (or a deadlock). */
  retries: number;
}
export type PushListener = (outcome: PushOutcome) => void;
/** Runs in the transaction of an append (before or after the projections); throwing fails the push. */
export type AppendHook = (tx: Queryable, events: StoredEvent[]) => Promise<void>;

/** deadlock_detected, serialization_failure */
const RETRYABLE_STATES = new Set(["40P01", "40001"]);

/**
 * Appends events with a per-aggregate sequence as optimistic lock, checks unique constraints and runs
 * the inline projections, all in one transaction.
 */
export class EventStore {
  private readonly handlers = new Map<string, Array<{ projection: Projection; handler: EventHandler }>>();
  private readonly listeners: CommittedListener[] = [];
  private readonly pushListeners: PushListener[] = [];
  private readonly appendHooks: AppendHook[] = [];
  private readonly appendingHooks: AppendHook[] = [];
  /**
   * Tells other processes on the same PostgreSQL database what this one committed (./broadcast.ts); the
   * other writers of cached rows (OIDC token revocations) publish through it too.
   */
  readonly broadcast: Broadcast;

  constructor(
    readonly db: Database,
    readonly projections: Projection[],
  ) {
    for (const projection of projections) {
      for (const [eventType, handler] of Object.entries(projection.handlers)) {
        const list = this.handlers.get(eventType) ?? [];
        list.push({ projection, handler });
        this.handlers.set(eventType, list);
      }
    }
    this.broadcast = new Broadcast(db.kind === "postgres" ? db : undefined);
    this.broadcast.subscribe(EVENTS_TOPIC, async (message, tx) => {
      const [first, last] = Array.isArray(message) ? message.map(Number) : [];
      if (!Number.isSafeInteger(first) || !Number.isSafeInteger(last)) return this.broadcast.stale();
      // The range may hold events of other transactions committed meanwhile: a cache dropping a little more
      // than needed is harmless.
      const rows = await tx.query<EventRow>(
        `SELECT ${COLUMNS} FROM events WHERE position BETWEEN $1 AND $2 ORDER BY position`,
        [first, last],
      );
      if (rows.length > 0) this.committed(rows.map(toStoredEvent));
    });
  }

  /**
   * Called after every commit (cache invalidation, execution queue): this process's, and on PostgreSQL
   * other processes' too, as soon as their notification arrives (./broadcast.ts). Must not throw.
   */
  onCommitted(listener: CommittedListener): void {
    this.listeners.push(listener);
  }

  /** Called at the end of every push, whatever its result (metrics). Must not throw. */
  onPushed(listener: PushListener): void {
    this.pushListeners.push(listener);
  }

  /**
   * Called when this process may have missed other processes' commits (its notification connection was
   * lost, or a change was made outside the event store): drop every cached read. Must not throw.
   */
  onStale(listener: () => void): void {
    this.broadcast.onStale(listener);
  }

  private committed(events: StoredEvent[]): void {
    for (const listener of this.listeners) listener(events);
  }

  /**
   * Called in the transaction of every append with the stored events, after the projections: rows that
   * must commit with the events (the execution outbox, src/execution/outbox.ts). Not run by rebuilds.
   */
  onAppended(hook: AppendHook): void {
    this.appendHooks.push(hook);
  }

  /**
   * Called in the transaction of every append with the stored events, before the projections apply them:
   * rows that must change with the events and need the read models as they were before (the OIDC tokens of
   * the sessions an event ends, found in the sessions read model before it forgets them:
   * src/oidc/session-tokens.ts). Not run by rebuilds.
   */
  onAppending(hook: AppendHook): void {
    this.appendingHooks.push(hook);
  }

  /**
   * Runs `command` in a transaction and appends the events it returns. When another writer appended to
   * an aggregate the command loaded (or to the same new aggregate) first, the transaction rolls back
   * and the command runs again on fresh state; after MAX_ATTEMPTS it fails with ABORTED.
   */
  async push(ctx: PushContext, command: (tx: CommandTx) => Promise<NewEvent[]>): Promise<StoredEvent[]> {
    if (this.pushListeners.length === 0) return this.pushWithRetries(ctx, command);
    const started = performance.now();
    let retries = 0;
    const tell = (result: PushOutcome["result"], events: StoredEvent[]) => {
      const outcome = { result, seconds: (performance.now() - started) / 1000, events, retries };
      for (const listener of this.pushListeners) listener(outcome);
    };
    try {
      const stored = await this.pushWithRetries(ctx, command, () => retries++);
      tell(stored.length > 0 ? "appended" : "unchanged", stored);
      return stored;
    } catch (error) {
      tell("failed", []);
      throw error;
    }
  }

  private async pushWithRetries(
    ctx: PushContext,
    command: (tx: CommandTx) => Promise<NewEvent[]>,
    onRetry?: () => void,
  ): Promise<StoredEvent[]> {
    const claim = currentPushClaim();
    for (let attempt = 1; ; attempt++) {
      let claimed = false;
      let bound = false;
      try {
        const stored = await this.db.transaction(async (tx) => {
          // The call's claim (e.g. its idempotency key) is written first, so a concurrent twin waits here
          // for this transaction instead of racing it on the command's own checks.
          claimed = (await claim?.enter(tx)) ?? false;
          const loaded = new Map<string, number>();
          const commandTx: CommandTx = {
            query: (sql, params) => tx.query(sql, params),
            exec: (sql) => tx.exec(sql),
            load: async (aggregateType, aggregateId, instanceId = ctx.instanceId) => {
              const events = await this.readAggregate(tx, instanceId, aggregateType, aggregateId);
              loaded.set(aggregateKey(instanceId, aggregateType, aggregateId), events.at(-1)?.sequence ?? 0);
              return events;
            },
            expectAt: (aggregateType, aggregateId, sequence, instanceId = ctx.instanceId) => {
              loaded.set(aggregateKey(instanceId, aggregateType, aggregateId), sequence);
            },
            expect: async (aggregateType, aggregateId, instanceId = ctx.instanceId) => {
              const sequence = await currentSequence(tx, instanceId, aggregateType, aggregateId);
              loaded.set(aggregateKey(instanceId, aggregateType, aggregateId), sequence);
              return sequence;
            },
          };
          const events = await command(commandTx);
          const stored = events.length === 0 ? [] : await this.append(tx, ctx, events, loaded);
          if (claimed) await claim!.leave(tx, stored);
          return stored;
        });
        bound = claimed && stored.length > 0;
        if (stored.length > 0) {
          this.committed(stored);
          // the other processes (./broadcast.ts): `[first, last]` position of this push's events; sent in
          // the background, batched with other pushes' (`broadcast.flushed()` before closing the database)
          void this.broadcast.publish(EVENTS_TOPIC, [stored[0].position, stored.at(-1)!.position]);
        }
        return stored;
      } catch (error) {
        // PostgreSQL ends one of two deadlocked (or serialization-failed) transactions: run it again.
        const retryable = error instanceof SequenceConflict || RETRYABLE_STATES.has(sqlState(error) ?? "");
        if (!retryable) throw error;
        if (attempt >= MAX_ATTEMPTS) {
          throw new AbortedError("the resource was changed concurrently too often; try again");
        }
        onRetry?.();
        await sleep(Math.random() * Math.min(50, 2 ** attempt));
      } finally {
        if (claimed) claim!.settle(bound);
      }
    }
  }

  private async append(
    tx: Queryable,
    ctx: PushContext,
    events: NewEvent[],
    loaded: Map<string, number>,
  ): Promise<StoredEvent[]> {
    const stored = await insertEvents(tx, ctx, events, loaded);
    for (const hook of this.appendingHooks) await hook(tx, stored);
    // up to which index of `stored` each projection's absorbing handlers applied the events already
    const absorbed = new Map<Projection, number>();
    for (let i = 0; i < stored.length; i++) {
      const event = stored[i];
      for (const { projection, handler } of this.handlers.get(event.type) ?? []) {
        if ((absorbed.get(projection) ?? -1) >= i) continue;
        const absorbing = projection.absorbing?.[event.type];
        if (!absorbing) {
          await handler(tx, event);
          continue;
        }
        const applied = await absorbing(tx, event, stored.slice(i + 1));
        if (applied > 0) absorbed.set(projection, i + applied);
      }
    }
    for (const hook of this.appendHooks) await hook(tx, stored);
    return stored;
  }

  private async readAggregate(
    tx: Queryable,
    instanceId: string,
    aggregateType: string,
    aggregateId: string,
  ): Promise<StoredEvent[]> {
    const rows = await tx.query<EventRow>(
      `SELECT ${COLUMNS} FROM events WHERE instance_id = $1 AND aggregate_type = $2 AND aggregate_id = $3 ORDER BY sequence`,
      [instanceId, aggregateType, aggregateId],
    );
    return rows.map(toStoredEvent);
  }

  /** The events of one aggregate, oldest first, outside any command. */
  async aggregateEvents(
    instanceId: string,
    aggregateType: string,
    aggregateId: string,
  ): Promise<StoredEvent[]> {
    return this.readAggregate(this.db, instanceId, aggregateType, aggregateId);
  }

  /** Events after `afterPosition` in global order, optionally of some aggregate types. */
  async eventsAfter(
    afterPosition: number,
    options: { aggregateTypes?: string[]; limit?: number; instanceId?: string } = {},
    queryable: Queryable = this.db,
  ): Promise<StoredEvent[]> {
    const params: unknown[] = [afterPosition];
    let where = "position > $1";
    if (options.aggregateTypes) {
      params.push(options.aggregateTypes);
      where += ` AND aggregate_type = ANY($${params.length})`;
    }
    if (options.instanceId !== undefined) {
      params.push(options.instanceId);
      where += ` AND instance_id = $${params.length}`;
    }
    params.push(options.limit ?? 1000);
    const rows = await queryable.query<EventRow>(
      `SELECT ${COLUMNS} FROM events WHERE ${where} ORDER BY position LIMIT $${params.length}`,
      params,
    );
    return rows.map(toStoredEvent);
  }

  /**
   * Empties a projection's tables and replays every event it handles, in one transaction: readers see
   * the old rows until the new ones are complete.
   */
  async rebuild(name: string): Promise<number> {
    const projection = this.projections.find((p) => p.name === name);
    if (!projection) throw new Error(`unknown projection ${name}`);
    const replayed = await this.db.transaction(
      async (tx) => {
        for (const table of projection.tables) await tx.query(`DELETE FROM ${table}`);
        let position = 0;
        let replayed = 0;
        for (;;) {
          const batch = await this.eventsAfter(
            position,
            { aggregateTypes: projection.aggregateTypes, limit: 1000 },
            tx,
          );
          if (batch.length === 0) return replayed;
          for (const event of batch) {
            const handler = projection.handlers[event.type];
            if (handler) {
              await handler(tx, event);
              replayed++;
            }
          }
          position = batch.at(-1)!.position;
        }
      },
      { unbounded: true },
    );
    // the read model changed without new events: every process clears its caches
    this.broadcast.stale();
    await this.broadcast.publishStale();
    return replayed;
  }
}

async function currentSequence(
  tx: Queryable,
  instanceId: string,
  aggregateType: string,
  aggregateId: string,
) {
  const rows = await tx.query<{ sequence: number | null }>(lastSequenceSql("$1", "$2", "$3"), [
    instanceId,
    aggregateType,
    aggregateId,
  ]);
  return Number(rows[0]?.sequence ?? 0);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
