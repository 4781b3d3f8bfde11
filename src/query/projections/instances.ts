import { INSTANCE, InstanceEvent, type InstanceLimitsPayload } from "../../domain/instance/events.ts";
import type { Projection } from "../../eventstore/types.ts";

const touch = "changed_at = $2, sequence = $3";

export const instancesProjection: Projection = {
  name: "instances",
  tables: ["instances", "instance_domains"],
  aggregateTypes: [INSTANCE],
  handlers: {
    [InstanceEvent.added]: async (tx, e) => {
      await tx.query(
        "INSERT INTO instances (id, name, created_at, changed_at, sequence) VALUES ($1, $2, $3, $3, $4)",
        [e.aggregateId, e.payload!.name, e.createdAt, e.sequence],
      );
    },
    [InstanceEvent.changed]: async (tx, e) => {
      await tx.query(`UPDATE instances SET name = coalesce($4, name), ${touch} WHERE id = $1`, [
        e.aggregateId,
        e.createdAt,
        e.sequence,
        e.payload!.name ?? null,
      ]);
    },
    [InstanceEvent.limitsSet]: async (tx, e) => {
      const p = e.payload as InstanceLimitsPayload;
      await tx.query(
        `UPDATE instances SET
           blocked = CASE WHEN $4::boolean IS NULL THEN blocked ELSE $4::boolean END,
           audit_log_retention_seconds = CASE WHEN $5::boolean THEN $6::bigint ELSE audit_log_retention_seconds END,
           ${touch}
         WHERE id = $1`,
        [
          e.aggregateId,
          e.createdAt,
          e.sequence,
          p.block ?? null,
          p.audit_log_retention_seconds !== undefined,
          p.audit_log_retention_seconds ?? null,
        ],
      );
    },
    [InstanceEvent.domainAdded]: async (tx, e) => {
      await tx.query(
        "INSERT INTO instance_domains (domain, instance_id, is_generated, created_at) VALUES ($1, $2, $3, $4)",
        [String(e.payload!.domain).toLowerCase(), e.aggregateId, e.payload!.generated === true, e.createdAt],
      );
      await tx.query(`UPDATE instances SET ${touch} WHERE id = $1`, [e.aggregateId, e.createdAt, e.sequence]);
    },
    // which app is the console's is read from the event itself (src/query/console.ts): only the version
    [InstanceEvent.consoleSet]: async (tx, e) => {
      await tx.query(`UPDATE instances SET ${touch} WHERE id = $1`, [e.aggregateId, e.createdAt, e.sequence]);
    },
    [InstanceEvent.domainPrimarySet]: async (tx, e) => {
      await tx.query("UPDATE instance_domains SET is_primary = (domain = $2) WHERE instance_id = $1", [
        e.aggregateId,
        String(e.payload!.domain).toLowerCase(),
      ]);
      await tx.query(`UPDATE instances SET ${touch} WHERE id = $1`, [e.aggregateId, e.createdAt, e.sequence]);
    },
    [InstanceEvent.domainRemoved]: async (tx, e) => {
      await tx.query("DELETE FROM instance_domains WHERE instance_id = $1 AND domain = $2", [
        e.aggregateId,
        String(e.payload!.domain).toLowerCase(),
      ]);
      await tx.query(`UPDATE instances SET ${touch} WHERE id = $1`, [e.aggregateId, e.createdAt, e.sequence]);
    },
    [InstanceEvent.defaultOrgSet]: async (tx, e) => {
      await tx.query(`UPDATE instances SET default_org_id = $4, ${touch} WHERE id = $1`, [
        e.aggregateId,
        e.createdAt,
        e.sequence,
        e.payload!.org_id,
      ]);
    },
    [InstanceEvent.iamProjectSet]: async (tx, e) => {
      await tx.query(`UPDATE instances SET iam_project_id = $4, ${touch} WHERE id = $1`, [
        e.aggregateId,
        e.createdAt,
        e.sequence,
        e.payload!.project_id,
      ]);
    },
    [InstanceEvent.removed]: async (tx, e) => {
      await tx.query("DELETE FROM instance_domains WHERE instance_id = $1", [e.aggregateId]);
      // Secrets do not outlive their instance (the other read-model rows become unreachable).
      await tx.query("DELETE FROM action_target_signing_keys WHERE instance_id = $1", [e.aggregateId]);
      for (const table of [
        "oidc_signing_keys",
        "oidc_signing_key_secrets",
        "oidc_access_tokens",
        "oidc_refresh_tokens",
        "oidc_authorization_codes",
        "oidc_used_assertions",
        "branding_assets",
      ]) {
        await tx.query(`DELETE FROM ${table} WHERE instance_id = $1`, [e.aggregateId]);
      }
      await tx.query("DELETE FROM instances WHERE id = $1", [e.aggregateId]);
    },
  },
};
