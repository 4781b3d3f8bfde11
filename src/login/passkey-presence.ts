/**
 * Whether anyone in an instance has an active passkey: the login-name page offers the passkeys in the
 * name's autofill (and stores a challenge for it) only then. Asked on every view of that page, so the
 * answer is kept per instance until an event that can change it (a passkey verified or removed, a user or
 * an organization removed) commits here or in another process, and for 5 s at most.
 */

import { ORG, OrgEvent } from "../domain/org/events.ts";
import { USER, UserEvent } from "../domain/user/events.ts";
import type { EventStore } from "../eventstore/eventstore.ts";
import { InvalidatedCache } from "../query/invalidated-cache.ts";
import { FactorState } from "../query/user-factors.ts";
import type { Queryable } from "../storage/database.ts";

const CHANGING = new Set<string>([UserEvent.passkeyVerified, UserEvent.passkeyRemoved, UserEvent.removed]);

export class PasskeyPresence {
  private readonly cache: InvalidatedCache<boolean>;

  constructor(
    private readonly db: Queryable,
    eventStore: EventStore,
  ) {
    this.cache = new InvalidatedCache({
      ttlMs: 5_000,
      max: 10_000,
      eventStore,
      staleBy: (event) =>
        (event.aggregateType === USER && CHANGING.has(event.type)) ||
        (event.aggregateType === ORG && event.type === OrgEvent.removed)
          ? { scope: event.instanceId }
          : undefined,
    });
  }

  /** Whether any user of `instanceId` has an active passkey (a discoverable credential to offer). */
  has(instanceId: string): Promise<boolean> {
    return this.cache.through(InvalidatedCache.key(instanceId), async () => {
      const rows = await this.db.query<{ found: boolean }>(
        `SELECT EXISTS (SELECT 1 FROM user_factors WHERE instance_id = $1 AND type = 'passkey' AND state = ${FactorState.active}) AS found`,
        [instanceId],
      );
      return rows[0]?.found === true;
    });
  }
}
