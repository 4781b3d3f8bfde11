import type { ResolvedContext } from "../auth/caller.ts";
import { INSTANCE } from "../domain/instance/events.ts";
import { ORG } from "../domain/org/events.ts";
import { SETTINGS } from "../domain/settings/events.ts";
import type { EventStore } from "../eventstore/eventstore.ts";
import { type SettingsLayer, settingsLayers } from "../query/settings.ts";
import type { Queryable } from "../storage/database.ts";

const INVALIDATING = new Set([SETTINGS, ORG, INSTANCE]);

/**
 * The settings layers the login pages read on every request (language and login settings), cached per
 * category and context: a sign-in shows four pages, each read them from the database before. Any event of
 * settings, organizations or instances (whose removal removes their settings) drops the whole cache at once, in this process when it commits (so a change is seen by the next
 * page: read-your-writes) and in the other processes when its notification arrives (src/eventstore/
 * broadcast.ts); a lost notification connection drops it too (`onStale`), and entries expire after `ttlMs`
 * in any case.
 */
export class SettingsLayerCache {
  private readonly entries = new Map<string, { layers: SettingsLayer[]; until: number }>();
  /** Counts invalidations: a read that started before one is not cached. */
  private generation = 0;

  constructor(
    private readonly db: Queryable,
    eventStore: EventStore,
    private readonly ttlMs = 5_000,
  ) {
    eventStore.onCommitted((events) => {
      if (events.some((e) => INVALIDATING.has(e.aggregateType))) this.invalidate();
    });
    eventStore.onStale(() => this.invalidate());
  }

  async layers(category: string, context: ResolvedContext): Promise<SettingsLayer[]> {
    const key = [
      category,
      context.type,
      context.type === "system" ? "" : context.instanceId,
      context.type === "org" || context.type === "project" ? context.orgId : "",
    ].join("\u0000");
    const hit = this.entries.get(key);
    if (hit && hit.until > Date.now()) return hit.layers;
    const generation = this.generation;
    const layers = await settingsLayers(this.db, category, context);
    if (generation === this.generation) this.entries.set(key, { layers, until: Date.now() + this.ttlMs });
    return layers;
  }

  invalidate(): void {
    this.generation++;
    this.entries.clear();
  }
}
