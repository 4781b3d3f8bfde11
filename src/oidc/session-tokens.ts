import { SESSION, SessionEvent } from "../domain/session/events.ts";
import { USER, UserEvent } from "../domain/user/events.ts";
import type { EventStore } from "../eventstore/eventstore.ts";
import type { StoredEvent } from "../eventstore/types.ts";
import type { Queryable } from "../storage/database.ts";
import type { TokenStore } from "./token-store.ts";

/** What one append ends, per instance. */
interface Ending {
  sessionIds: Set<string>;
  removedUserIds: string[];
}

function endings(events: StoredEvent[]): Map<string, Ending> {
  const byInstance = new Map<string, Ending>();
  const of = (instanceId: string) => {
    let ending = byInstance.get(instanceId);
    if (!ending) {
      ending = { sessionIds: new Set(), removedUserIds: [] };
      byInstance.set(instanceId, ending);
    }
    return ending;
  };
  for (const e of events) {
    if (e.aggregateType === SESSION && e.type === SessionEvent.terminated)
      of(e.instanceId).sessionIds.add(e.aggregateId);
    else if (e.aggregateType === USER && e.type === UserEvent.removed)
      of(e.instanceId).removedUserIds.push(e.aggregateId);
  }
  return byInstance;
}

/**
 * The OAuth tokens of a browser session end with it, whatever ends it: end_session, the login UI's sign-out,
 * DELETE /sessions/{id} (all `session.terminated`), or the removal of its user (`user.removed`, also appended
 * for every user of a removed organization), whose sessions the sessions projection deletes. In the
 * transaction of those events — before the projections, while the sessions read model still names the removed
 * users' sessions — the access and refresh tokens issued from the sessions are revoked and their authorization
 * codes not yet redeemed voided; so they end with the event or not at all, and no endpoint has to remember
 * to. Once committed, this process's caches of verified tokens drop them (`TokenStore.revoked`); other
 * processes' caches expire (the management APIs': 2 s).
 */
export function endTokensWithSessions(eventStore: EventStore, tokens: TokenStore): void {
  eventStore.onAppending(async (tx: Queryable, events) => {
    for (const [instanceId, ending] of endings(events)) {
      if (ending.removedUserIds.length > 0) {
        const rows = await tx.query<{ id: string }>(
          "SELECT id FROM sessions WHERE instance_id = $1 AND user_id = ANY($2::text[])",
          [instanceId, ending.removedUserIds],
        );
        for (const row of rows) ending.sessionIds.add(row.id);
      }
      await tokens.revokeSessions(tx, instanceId, [...ending.sessionIds]);
    }
  });
  eventStore.onCommitted((events) => {
    for (const [instanceId, ending] of endings(events)) {
      tokens.revoked({
        instanceId,
        sessionIds: [...ending.sessionIds],
        ...(ending.removedUserIds.length > 0 ? { userIds: ending.removedUserIds } : {}),
      });
    }
  });
}
