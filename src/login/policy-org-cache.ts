import { MEMBERSHIP } from "../domain/membership/events.ts";
import type { EventStore } from "../eventstore/eventstore.ts";
import { InvalidatedCache } from "../query/invalidated-cache.ts";
import { type PolicyUser, policyOrgOf } from "../query/login-policy.ts";
import type { Queryable } from "../storage/database.ts";

/** Users kept at most. */
const POLICY_ORG_CACHE_MAX = 10_000;

const scopeOf = (instanceId: string, userId: string) => `${instanceId}/${userId}`;

/**
 * Which organization's login policy governs a user's sign-in in the login UI (`policyOrgOf`: its own, or
 * none — the instance's — for an account above its organization's owners), cached per user: a sign-in asks
 * on each of its pages. The answer depends on the user's memberships, so every membership event of the
 * user drops it, in this process when it commits (a role given counts at the next page) and in the other
 * processes when its notification arrives (../query/invalidated-cache.ts); answers expire after `ttlMs`
 * in any case.
 */
export class PolicyOrgCache {
  private readonly cache: InvalidatedCache<string | undefined>;

  constructor(
    private readonly db: Queryable,
    eventStore: EventStore,
    ttlMs = 5_000,
  ) {
    this.cache = new InvalidatedCache({
      ttlMs,
      max: POLICY_ORG_CACHE_MAX,
      eventStore,
      staleBy: (e) => {
        if (e.aggregateType !== MEMBERSHIP) return undefined;
        const userId = e.payload?.user_id;
        return typeof userId === "string" ? { scope: scopeOf(e.instanceId, userId) } : "all";
      },
    });
  }

  orgOf(instanceId: string, user: PolicyUser): Promise<string | undefined> {
    const key = InvalidatedCache.key(scopeOf(instanceId, user.userId), user.orgId);
    return this.cache.through(key, () => policyOrgOf(this.db, instanceId, user));
  }
}
