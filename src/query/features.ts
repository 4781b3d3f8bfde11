import { SETTINGS } from "../domain/settings/events.ts";
import { FEATURES, type FeatureFlag, featureDefaults, featureFlags } from "../domain/settings/features.ts";
import { FailedPreconditionError } from "../errors.ts";
import type { EventStore } from "../eventstore/eventstore.ts";
import type { Queryable } from "../storage/database.ts";
import { resolveSetting, settingsLayers } from "./settings.ts";

/**
 * The feature flags in force for an instance (system defaults overridden by the instance), cached per
 * instance: settings changes clear the cache (other processes' when their notification arrives), entries
 * expire after `ttlMs` in any case.
 */
export class FeatureGate {
  private readonly cache = new Map<
    string,
    { flags: Promise<Record<FeatureFlag, boolean>>; expires: number }
  >();

  constructor(
    private readonly db: Queryable,
    eventStore: EventStore,
    private readonly ttlMs = 5_000,
  ) {
    eventStore.onCommitted((events) => {
      if (events.some((e) => e.aggregateType === SETTINGS && e.payload?.category === FEATURES))
        this.cache.clear();
    });
    eventStore.onStale(() => this.cache.clear());
  }

  flags(instanceId: string): Promise<Record<FeatureFlag, boolean>> {
    const cached = this.cache.get(instanceId);
    if (cached && cached.expires > Date.now()) return cached.flags;
    const flags = settingsLayers(this.db, FEATURES, { type: "instance", instanceId }).then((layers) => {
      const owner = { type: 2 as const, id: instanceId };
      return Object.fromEntries(
        featureFlags.map((flag) => [
          flag,
          resolveSetting(layers, flag, owner, featureDefaults[flag]).value === true,
        ]),
      ) as Record<FeatureFlag, boolean>;
    });
    this.cache.set(instanceId, { flags, expires: Date.now() + this.ttlMs });
    flags.catch(() => this.cache.delete(instanceId));
    return flags;
  }

  /** FAILED_PRECONDITION naming the flag unless every flag is on in the instance. */
  async require(instanceId: string, ...required: FeatureFlag[]): Promise<void> {
    const flags = await this.flags(instanceId);
    for (const flag of required) {
      if (!flags[flag]) {
        throw new FailedPreconditionError(
          `feature "${flag}" is disabled for this instance; enable it with PATCH /settings/v3alpha/features`,
        );
      }
    }
  }
}
