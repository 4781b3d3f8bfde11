/**
 * The move of a browser to a new `platform_ua` value at a sign-in (`Login.adoptUserAgent`): what was bound
 * to the old value's hash is bound to the new one's, in one transaction.
 */
import { SESSION, SessionEvent } from "../domain/session/events.ts";
import { sessionEvent } from "../domain/session/state.ts";
import { type EventStore, lastSequenceSql } from "../eventstore/eventstore.ts";

/**
 * Moves the browser's sessions (`session.user_agent.changed`, each at its current version), its auth
 * requests and its sign-ins at identity providers in progress from the user agent hash `from` to `to`.
 */
export async function moveUserAgent(
  eventStore: EventStore,
  instanceId: string,
  from: string,
  to: string,
): Promise<void> {
  await eventStore.push({ instanceId, creator: "system" }, async (tx) => {
    await tx.query(
      "UPDATE auth_requests SET user_agent_hash = $3 WHERE instance_id = $1 AND user_agent_hash = $2",
      [instanceId, from, to],
    );
    await tx.query(
      "UPDATE login_idp_intents SET user_agent_hash = $3 WHERE instance_id = $1 AND user_agent_hash = $2",
      [instanceId, from, to],
    );
    const rows = await tx.query<{ id: string; org_id: string; sequence: number | string }>(
      `SELECT s.id, s.org_id, COALESCE((${lastSequenceSql("s.instance_id", "$3", "s.id")}), 0) AS sequence
         FROM sessions s WHERE s.instance_id = $1 AND s.user_agent_hash = $2 ORDER BY s.id`,
      [instanceId, from, SESSION],
    );
    return rows.map((row) => {
      tx.expectAt(SESSION, row.id, Number(row.sequence), instanceId);
      return sessionEvent(row.id, row.org_id, SessionEvent.userAgentChanged, { user_agent_hash: to });
    });
  });
}
