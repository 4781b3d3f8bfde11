import { createPublicKey } from "node:crypto";
import type { CryptoKey, KeyObject } from "jose";
import { INSTANCE, InstanceEvent } from "../domain/instance/events.ts";
import { PROJECT } from "../domain/project/events.ts";
import { USER, UserEvent, UserState, UserType } from "../domain/user/events.ts";
import { usernameKey } from "../domain/user/username.ts";
import type { EventStore } from "../eventstore/eventstore.ts";
import { appByClientId } from "../query/apps.ts";
import { InvalidatedCache } from "../query/invalidated-cache.ts";
import type { Queryable } from "../storage/database.ts";

export type ClientAuthMethod = "client_secret_basic" | "client_secret_post" | "private_key_jwt" | "none";

export const GrantType = {
  authorizationCode: "authorization_code",
  implicit: "implicit",
  refreshToken: "refresh_token",
  clientCredentials: "client_credentials",
  jwtBearer: "urn:ietf:params:oauth:grant-type:jwt-bearer",
  tokenExchange: "urn:ietf:params:oauth:grant-type:token-exchange",
} as const;
export type GrantType = (typeof GrantType)[keyof typeof GrantType];

/** A public key a client signs its assertions with (private_key_jwt), by key ID. */
export interface ClientKey {
  kid: string;
  key: KeyObject | CryptoKey;
  /** Undefined: never expires. */
  expiresAt?: Date;
}

/**
 * An OAuth client as the provider sees it, whatever it is registered as: a machine user (its
 * `_generate_secret` credentials and keys) or an OIDC / API app of a project.
 */
export interface OidcClient {
  kind: "machine" | "app";
  /** The machine user's ID, or the app's ID. */
  id: string;
  clientId: string;
  instanceId: string;
  /** The organization that owns the client (the machine user's, or the app's project's). */
  orgId: string;
  /** The project of an app (its ID is in the audience of the app's tokens). */
  projectId?: string;
  /** The project's `project_role_assertion`: roles in userinfo / introspection without a roles scope. */
  projectRoleAssertion?: boolean;
  /** The project's `project_role_check`: only users with a grant may log in (authorization endpoint). */
  projectRoleCheck?: boolean;
  /** OIDC apps: web, user agent or native (redirect URI rules of the authorization endpoint). */
  appType?: "web" | "user_agent" | "native";
  /** False for a locked / deactivated machine user or an inactive app: authentication fails. */
  active: boolean;
  authMethods: ReadonlySet<ClientAuthMethod>;
  /** SHA-256 (base64url) of the client secret, for client_secret_basic / _post. */
  secretHash?: string;
  /** The keys for private_key_jwt, by kid; `undefined` kid: every key of the client (the JWT names none). */
  publicKeys(kid: string | undefined): Promise<ClientKey[]>;
  grantTypes: ReadonlySet<GrantType>;
  responseTypes: readonly string[];
  redirectUris: readonly string[];
  postLogoutRedirectUris: readonly string[];
  accessTokenType: "opaque" | "jwt";
  idTokenUserinfoAssertion: boolean;
  accessTokenRoleAssertion: boolean;
  idTokenRoleAssertion: boolean;
  /** Tolerated clock difference for the client's assertions, in seconds (apps: at most 5). */
  clockSkewSeconds: number;
  /** Apps with dev_mode may register http redirect URIs on any host (checked by the apps API). */
  devMode?: boolean;
  /** For a machine user: the user it is (client_credentials tokens are issued for it). */
  userId?: string;
}

/** Finds the client of a `client_id` in an instance; undefined when this source does not know it. */
export type ClientSource = (instanceId: string, clientId: string) => Promise<OidcClient | undefined>;

/** How long a client lookup is reused: the bound should another process's change notification be lost. */
const CLIENT_CACHE_MS = 2_000;
const CLIENT_CACHE_MAX = 10_000;

/** User events that change what a machine user's client looks like. */
const CLIENT_CHANGING = new Set<string>([
  UserEvent.secretSet,
  UserEvent.secretRemoved,
  UserEvent.keyAdded,
  UserEvent.keyRemoved,
  UserEvent.locked,
  UserEvent.unlocked,
  UserEvent.deactivated,
  UserEvent.reactivated,
  UserEvent.usernameChanged,
  UserEvent.changed,
  UserEvent.removed,
]);

/**
 * Resolves a `client_id` to its client, asking each source in turn (apps, then machine users), cached
 * briefly: changes apply at once (other processes' when their notification arrives), CLIENT_CACHE_MS bounds
 * an entry's age in any case.
 * Further kinds of clients plug in with `addSource` (asked first).
 */
export class ClientRegistry {
  private readonly sources: ClientSource[] = [];
  private readonly machines: ClientSource;
  private readonly cache: InvalidatedCache<OidcClient | undefined>;

  constructor(db: Queryable, eventStore?: EventStore) {
    this.machines = machineUserClientSource(db);
    this.sources.push(appClientSource(db), this.machines);
    this.cache = new InvalidatedCache({
      ttlMs: CLIENT_CACHE_MS,
      max: CLIENT_CACHE_MAX,
      eventStore,
      staleBy: (e) =>
        (e.aggregateType === USER && CLIENT_CHANGING.has(e.type)) ||
        (e.aggregateType === INSTANCE && e.type === InstanceEvent.removed) ||
        // Apps, their keys and secrets, and the project settings they carry are events of the project.
        e.aggregateType === PROJECT
          ? { scope: e.instanceId }
          : undefined,
    });
  }

  /** Adds a source asked before the ones already registered (apps are looked up before machine users). */
  addSource(source: ClientSource): void {
    this.sources.unshift(source);
    this.cache.invalidate();
  }

