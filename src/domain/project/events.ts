/**
 * The project aggregate: the project itself, its roles, its applications (with their keys and secrets) and
 * its project grants. All of them share the project's sequence (one optimistic lock), so a command that
 * removes a role and narrows the project grants holding it decides on one consistent state.
 */
export const PROJECT = "project";

export const ProjectEvent = {
  added: "project.added",
  /** Only the fields that changed. */
  changed: "project.changed",
  removed: "project.removed",

  roleAdded: "project.role.added",
  /** Only the fields that changed (`key` names the role). */
  roleChanged: "project.role.changed",
  roleRemoved: "project.role.removed",

  oidcAppAdded: "project.app.oidc.added",
  apiAppAdded: "project.app.api.added",
  /** The name of an app changed. */
  appChanged: "project.app.changed",
  /** The whole OIDC configuration, replaced. */
  oidcConfigChanged: "project.app.oidc.config.changed",
  /** The API configuration, replaced. */
  apiConfigChanged: "project.app.api.config.changed",
  /** A new client secret (its SHA-256); the previous one no longer works. */
  appSecretChanged: "project.app.secret.changed",
  /** The app's authentication method no longer uses a secret: the secret is gone. */
  appSecretRemoved: "project.app.secret.removed",
  appKeyAdded: "project.app.key.added",
  appKeyRemoved: "project.app.key.removed",
  appRemoved: "project.app.removed",

  grantAdded: "project.grant.added",
  /** New role keys, set through the API. */
  grantChanged: "project.grant.changed",
  /** New role keys after a role was removed from the project. */
  grantCascadeChanged: "project.grant.cascade.changed",
  grantDeactivated: "project.grant.deactivated",
  grantReactivated: "project.grant.reactivated",
  grantRemoved: "project.grant.removed",
  /** The grant ended because the granted organization was removed. */
  grantCascadeRemoved: "project.grant.cascade.removed",
} as const;

/**
 * Numbers of the API's PrivateLabelingSetting: whose branding and texts the sign-ins of the project's
 * applications show (docs/branding.md "Projects: whose branding a sign-in shows").
 */
export const PrivateLabelingSetting = {
  /** The instance's until the user is known, then the user's organization's. */
  unspecified: 0,
  /** Always the project's organization's (pages and the sign-in's messages). */
  enforceProjectResourceOwnerPolicy: 1,
  /** The project's organization's until the user is known, then the user's organization's. */
  allowLoginUserResourceOwnerPolicy: 2,
} as const;
export type PrivateLabelingSetting = (typeof PrivateLabelingSetting)[keyof typeof PrivateLabelingSetting];

export interface ProjectAddedPayload {
  name: string;
  project_role_assertion: boolean;
  project_role_check: boolean;
  /** Absent: UNSPECIFIED (0), as in the events written before the setting existed. */
  private_labeling_setting?: PrivateLabelingSetting;
}

export interface ProjectChangedPayload {
  name?: string;
  project_role_assertion?: boolean;
  project_role_check?: boolean;
  private_labeling_setting?: PrivateLabelingSetting;
}

export interface ProjectRemovedPayload {
  name?: string;
  /** Why, when not by a direct request (e.g. "org_removed"). */
  reason?: string;
}

export interface RoleAddedPayload {
  key: string;
  display_name: string;
  group: string;
}

export interface RoleChangedPayload {
  key: string;
  display_name?: string;
  group?: string;
}

export interface RoleRemovedPayload {
  key: string;
}

/** Numbers of the API enums (app_service.proto), kept as stored numbers in events and read models. */
export const OidcResponseType = { code: 0, idToken: 1, idTokenToken: 2 } as const;
export const OidcGrantType = {
  authorizationCode: 0,
  implicit: 1,
  refreshToken: 2,
  tokenExchange: 4,
} as const;
export const OidcAppType = { web: 0, userAgent: 1, native: 2 } as const;
export const OidcAuthMethod = { basic: 0, post: 1, none: 2, privateKeyJwt: 3 } as const;
export const OidcTokenType = { bearer: 0, jwt: 1 } as const;
export const ApiAuthMethod = { basic: 0, privateKeyJwt: 1 } as const;

/** Kinds of app (apps.type). */
export const AppKind = { oidc: 1, api: 2 } as const;

/** The complete OIDC configuration of an app, as stored in events. */
export interface OidcConfig {
  redirect_uris: string[];
  post_logout_redirect_uris: string[];
  response_types: number[];
  grant_types: number[];
  app_type: number;
  auth_method: number;
  access_token_type: number;
  access_token_role_assertion: boolean;
  id_token_role_assertion: boolean;
  id_token_userinfo_assertion: boolean;
  dev_mode: boolean;
  /** Nanoseconds (0 … 5 s). */
  clock_skew_ns: number;
}

export interface ApiConfig {
  auth_method: number;
}

export interface OidcAppAddedPayload {
  app_id: string;
  name: string;
  client_id: string;
  /** SHA-256 (base64url) of the client secret; absent for methods without a secret. */
  secret_hash?: string;
  config: OidcConfig;
}

export interface ApiAppAddedPayload {
  app_id: string;
  name: string;
  client_id: string;
  secret_hash?: string;
  config: ApiConfig;
}

export interface AppChangedPayload {
  app_id: string;
  name: string;
}

export interface OidcConfigChangedPayload {
  app_id: string;
  config: OidcConfig;
}

export interface ApiConfigChangedPayload {
  app_id: string;
  config: ApiConfig;
}

export interface AppSecretChangedPayload {
  app_id: string;
  /** SHA-256 (base64url) of the new secret; the secret itself is never stored. */
  secret_hash: string;
}

export interface AppKeyAddedPayload {
  app_id: string;
  key_id: string;
  /** PEM (SPKI); the private key is never stored. */
  public_key: string;
  /** RFC 3339; absent: never expires. */
  expiration?: string;
}

export interface AppKeyRemovedPayload {
  app_id: string;
  key_id: string;
}

export interface AppRemovedPayload {
  app_id: string;
  client_id: string;
}

export interface GrantAddedPayload {
  grant_id: string;
  granted_org_id: string;
  role_keys: string[];
}

export interface GrantChangedPayload {
  grant_id: string;
  role_keys: string[];
}

export interface GrantIdPayload {
  grant_id: string;
}

export interface GrantRemovedPayload {
  grant_id: string;
  granted_org_id: string;
}

/** Numbers of the API's ProjectGrantState. */
export const ProjectGrantState = { active: 1, inactive: 2 } as const;
