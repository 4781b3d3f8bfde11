import { ORG, type OrgDomainAddedPayload, OrgEvent } from "../../domain/org/events.ts";
import type { EventHandler, Projection } from "../../eventstore/types.ts";

const touch = "changed_at = $3, sequence = $4";

/** Bumps the org's version (and that of the event's domain row, when `domain` is given). */
async function touchOrg(tx: Parameters<EventHandler>[0], e: Parameters<EventHandler>[1], domain?: string) {
  await tx.query(`UPDATE orgs SET ${touch} WHERE instance_id = $1 AND id = $2`, [
    e.instanceId,
    e.aggregateId,
    e.createdAt,
    e.sequence,
  ]);
  if (domain !== undefined)
    await tx.query(`UPDATE org_domains SET ${touch} WHERE instance_id = $1 AND org_id = $2 AND domain = $5`, [
      e.instanceId,
      e.aggregateId,
      e.createdAt,
      e.sequence,
      domain,
    ]);
}

const domainOf = (e: Parameters<EventHandler>[1]) => String(e.payload!.domain).toLowerCase();

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
      const p = e.payload as unknown as OrgDomainAddedPayload;
      const domain = p.domain.toLowerCase();
      await tx.query(
        `INSERT INTO org_domains (instance_id, org_id, domain, id, is_generated, validation_token, created_at, changed_at, sequence)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $7, $8)`,
        [
          e.instanceId,
          e.aggregateId,
          domain,
          p.domain_id ?? domain,
          p.generated === true,
          p.validation_token ?? "",
          e.createdAt,
          e.sequence,
        ],
      );
      await touchOrg(tx, e);
    },
    [OrgEvent.domainVerified]: async (tx, e) => {
      await tx.query(
        `UPDATE org_domains SET is_verified = true, validation_type = $4
         WHERE instance_id = $1 AND org_id = $2 AND domain = $3`,
        [e.instanceId, e.aggregateId, domainOf(e), Number(e.payload!.validation_type ?? 0)],
      );
      await touchOrg(tx, e, domainOf(e));
    },
    [OrgEvent.domainPrimarySet]: async (tx, e) => {
      await tx.query(
        "UPDATE org_domains SET is_primary = (domain = $3) WHERE instance_id = $1 AND org_id = $2",
        [e.instanceId, e.aggregateId, domainOf(e)],
      );
      await tx.query(`UPDATE orgs SET primary_domain = $5, ${touch} WHERE instance_id = $1 AND id = $2`, [
        e.instanceId,
        e.aggregateId,
        e.createdAt,
        e.sequence,
        domainOf(e),
      ]);
      await touchOrg(tx, e, domainOf(e));
    },
    [OrgEvent.domainRemoved]: async (tx, e) => {
      await tx.query("DELETE FROM org_domains WHERE instance_id = $1 AND org_id = $2 AND domain = $3", [
        e.instanceId,
        e.aggregateId,
        domainOf(e),
      ]);
      await touchOrg(tx, e);
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
