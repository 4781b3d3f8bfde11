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
 * The settings layers the login pages read on every request (language, login and branding settings), and
 * what the pages derive from them (the branding), cached per
 * category and context: a sign-in shows four pages, each read them from the database before. Any event of
 * settings, organizations or instances (whose removal removes their settings) drops the whole cache at once, in this process when it commits (so a change is seen by the next
 * page: read-your-writes) and in the other processes when its notification arrives
 * (../query/invalidated-cache.ts); entries expire after `ttlMs` in any case.
 */
export class SettingsLayerCache {
  private readonly cache: InvalidatedCache<SettingsLayer[]>;
  /**
   * What pages derive from a context's layers (the branding with its stylesheet), kept per context and
   * cleared with the layers: a page computes it at most once per change.
   */
  private readonly derivedCache: InvalidatedCache<unknown>;

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
    this.derivedCache = new InvalidatedCache({
      ttlMs,
      max: SETTINGS_CACHE_MAX,
      eventStore,
      staleBy: (e) => (INVALIDATING.has(e.aggregateType) ? "all" : undefined),
    });
  }

  private static keyOf(category: string, context: ResolvedContext): string {
    return InvalidatedCache.key(
      context.type === "system" ? "" : context.instanceId,
      category,
      context.type,
      context.type === "org" || context.type === "project" ? context.orgId : "",
    );
  }

  /** `derive`'s answer for the layers of a category in a context, computed once until they change. */
  derived<T>(category: string, context: ResolvedContext, derive: (layers: SettingsLayer[]) => T): Promise<T> {
    return this.derivedCache.through(SettingsLayerCache.keyOf(category, context), async () =>
      derive(await this.layers(category, context)),
    ) as Promise<T>;
  }

  layers(category: string, context: ResolvedContext): Promise<SettingsLayer[]> {
    return this.cache.through(SettingsLayerCache.keyOf(category, context), () =>
      settingsLayers(this.db, category, context),
    );
  }

  invalidate(): void {
    this.cache.invalidate();
    this.derivedCache.invalidate();
  }
}
