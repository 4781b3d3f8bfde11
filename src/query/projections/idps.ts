import { IDP, IdpEvent, type IdpFields } from "../../domain/idp/events.ts";
import { INSTANCE, InstanceEvent } from "../../domain/instance/events.ts";
import { ORG, OrgEvent } from "../../domain/org/events.ts";
import type { Projection } from "../../eventstore/types.ts";
import {
  ReusableOwner,
  removeContextPolicies,
  removeResourcePolicies,
  removeStatePolicy,
  type StatePolicy,
  setStatePolicy,
} from "../reusable.ts";

/** Identity providers and their state policies in organizations (tables of migration 0070_idps.sql). */
export const idpsProjection: Projection = {
  name: "idps",
  tables: ["idps", "reusable_state_policies"],
  aggregateTypes: [IDP, ORG, INSTANCE],
  handlers: {
    [IdpEvent.added]: async (tx, e) => {
      const p = e.payload as unknown as IdpFields;
      await tx.query(
        `INSERT INTO idps (instance_id, id, owner_type, owner_id, state, type, name, options, config, created_at,
           changed_at, sequence)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10, $11)`,
        [
          e.instanceId,
          e.aggregateId,
          p.owner_type,
          p.owner_id,
          p.state,
          p.type,
          p.name,
          JSON.stringify(p.options),
          JSON.stringify(p.config),
          e.createdAt,
          e.sequence,
        ],
      );
    },
    [IdpEvent.changed]: async (tx, e) => {
      const p = e.payload as Partial<IdpFields>;
      await tx.query(
        `UPDATE idps SET name = coalesce($3, name), state = coalesce($4, state),
           options = coalesce($5::jsonb, options), config = coalesce($6::jsonb, config),
           changed_at = $7, sequence = $8
         WHERE instance_id = $1 AND id = $2`,
        [
          e.instanceId,
          e.aggregateId,
          p.name ?? null,
          p.state ?? null,
          p.options ? JSON.stringify(p.options) : null,
          p.config ? JSON.stringify(p.config) : null,
          e.createdAt,
          e.sequence,
        ],
      );
    },
    [IdpEvent.statePolicySet]: async (tx, e) => {
      const key = {
        instanceId: e.instanceId,
        resourceType: IDP,
        resourceId: e.aggregateId,
        contextId: String(e.payload!.context_id),
      };
      await setStatePolicy(tx, key, e.payload!.policy as StatePolicy, e.createdAt);
      await touch(tx, e);
    },
    [IdpEvent.statePolicyRemoved]: async (tx, e) => {
      await removeStatePolicy(tx, {
        instanceId: e.instanceId,
        resourceType: IDP,
        resourceId: e.aggregateId,
        contextId: String(e.payload!.context_id),
      });
      await touch(tx, e);
    },
    [IdpEvent.removed]: async (tx, e) => {
      await removeResourcePolicies(tx, e.instanceId, IDP, e.aggregateId);
      await tx.query("DELETE FROM idps WHERE instance_id = $1 AND id = $2", [e.instanceId, e.aggregateId]);
    },
    // An organization's providers and its policies go with it.
    [OrgEvent.removed]: async (tx, e) => {
      await removeContextPolicies(tx, e.instanceId, e.aggregateId);
      const owned = await tx.query<{ id: string }>(
        "DELETE FROM idps WHERE instance_id = $1 AND owner_type = $2 AND owner_id = $3 RETURNING id",
        [e.instanceId, ReusableOwner.org, e.aggregateId],
      );
      for (const { id } of owned) {
        await removeResourcePolicies(tx, e.instanceId, IDP, id);
        // secrets do not outlive their provider
        await tx.query("DELETE FROM idp_client_secrets WHERE instance_id = $1 AND idp_id = $2", [
          e.instanceId,
          id,
        ]);
      }
    },
    // Secrets do not outlive their instance.
    [InstanceEvent.removed]: async (tx, e) => {
      await tx.query("DELETE FROM idp_client_secrets WHERE instance_id = $1", [e.aggregateId]);
      await tx.query("DELETE FROM reusable_state_policies WHERE instance_id = $1", [e.aggregateId]);
      await tx.query("DELETE FROM idps WHERE instance_id = $1", [e.aggregateId]);
    },
  },
};

async function touch(
  tx: Parameters<Projection["handlers"][string]>[0],
  e: Parameters<Projection["handlers"][string]>[1],
): Promise<void> {
  await tx.query("UPDATE idps SET changed_at = $3, sequence = $4 WHERE instance_id = $1 AND id = $2", [
    e.instanceId,
    e.aggregateId,
    e.createdAt,
    e.sequence,
  ]);
}