  async byClientId(instanceId: string, clientId: string): Promise<OidcClient | undefined> {
    return this.cache.through(InvalidatedCache.key(instanceId, clientId), async () => {
      for (const source of this.sources) {
        const client = await source(instanceId, clientId);
        if (client) return client;
      }
      return undefined;
    });
  }

  /** The client of a machine user by its username, whatever other sources know under that client ID. */
  machineUser(instanceId: string, username: string): Promise<OidcClient | undefined> {
    return this.cache.through(InvalidatedCache.key(instanceId, "", "machine", username), () =>
      this.machines(instanceId, username),
    );
  }

  /** Forgets cached clients of an instance (all when none is given). */
  invalidate(instanceId?: string): void {
    this.cache.invalidate(instanceId);
  }
}

interface MachineRow {
  id: string;
  org_id: string;
  username: string;
  state: number;
  client_secret_hash: string | null;
  access_token_type: number | null;
  has_keys: boolean;
  [key: string]: unknown;
}

/**
 * Machine users as clients: `client_id` = the username `_generate_secret` returned; client_secret_basic and
 * _post with that secret, private_key_jwt with the user's keys; grants client_credentials and jwt-bearer.
 */
export function machineUserClientSource(db: Queryable): ClientSource {
  return async (instanceId, clientId) => {
    const rows = await db.query<MachineRow>(
      `SELECT u.id, u.org_id, u.username, u.state, u.client_secret_hash, u.access_token_type,
              EXISTS (SELECT 1 FROM user_keys k WHERE k.instance_id = u.instance_id AND k.user_id = u.id) AS has_keys
       FROM users u WHERE u.instance_id = $1 AND u.username_key = $2 AND u.type = $3
       ORDER BY (u.username = $4) DESC, u.created_at LIMIT 1`,
      [instanceId, usernameKey(clientId), UserType.machine, clientId],
    );
    const row = rows[0];
    if (!row) return undefined;
    const methods = new Set<ClientAuthMethod>();
    if (row.client_secret_hash) {
      methods.add("client_secret_basic");
      methods.add("client_secret_post");
    }
    if (row.has_keys) methods.add("private_key_jwt");
    return {
      kind: "machine",
      id: row.id,
      clientId: row.username,
      instanceId,
      orgId: row.org_id,
      active: row.state === UserState.active,
      authMethods: methods,
      secretHash: row.client_secret_hash ?? undefined,
      publicKeys: (kid) => machineKeys(db, instanceId, row.id, kid),
      grantTypes: new Set([GrantType.clientCredentials, GrantType.jwtBearer]),
      responseTypes: [],
      redirectUris: [],
      postLogoutRedirectUris: [],
      accessTokenType: row.access_token_type === 1 ? "jwt" : "opaque",
      idTokenUserinfoAssertion: false,
      accessTokenRoleAssertion: false,
      idTokenRoleAssertion: false,
      clockSkewSeconds: 1,
      userId: row.id,
    };
  };
}

/** A machine user's public keys (PEM in user_keys), all or the one with that ID. */
export async function machineKeys(
  db: Queryable,
  instanceId: string,
  userId: string,
  kid: string | undefined,
): Promise<ClientKey[]> {
  const rows = await db.query<{ id: string; public_key: string; expires_at: Date | null }>(
    kid === undefined
      ? "SELECT id, public_key, expires_at FROM user_keys WHERE instance_id = $1 AND user_id = $2"
      : "SELECT id, public_key, expires_at FROM user_keys WHERE instance_id = $1 AND user_id = $2 AND id = $3",
    kid === undefined ? [instanceId, userId] : [instanceId, userId, kid],
  );
  return rows.map((row) => ({
    kid: row.id,
    key: createPublicKey(row.public_key),
    expiresAt: row.expires_at ? new Date(row.expires_at) : undefined,
  }));
}

/**
 * OIDC and API apps of projects as clients (src/query/apps.ts: one indexed query by (instance_id,
 * client_id) with the project's settings and the app's keys). An app authenticates with its one auth
 * method; API apps have no grant (they introspect); the audience of an app's tokens holds its project.
 */
export function appClientSource(db: Queryable): ClientSource {
  return async (instanceId, clientId) => {
    const app = await appByClientId(db, instanceId, clientId);
    if (!app) return undefined;
    const keys = app.keys.map((k) => ({
      kid: k.id,
      key: createPublicKey(k.publicKey),
      expiresAt: k.expiresAt,
    }));
    const oidc = app.oidc;
    return {
      kind: "app",
      id: app.appId,
      clientId: app.clientId,
      instanceId,
      orgId: app.orgId,
      projectId: app.projectId,
      projectRoleAssertion: app.projectRoleAssertion,
      projectRoleCheck: app.projectRoleCheck,
      appType: oidc?.appType,
      active: true,
      authMethods: new Set([app.authMethod]),
      secretHash: app.clientSecretHash ?? undefined,
      publicKeys: async (kid) => (kid === undefined ? keys : keys.filter((k) => k.kid === kid)),
      grantTypes: new Set(oidc?.grantTypes ?? []),
      responseTypes: oidc?.responseTypes ?? [],
      redirectUris: oidc?.redirectUris ?? [],
      postLogoutRedirectUris: oidc?.postLogoutRedirectUris ?? [],
      accessTokenType: oidc?.accessTokenType === "jwt" ? "jwt" : "opaque",
      idTokenUserinfoAssertion: oidc?.idTokenUserinfoAssertion ?? false,
      accessTokenRoleAssertion: oidc?.accessTokenRoleAssertion ?? false,
      idTokenRoleAssertion: oidc?.idTokenRoleAssertion ?? false,
      clockSkewSeconds: (oidc?.clockSkewMs ?? 0) / 1000,
      devMode: oidc?.devMode ?? false,
    };
  };
}
