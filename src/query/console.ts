import { INSTANCE, InstanceEvent } from "../domain/instance/events.ts";
import type { Queryable } from "../storage/database.ts";

/**
 * The client ID of the instance's administration console app (docs/console.md): the app the instance's
 * last `instance.console.set` names, while it exists; undefined otherwise (the next start adds one).
 */
export async function consoleClientId(db: Queryable, instanceId: string): Promise<string | undefined> {
  const rows = await db.query<{ client_id: string }>(
    `SELECT a.client_id FROM events e
     JOIN apps a ON a.instance_id = e.instance_id AND a.id = e.payload->>'app_id'
     WHERE e.instance_id = $1 AND e.aggregate_type = $2 AND e.aggregate_id = $1 AND e.event_type = $3
     ORDER BY e.sequence DESC LIMIT 1`,
    [instanceId, INSTANCE, InstanceEvent.consoleSet],
  );
  return rows[0]?.client_id;
}
