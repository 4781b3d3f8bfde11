import type { EventStore } from "../eventstore/eventstore.ts";
import type { StoredEvent } from "../eventstore/types.ts";

/** What an event makes stale: the answers of one scope (usually an instance ID), all of them, or nothing. */
export type Staleness = { scope: string } | "all" | undefined;

/**
 * A per-process cache of read-model answers that events make stale — the one pattern behind the caches of
 * hot lookups (OIDC clients, the projects a client may name as audience, the login's settings layers):
 * - every committed event the cache's `staleBy` names drops the answers of its scope (or all), in this
 *   process when it commits (read-your-writes) and in the other processes sharing the database when the
 *   event store's notification arrives (src/eventstore/broadcast.ts);
 * - an answer read across such a drop is returned but not kept: it may show the state before the event;
 * - when notifications may have been missed (`onStale`) everything is dropped, and no answer is older than
 *   `ttlMs` in any case: the bound should a notification be lost;
 * - at most `max` answers (absent ones included, so probing with unknown keys cannot grow it), the oldest
 *   dropped first.
 * Keys start with their scope: `InvalidatedCache.key(scope, ...parts)`.
 */
export class InvalidatedCache<V> {
  private readonly entries = new Map<string, { value: V; until: number }>();
  /** Counts drops (see `ticket`). */
  private generation = 0;
  private readonly ttlMs: number;
  private readonly max: number;

  constructor(options: {
    ttlMs: number;
    max: number;
    eventStore?: EventStore;
    /** Which answers an event makes stale. */
    staleBy?: (event: StoredEvent) => Staleness;
  }) {
    this.ttlMs = options.ttlMs;
    this.max = options.max;
    const { eventStore, staleBy } = options;
    if (!eventStore) return;
    if (staleBy)
      eventStore.onCommitted((events) => {
        for (const event of events) {
          const stale = staleBy(event);
          if (stale === "all") this.invalidate();
          else if (stale) this.invalidate(stale.scope);
        }
      });
    eventStore.onStale(() => this.invalidate());
  }

  /** The cache key of `parts` in `scope`. */
  static key(scope: string, ...parts: string[]): string {
    return [scope, ...parts].join("\u0000");
  }

  /** The answer kept for `key`, if it is still fresh. */
  get(key: string): { value: V } | undefined {
    const entry = this.entries.get(key);
    return entry && entry.until > Date.now() ? { value: entry.value } : undefined;
  }

  /** Taken before reading the database: `set` with it keeps the answer only if nothing was dropped since. */
  ticket(): number {
    return this.generation;
  }

  /** Keeps an answer read after `ticket` was taken, unless a drop came in between. */
  set(ticket: number, key: string, value: V): void {
    if (ticket !== this.generation) return;
    this.entries.delete(key);
    if (this.entries.size >= this.max) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(key, { value, until: Date.now() + this.ttlMs });
  }

  /** The kept answer of `key`, or `load`'s (kept when no drop came while it ran). */
  async through(key: string, load: () => Promise<V>): Promise<V> {
    const hit = this.get(key);
    if (hit) return hit.value;
    const ticket = this.ticket();
    const value = await load();
    this.set(ticket, key, value);
    return value;
  }

  /** Drops the answers of a scope (all when none is given). */
  invalidate(scope?: string): void {
    this.generation++;
    if (scope === undefined) {
      this.entries.clear();
      return;
    }
    const prefix = `${scope}\u0000`;
    for (const key of this.entries.keys()) if (key.startsWith(prefix)) this.entries.delete(key);
  }
}
