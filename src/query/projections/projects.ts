import { PROJECT, ProjectEvent, ProjectGrantState } from "../../domain/project/events.ts";
import type { Projection, StoredEvent } from "../../eventstore/types.ts";
import type { Queryable } from "../../storage/database.ts";

/** Updates the project grant of the event with `set` (and its version). */
async function updateGrant(tx: Queryable, e: StoredEvent, set: string, values: unknown[]) {
  await tx.query(
    `UPDATE project_grants SET ${set}, changed_at = $3, sequence = $4
     WHERE instance_id = $1 AND id = $2`,
    [e.instanceId, e.payload!.grant_id, e.createdAt, e.sequence, ...values],
  );
}

async function removeGrant(tx: Queryable, e: StoredEvent) {
  await tx.query("DELETE FROM project_grants WHERE instance_id = $1 AND id = $2", [
    e.instanceId,
    e.payload!.grant_id,
  ]);
}

/**
 * Projects with their roles and project grants (the applications: apps.ts). Every row carries the
 * project aggregate's sequence of its own last event.
 */
export const projectsProjection: Projection = {
  name: "projects",
  tables: ["projects", "project_roles", "project_grants"],
  aggregateTypes: [PROJECT],
  handlers: {
    [ProjectEvent.added]: async (tx, e) => {
      await tx.query(
        `INSERT INTO projects (instance_id, id, org_id, name, role_assertion, role_check, private_labeling_setting,
           created_at, changed_at, sequence)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8, $9)`,
        [
          e.instanceId,
          e.aggregateId,
          e.resourceOwner,
          e.payload!.name,
          e.payload!.project_role_assertion === true,
          e.payload!.project_role_check === true,
          Number(e.payload!.private_labeling_setting ?? 0),
          e.createdAt,
          e.sequence,
        ],
      );
    },
    [ProjectEvent.changed]: async (tx, e) => {
      const p = e.payload!;
      await tx.query(
        `UPDATE projects SET name = coalesce($3, name), role_assertion = coalesce($4, role_assertion),
           role_check = coalesce($5, role_check),
           private_labeling_setting = coalesce($8::smallint, private_labeling_setting), changed_at = $6, sequence = $7
         WHERE instance_id = $1 AND id = $2`,
        [
          e.instanceId,
          e.aggregateId,
          p.name ?? null,
          p.project_role_assertion ?? null,
          p.project_role_check ?? null,
          e.createdAt,
          e.sequence,
          p.private_labeling_setting ?? null,
        ],
      );
    },
    [ProjectEvent.removed]: async (tx, e) => {
      for (const table of ["project_roles", "project_grants"]) {
        await tx.query(`DELETE FROM ${table} WHERE instance_id = $1 AND project_id = $2`, [
          e.instanceId,
          e.aggregateId,
        ]);
      }
      await tx.query("DELETE FROM projects WHERE instance_id = $1 AND id = $2", [
        e.instanceId,
        e.aggregateId,
      ]);
    },

    [ProjectEvent.roleAdded]: async (tx, e) => {
      await tx.query(
        `INSERT INTO project_roles (instance_id, project_id, key, org_id, display_name, group_name, created_at, changed_at, sequence)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $7, $8)`,
        [
          e.instanceId,
          e.aggregateId,
          e.payload!.key,
          e.resourceOwner,
          e.payload!.display_name,
          e.payload!.group ?? "",
          e.createdAt,
          e.sequence,
        ],
      );
    },
    [ProjectEvent.roleChanged]: async (tx, e) => {
      await tx.query(
        `UPDATE project_roles SET display_name = coalesce($4, display_name), group_name = coalesce($5, group_name),
           changed_at = $6, sequence = $7
         WHERE instance_id = $1 AND project_id = $2 AND key = $3`,
        [
          e.instanceId,
          e.aggregateId,
          e.payload!.key,
          e.payload!.display_name ?? null,
          e.payload!.group ?? null,
          e.createdAt,
          e.sequence,
        ],
      );
    },
    [ProjectEvent.roleRemoved]: async (tx, e) => {
      await tx.query("DELETE FROM project_roles WHERE instance_id = $1 AND project_id = $2 AND key = $3", [
        e.instanceId,
        e.aggregateId,
        e.payload!.key,
      ]);
    },

    [ProjectEvent.grantAdded]: async (tx, e) => {
      await tx.query(
        `INSERT INTO project_grants (instance_id, id, project_id, org_id, granted_org_id, role_keys, state, created_at, changed_at, sequence)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8, $9)`,
        [
          e.instanceId,
          e.payload!.grant_id,
          e.aggregateId,
          e.resourceOwner,
          e.payload!.granted_org_id,
          e.payload!.role_keys,
          ProjectGrantState.active,
          e.createdAt,
          e.sequence,
        ],
      );
    },
    [ProjectEvent.grantChanged]: (tx, e) => updateGrant(tx, e, "role_keys = $5", [e.payload!.role_keys]),
    [ProjectEvent.grantCascadeChanged]: (tx, e) =>
      updateGrant(tx, e, "role_keys = $5", [e.payload!.role_keys]),
    [ProjectEvent.grantDeactivated]: (tx, e) =>
      updateGrant(tx, e, "state = $5", [ProjectGrantState.inactive]),
    [ProjectEvent.grantReactivated]: (tx, e) => updateGrant(tx, e, "state = $5", [ProjectGrantState.active]),
    [ProjectEvent.grantRemoved]: removeGrant,
    [ProjectEvent.grantCascadeRemoved]: removeGrant,
  },
};
