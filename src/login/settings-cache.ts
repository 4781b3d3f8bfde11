import type { ResolvedContext } from "../auth/caller.ts";
import { INSTANCE } from "../domain/instance/events.ts";
import { ORG } from "../domain/org/events.ts";
import { SETTINGS } from "../domain/settings/events.ts";
import type { EventStore } from "../eventstore/eventstore.ts";
import { InvalidatedCache } from "../query/invalidated-cache.ts";
import { type SettingsLayer, settingsLayers } from "../query/settings.ts";
import type { Queryable } from "../storage/database.ts";

const INVALIDATING = new Set([SETTINGS, ORG, INSTANCE]);
/** Contexts kept at most: organizations each have theirs. */
const SETTINGS_CACHE_MAX = 10_000;

/**
 * The settings layers the login pages read on every request (language and login settings), cached per
 * category and context: a sign-in shows four pages, each read them from the database before. Any event of
 * settings, organizations or instances (whose removal removes their settings) drops the whole cache at once, in this process when it commits (so a change is seen by the next
 * page: read-your-writes) and in the other processes when its notification arrives
 * (../query/invalidated-cache.ts); entries expire after `ttlMs` in any case.
 */
export class SettingsLayerCache {
  private readonly cache: InvalidatedCache<SettingsLayer[]>;

  constructor(
    private readonly db: Queryable,
    eventStore: EventStore,
    ttlMs = 5_000,
  ) {
    this.cache = new InvalidatedCache({
      ttlMs,
      max: SETTINGS_CACHE_MAX,
      eventStore,
      staleBy: (e) => (INVALIDATING.has(e.aggregateType) ? "all" : undefined),
    });
  }

  layers(category: string, context: ResolvedContext): Promise<SettingsLayer[]> {
    const key = InvalidatedCache.key(
      context.type === "system" ? "" : context.instanceId,
      category,
      context.type,
      context.type === "org" || context.type === "project" ? context.orgId : "",
    );
    return this.cache.through(key, () => settingsLayers(this.db, category, context));
  }

  invalidate(): void {
    this.cache.invalidate();
  }
}
