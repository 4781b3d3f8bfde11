import { INSTANCE, InstanceEvent } from "../../domain/instance/events.ts";
import {
  type ApiConfig,
  AppKind,
  type OidcConfig,
  PROJECT,
  ProjectEvent,
} from "../../domain/project/events.ts";
import type { Projection, StoredEvent } from "../../eventstore/types.ts";
import type { Queryable } from "../../storage/database.ts";

/** The OIDC configuration columns, in this order, and their values of a config. */
const OIDC_COLUMNS = [
  "redirect_uris",
  "post_logout_redirect_uris",
  "response_types",
  "grant_types",
  "app_type",
  "access_token_type",
  "access_token_role_assertion",
  "id_token_role_assertion",
  "id_token_userinfo_assertion",
  "dev_mode",
  "clock_skew_ns",
] as const;

const oidcValues = (c: OidcConfig): unknown[] => [
  c.redirect_uris,
  c.post_logout_redirect_uris,
  c.response_types,
  c.grant_types,
  c.app_type,
  c.access_token_type,
  c.access_token_role_assertion,
  c.id_token_role_assertion,
  c.id_token_userinfo_assertion,
  c.dev_mode,
  c.clock_skew_ns,
];

async function insertApp(tx: Queryable, e: StoredEvent, kind: number) {
  const p = e.payload!;
  const base = [
    e.instanceId,
    p.app_id,
    e.aggregateId,
    e.resourceOwner,
    p.name,
    kind,
    p.client_id,
    p.secret_hash ?? null,
    (p.config as ApiConfig).auth_method,
    e.createdAt,
    e.sequence,
  ];
  const columns =
    "instance_id, id, project_id, org_id, name, type, client_id, client_secret_hash, auth_method, created_at, changed_at, sequence";
  const placeholders = "$1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10, $11";
  if (kind === AppKind.oidc) {
    const values = oidcValues(p.config as OidcConfig);
    await tx.query(
      `INSERT INTO apps (${columns}, ${OIDC_COLUMNS.join(", ")})
       VALUES (${placeholders}, ${values.map((_, i) => `$${i + 12}`).join(", ")})`,
      [...base, ...values],
    );
  } else {
    await tx.query(`INSERT INTO apps (${columns}) VALUES (${placeholders})`, base);
  }
}

/** Updates the app of the event with `set` (parameters from $5) and its version. */
async function updateApp(tx: Queryable, e: StoredEvent, set: string, values: unknown[]) {
  await tx.query(
    `UPDATE apps SET ${set}, changed_at = $3, sequence = $4 WHERE instance_id = $1 AND id = $2`,
    [e.instanceId, e.payload!.app_id, e.createdAt, e.sequence, ...values],
  );
}

/**
 * OIDC and API applications with their keys (events of the project aggregate). Apps and keys end with
 * their project and with their instance.
 */
export const appsProjection: Projection = {
  name: "apps",
  tables: ["apps", "app_keys"],
  aggregateTypes: [PROJECT, INSTANCE],
  handlers: {
    [ProjectEvent.oidcAppAdded]: (tx, e) => insertApp(tx, e, AppKind.oidc),
    [ProjectEvent.apiAppAdded]: (tx, e) => insertApp(tx, e, AppKind.api),
    [ProjectEvent.appChanged]: (tx, e) => updateApp(tx, e, "name = $5", [e.payload!.name]),
    [ProjectEvent.oidcConfigChanged]: (tx, e) => {
      const config = e.payload!.config as OidcConfig;
      const values = oidcValues(config);
      return updateApp(
        tx,
        e,
        `auth_method = $5, ${OIDC_COLUMNS.map((c, i) => `${c} = $${i + 6}`).join(", ")}`,
        [config.auth_method, ...values],
      );
    },
    [ProjectEvent.apiConfigChanged]: (tx, e) =>
      updateApp(tx, e, "auth_method = $5", [(e.payload!.config as ApiConfig).auth_method]),
    [ProjectEvent.appSecretChanged]: (tx, e) =>
      updateApp(tx, e, "client_secret_hash = $5", [e.payload!.secret_hash]),
    [ProjectEvent.appSecretRemoved]: (tx, e) => updateApp(tx, e, "client_secret_hash = $5", [null]),
    [ProjectEvent.appKeyAdded]: async (tx, e) => {
      const p = e.payload!;
      await tx.query(
        `INSERT INTO app_keys (instance_id, id, app_id, project_id, public_key, expires_at, created_at, sequence)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
        [
          e.instanceId,
          p.key_id,
          p.app_id,
          e.aggregateId,
          p.public_key,
          p.expiration ?? null,
          e.createdAt,
          e.sequence,
        ],
      );
    },
    [ProjectEvent.appKeyRemoved]: async (tx, e) => {
      await tx.query("DELETE FROM app_keys WHERE instance_id = $1 AND id = $2", [
        e.instanceId,
        e.payload!.key_id,
      ]);
    },
    [ProjectEvent.appRemoved]: async (tx, e) => {
      await tx.query("DELETE FROM app_keys WHERE instance_id = $1 AND app_id = $2", [
        e.instanceId,
        e.payload!.app_id,
      ]);
      await tx.query("DELETE FROM apps WHERE instance_id = $1 AND id = $2", [
        e.instanceId,
        e.payload!.app_id,
      ]);
    },
    [ProjectEvent.removed]: async (tx, e) => {
      for (const table of ["app_keys", "apps"]) {
        await tx.query(`DELETE FROM ${table} WHERE instance_id = $1 AND project_id = $2`, [
          e.instanceId,
          e.aggregateId,
        ]);
      }
    },
    // Client IDs of a removed instance must not authenticate anything, whatever looks them up.
    [InstanceEvent.removed]: async (tx, e) => {
      for (const table of ["app_keys", "apps"]) {
        await tx.query(`DELETE FROM ${table} WHERE instance_id = $1`, [e.aggregateId]);
      }
    },
  },
};
