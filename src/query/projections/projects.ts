import { PROJECT, ProjectEvent } from "../../domain/project/events.ts";
import type { Projection } from "../../eventstore/types.ts";

export const projectsProjection: Projection = {
  name: "projects",
  tables: ["projects"],
  aggregateTypes: [PROJECT],
  handlers: {
    [ProjectEvent.added]: async (tx, e) => {
      await tx.query(
        `INSERT INTO projects (instance_id, id, org_id, name, role_assertion, role_check, created_at, changed_at, sequence)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $7, $8)`,
        [
          e.instanceId,
          e.aggregateId,
          e.resourceOwner,
          e.payload!.name,
          e.payload!.project_role_assertion === true,
          e.payload!.project_role_check === true,
          e.createdAt,
          e.sequence,
        ],
      );
    },
    [ProjectEvent.removed]: async (tx, e) => {
      await tx.query("DELETE FROM projects WHERE instance_id = $1 AND id = $2", [
        e.instanceId,
        e.aggregateId,
      ]);
    },
  },
};
