/**
 * Client lookups for the OIDC endpoints: an app by its client ID, with everything client authentication
 * and token issuance decide on, in one indexed query (apps_client_id_idx, app_keys_app_idx). Reads the
 * read model directly, without the service layer or any permission check: callers authenticate the
 * client themselves (SHA-256 of the presented secret compared in constant time with `clientSecretHash`,
 * or a JWT verified with one of `keys`).
 */
import { APP_COLUMNS, type AppRow, oidcConfigOf } from "../domain/project/apps.ts";
import {
  ApiAuthMethod,
  AppKind,
  OidcAppType,
  OidcAuthMethod,
  OidcGrantType,
  OidcResponseType,
  OidcTokenType,
  type PrivateLabelingSetting,
} from "../domain/project/events.ts";
import type { Queryable } from "../storage/database.ts";

/** OAuth 2.0 `token_endpoint_auth_method` names. */
export type ClientAuthMethod = "client_secret_basic" | "client_secret_post" | "none" | "private_key_jwt";

/** The OIDC configuration of a client app, with OAuth 2.0 names. */
export interface ClientOidcConfig {
  /** Compared exactly (native apps: a loopback redirect URI matches on any port, RFC 8252 §7.3). */
  redirectUris: string[];
  postLogoutRedirectUris: string[];
  responseTypes: Array<"code" | "id_token" | "id_token token">;
  grantTypes: Array<
    "authorization_code" | "implicit" | "refresh_token" | "urn:ietf:params:oauth:grant-type:token-exchange"
  >;
  appType: "web" | "user_agent" | "native";
  accessTokenType: "bearer" | "jwt";
  accessTokenRoleAssertion: boolean;
  idTokenRoleAssertion: boolean;
  idTokenUserinfoAssertion: boolean;
  /** `http` redirect URIs on any host were allowed. */
  devMode: boolean;
  /** Tolerated clock difference (0 … 5000 ms). */
  clockSkewMs: number;
}

/** A public key of the app (private_key_jwt); the `kid` of the client's JWTs is `id`. */
export interface ClientKey {
  id: string;
  /** PEM (SPKI): RSA, EC or Ed25519. */
  publicKey: string;
  /** Undefined: never expires. A key past this instant must be refused. */
  expiresAt?: Date;
}

/** Everything about an app that client authentication and token issuance need. */
export interface ClientApp {
  appId: string;
  projectId: string;
  /** The project's organization. */
  orgId: string;
  name: string;
  type: "oidc" | "api";
  clientId: string;
  /** OIDC apps: any of the four; API apps: client_secret_basic or private_key_jwt. */
  authMethod: ClientAuthMethod;
  /** SHA-256 (base64url, as `sha256()` of src/crypto/tokens.ts) of the client secret; null: no secret. */
  clientSecretHash: string | null;
  /** Set for OIDC apps. */
  oidc?: ClientOidcConfig;
  keys: ClientKey[];
  /** The project's settings. */
  projectRoleAssertion: boolean;
  projectRoleCheck: boolean;
}

const oidcAuthMethods: Record<number, ClientAuthMethod> = {
  [OidcAuthMethod.basic]: "client_secret_basic",
  [OidcAuthMethod.post]: "client_secret_post",
  [OidcAuthMethod.none]: "none",
  [OidcAuthMethod.privateKeyJwt]: "private_key_jwt",
};
const apiAuthMethods: Record<number, ClientAuthMethod> = {
  [ApiAuthMethod.basic]: "client_secret_basic",
  [ApiAuthMethod.privateKeyJwt]: "private_key_jwt",
};
const responseTypes: Record<number, ClientOidcConfig["responseTypes"][number]> = {
  [OidcResponseType.code]: "code",
  [OidcResponseType.idToken]: "id_token",
  [OidcResponseType.idTokenToken]: "id_token token",
};
const grantTypes: Record<number, ClientOidcConfig["grantTypes"][number]> = {
  [OidcGrantType.authorizationCode]: "authorization_code",
  [OidcGrantType.implicit]: "implicit",
  [OidcGrantType.refreshToken]: "refresh_token",
  [OidcGrantType.tokenExchange]: "urn:ietf:params:oauth:grant-type:token-exchange",
};
const appTypes: Record<number, ClientOidcConfig["appType"]> = {
  [OidcAppType.web]: "web",
  [OidcAppType.userAgent]: "user_agent",
  [OidcAppType.native]: "native",
};

