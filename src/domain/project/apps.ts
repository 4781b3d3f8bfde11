import { newId } from "../../id.ts";
import type { Queryable } from "../../storage/database.ts";
import { orgSlug } from "../org/events.ts";
import { type ApiConfig, AppKind, type OidcConfig } from "./events.ts";

/** An `apps` read-model row (the secret only as its SHA-256). */
export interface AppRow {
  id: string;
  project_id: string;
  org_id: string;
  name: string;
  type: number;
  client_id: string;
  client_secret_hash: string | null;
  auth_method: number;
  redirect_uris: string[];
  post_logout_redirect_uris: string[];
  response_types: number[];
  grant_types: number[];
  app_type: number | null;
  access_token_type: number | null;
  access_token_role_assertion: boolean;
  id_token_role_assertion: boolean;
  id_token_userinfo_assertion: boolean;
  dev_mode: boolean;
  clock_skew_ns: number | string;
  created_at: Date;
  changed_at: Date;
  sequence: number | string;
  [key: string]: unknown;
}

export const APP_COLUMNS = `a.id, a.project_id, a.org_id, a.name, a.type, a.client_id, a.client_secret_hash,
  a.auth_method, a.redirect_uris, a.post_logout_redirect_uris, a.response_types, a.grant_types, a.app_type,
  a.access_token_type, a.access_token_role_assertion, a.id_token_role_assertion, a.id_token_userinfo_assertion,
  a.dev_mode, a.clock_skew_ns, a.created_at, a.changed_at, a.sequence`;

/** The OIDC configuration of an OIDC app's row. */
export function oidcConfigOf(row: AppRow): OidcConfig {
  return {
    redirect_uris: [...row.redirect_uris],
    post_logout_redirect_uris: [...row.post_logout_redirect_uris],
    response_types: row.response_types.map(Number),
    grant_types: row.grant_types.map(Number),
    app_type: Number(row.app_type ?? 0),
    auth_method: Number(row.auth_method),
    access_token_type: Number(row.access_token_type ?? 0),
    access_token_role_assertion: row.access_token_role_assertion,
    id_token_role_assertion: row.id_token_role_assertion,
    id_token_userinfo_assertion: row.id_token_userinfo_assertion,
    dev_mode: row.dev_mode,
    clock_skew_ns: Number(row.clock_skew_ns),
  };
}

export function configOf(row: AppRow): OidcConfig | ApiConfig {
  return row.type === AppKind.oidc ? oidcConfigOf(row) : { auth_method: Number(row.auth_method) };
}

/** The app `appId` of the project, or undefined. */
export async function readApp(
  db: Queryable,
  instanceId: string,
  projectId: string,
  appId: string,
): Promise<AppRow | undefined> {
  const rows = await db.query<AppRow>(
    `SELECT ${APP_COLUMNS} FROM apps a WHERE a.instance_id = $1 AND a.project_id = $2 AND a.id = $3`,
    [instanceId, projectId, appId],
  );
  return rows[0];
}

/**
 * A new client ID, `<snowflake>@<project slug>` as ZITADEL makes them: unique in the instance because the
 * snowflake is (apps_client_id_idx enforces it), and readable in logs.
 */
export function newClientId(projectName: string): string {
  const slug = orgSlug(projectName);
  return `${newId()}@${slug === "org" ? "project" : slug}`;
}
