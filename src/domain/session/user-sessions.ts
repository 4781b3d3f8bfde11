/**
 * What a password change does to the user's sessions: it ends them, all but the one the change was made
 * from when the person chose to stay signed in there. A password that someone else knew (the reason to
 * change it, often) then no longer keeps that someone signed in anywhere.
 *
 * The sessions end with `session.terminated` in the transaction of the change itself, so the change and
 * the sign-outs commit together or not at all; ending a session revokes the access and refresh tokens
 * issued from it and voids its codes in that transaction (src/oidc/session-tokens.ts). Every path that
 * sets a password appends these: the users API's `_set_password` (with the current password, a code, or
 * by an administrator), the login UI's account page, its required password change, its reset and
 * invitation pages.
 */
import { lastSequenceSql } from "../../eventstore/eventstore.ts";
import type { CommandTx, NewEvent } from "../../eventstore/types.ts";
import { UserEvent } from "../user/events.ts";
import { SESSION, SessionEvent } from "./events.ts";
import { sessionEvent } from "./state.ts";

/**
 * The events that end the sessions of each user whose password `events` change (all but `keep`), read
 * from the sessions read model in the command's transaction. Each session's version (read in the same
 * statement) is made the expected one, so a session changed meanwhile (e.g. ended by a sign-out) makes the
 * command run again instead of ending it twice.
 */
export async function endSessionsOnPasswordChange(
  tx: CommandTx,
  instanceId: string,
  events: readonly NewEvent[],
  keep?: string,
): Promise<NewEvent[]> {
  const userIds = [
    ...new Set(events.filter((e) => e.type === UserEvent.passwordChanged).map((e) => e.aggregateId)),
  ];
  if (userIds.length === 0) return [];
  const rows = await tx.query<{ id: string; org_id: string; sequence: number | string }>(
    `SELECT s.id, s.org_id, COALESCE((${lastSequenceSql("s.instance_id", "$3", "s.id")}), 0) AS sequence
       FROM sessions s WHERE s.instance_id = $1 AND s.user_id = ANY($2::text[]) ORDER BY s.id`,
    [instanceId, userIds, SESSION],
  );
  const ended: NewEvent[] = [];
  for (const row of rows) {
    if (row.id === keep) continue;
    tx.expectAt(SESSION, row.id, Number(row.sequence), instanceId);
    ended.push(sessionEvent(row.id, row.org_id, SessionEvent.terminated, null));
  }
  return ended;
}
