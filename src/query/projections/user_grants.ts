import { USER_GRANT, UserGrantEvent } from "../../domain/usergrant/events.ts";
import type { Projection, StoredEvent } from "../../eventstore/types.ts";
import type { Queryable } from "../../storage/database.ts";

async function setRoles(tx: Queryable, e: StoredEvent) {
  await tx.query(
    "UPDATE user_grants SET role_keys = $3, changed_at = $4, sequence = $5 WHERE instance_id = $1 AND id = $2",
    [e.instanceId, e.aggregateId, e.payload!.role_keys, e.createdAt, e.sequence],
  );
}

async function remove(tx: Queryable, e: StoredEvent) {
  await tx.query("DELETE FROM user_grants WHERE instance_id = $1 AND id = $2", [e.instanceId, e.aggregateId]);
}

/** User grants; removals and narrowings by cascades are events of the grants themselves. */
export const userGrantsProjection: Projection = {
  name: "user_grants",
  tables: ["user_grants"],
  aggregateTypes: [USER_GRANT],
  handlers: {
    [UserGrantEvent.added]: async (tx, e) => {
      const p = e.payload!;
      await tx.query(
        `INSERT INTO user_grants (instance_id, id, user_id, project_id, project_grant_id, org_id, role_keys, created_at, changed_at, sequence)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8, $9)`,
        [
          e.instanceId,
          e.aggregateId,
          p.user_id,
          p.project_id,
          p.project_grant_id ?? null,
          e.resourceOwner,
          p.role_keys,
          e.createdAt,
          e.sequence,
        ],
      );
    },
    [UserGrantEvent.changed]: setRoles,
    [UserGrantEvent.cascadeChanged]: setRoles,
    [UserGrantEvent.removed]: remove,
    [UserGrantEvent.cascadeRemoved]: remove,
  },
};
