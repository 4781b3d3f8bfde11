import { ORG, OrgEvent } from "../../domain/org/events.ts";
import type { Projection } from "../../eventstore/types.ts";

const touch = "changed_at = $3, sequence = $4";

export const orgsProjection: Projection = {
  name: "orgs",
  tables: ["orgs", "org_domains"],
  aggregateTypes: [ORG],
  handlers: {
    [OrgEvent.added]: async (tx, e) => {
      await tx.query(
        "INSERT INTO orgs (instance_id, id, name, created_at, changed_at, sequence) VALUES ($1, $2, $3, $4, $4, $5)",
        [e.instanceId, e.aggregateId, e.payload!.name, e.createdAt, e.sequence],
      );
    },
    [OrgEvent.changed]: async (tx, e) => {
      await tx.query(
        `UPDATE orgs SET name = coalesce($5, name), ${touch} WHERE instance_id = $1 AND id = $2`,
        [e.instanceId, e.aggregateId, e.createdAt, e.sequence, e.payload!.name ?? null],
      );
    },
    [OrgEvent.domainAdded]: async (tx, e) => {
      await tx.query(
        "INSERT INTO org_domains (instance_id, org_id, domain, created_at) VALUES ($1, $2, $3, $4)",
        [e.instanceId, e.aggregateId, e.payload!.domain, e.createdAt],
      );
      await tx.query(`UPDATE orgs SET ${touch} WHERE instance_id = $1 AND id = $2`, [
        e.instanceId,
        e.aggregateId,
        e.createdAt,
        e.sequence,
      ]);
    },
    [OrgEvent.domainVerified]: async (tx, e) => {
      await tx.query(
        "UPDATE org_domains SET is_verified = true WHERE instance_id = $1 AND org_id = $2 AND domain = $3",
        [e.instanceId, e.aggregateId, e.payload!.domain],
      );
      await tx.query(`UPDATE orgs SET ${touch} WHERE instance_id = $1 AND id = $2`, [
        e.instanceId,
        e.aggregateId,
        e.createdAt,
        e.sequence,
      ]);
    },
    [OrgEvent.domainPrimarySet]: async (tx, e) => {
      await tx.query(
        "UPDATE org_domains SET is_primary = (domain = $3) WHERE instance_id = $1 AND org_id = $2",
        [e.instanceId, e.aggregateId, e.payload!.domain],
      );
      await tx.query(`UPDATE orgs SET primary_domain = $5, ${touch} WHERE instance_id = $1 AND id = $2`, [
        e.instanceId,
        e.aggregateId,
        e.createdAt,
        e.sequence,
        e.payload!.domain,
      ]);
    },
    [OrgEvent.domainRemoved]: async (tx, e) => {
      await tx.query("DELETE FROM org_domains WHERE instance_id = $1 AND org_id = $2 AND domain = $3", [
        e.instanceId,
        e.aggregateId,
        e.payload!.domain,
      ]);
    },
    [OrgEvent.removed]: async (tx, e) => {
      await tx.query("DELETE FROM org_domains WHERE instance_id = $1 AND org_id = $2", [
        e.instanceId,
        e.aggregateId,
      ]);
      await tx.query("DELETE FROM orgs WHERE instance_id = $1 AND id = $2", [e.instanceId, e.aggregateId]);
    },
  },
};