interface ClientRow extends AppRow {
  role_assertion: boolean;
  role_check: boolean;
  keys: Array<{ id: string; public_key: string; expires_at: string | null }> | string;
}

/**
 * The app of the instance with this client ID, or undefined (unknown client ID, or the app or its
 * project was deleted). One query: the app row by (instance_id, client_id), its project's settings and
 * its keys.
 */
export async function appByClientId(
  db: Queryable,
  instanceId: string,
  clientId: string,
): Promise<ClientApp | undefined> {
  const rows = await db.query<ClientRow>(
    `SELECT ${APP_COLUMNS}, p.role_assertion, p.role_check,
       coalesce((SELECT json_agg(json_build_object('id', k.id, 'public_key', k.public_key, 'expires_at', k.expires_at)
                                 ORDER BY k.created_at)
                 FROM app_keys k WHERE k.instance_id = a.instance_id AND k.app_id = a.id), '[]') AS keys
     FROM apps a JOIN projects p ON p.instance_id = a.instance_id AND p.id = a.project_id
     WHERE a.instance_id = $1 AND a.client_id = $2`,
    [instanceId, clientId],
  );
  const row = rows[0];
  if (!row) return undefined;
  const keys = (typeof row.keys === "string" ? JSON.parse(row.keys) : row.keys) as Array<{
    id: string;
    public_key: string;
    expires_at: string | null;
  }>;
  const isOidc = row.type === AppKind.oidc;
  const config = isOidc ? oidcConfigOf(row) : undefined;
  return {
    appId: row.id,
    projectId: row.project_id,
    orgId: row.org_id,
    name: row.name,
    type: isOidc ? "oidc" : "api",
    clientId: row.client_id,
    authMethod: (isOidc ? oidcAuthMethods : apiAuthMethods)[Number(row.auth_method)],
    clientSecretHash: row.client_secret_hash,
    oidc: config && {
      redirectUris: config.redirect_uris,
      postLogoutRedirectUris: config.post_logout_redirect_uris,
      responseTypes: config.response_types.map((t) => responseTypes[t]),
      grantTypes: config.grant_types.map((t) => grantTypes[t]),
      appType: appTypes[config.app_type],
      accessTokenType: config.access_token_type === OidcTokenType.jwt ? "jwt" : "bearer",
      accessTokenRoleAssertion: config.access_token_role_assertion,
      idTokenRoleAssertion: config.id_token_role_assertion,
      idTokenUserinfoAssertion: config.id_token_userinfo_assertion,
      devMode: config.dev_mode,
      clockSkewMs: config.clock_skew_ns / 1e6,
    },
    keys: keys.map((k) => ({
      id: k.id,
      publicKey: k.public_key,
      expiresAt: k.expires_at ? new Date(k.expires_at) : undefined,
    })),
    projectRoleAssertion: row.role_assertion,
    projectRoleCheck: row.role_check,
  };
}

/** Whose branding a sign-in of a client shows: its project's setting and organization. */
export interface ClientLabeling {
  setting: PrivateLabelingSetting;
  /** The project's organization. */
  orgId: string;
}

/**
 * The project's `private_labeling_setting` and organization of the app with this client ID, or undefined
 * (no such app: the login UI's own sign-ins, machine users). One indexed query (apps_client_id_idx).
 */
export async function labelingOfClient(
  db: Queryable,
  instanceId: string,
  clientId: string,
): Promise<ClientLabeling | undefined> {
  const rows = await db.query<{ org_id: string; private_labeling_setting: number }>(
    `SELECT p.org_id, p.private_labeling_setting
     FROM apps a JOIN projects p ON p.instance_id = a.instance_id AND p.id = a.project_id
     WHERE a.instance_id = $1 AND a.client_id = $2`,
    [instanceId, clientId],
  );
  const row = rows[0];
  return row
    ? { setting: Number(row.private_labeling_setting) as PrivateLabelingSetting, orgId: row.org_id }
    : undefined;
}
