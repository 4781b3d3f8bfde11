import { ContextType, MEMBERSHIP, MembershipEvent } from "../../domain/membership/events.ts";
import type { Projection } from "../../eventstore/types.ts";

export const membershipsProjection: Projection = {
  name: "memberships",
  tables: ["memberships"],
  aggregateTypes: [MEMBERSHIP],
  handlers: {
    [MembershipEvent.added]: async (tx, e) => {
      await tx.query(
        `INSERT INTO memberships (instance_id, id, context_type, context_id, user_id, roles, created_at, changed_at, sequence, org_id)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $7, $8, $9)`,
        [
          e.instanceId,
          e.aggregateId,
          e.payload!.context_type,
          e.payload!.context_id,
          e.payload!.user_id,
          e.payload!.roles,
          e.createdAt,
          e.sequence,
          // Organization and project memberships belong to an organization (their resource owner).
          e.payload!.context_type === ContextType.instance ? null : e.resourceOwner,
        ],
      );
    },
    [MembershipEvent.changed]: async (tx, e) => {
      await tx.query(
        "UPDATE memberships SET roles = $3, changed_at = $4, sequence = $5 WHERE instance_id = $1 AND id = $2",
        [e.instanceId, e.aggregateId, e.payload!.roles, e.createdAt, e.sequence],
      );
    },
    [MembershipEvent.removed]: async (tx, e) => {
      await tx.query("DELETE FROM memberships WHERE instance_id = $1 AND id = $2", [
        e.instanceId,
        e.aggregateId,
      ]);
    },
  },
};
