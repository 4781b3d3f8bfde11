import { type CryptoKey, decodeJwt, decodeProtectedHeader, importSPKI, jwtVerify } from "jose";
import type { Config } from "../config.ts";
import { externalOrigin } from "../config.ts";
import { sha256 } from "../crypto/tokens.ts";
import { INSTANCE, InstanceEvent } from "../domain/instance/events.ts";
import { USER, UserEvent, UserState } from "../domain/user/events.ts";
import { UnauthenticatedError } from "../errors.ts";
import type { EventStore } from "../eventstore/eventstore.ts";
import type { Queryable } from "../storage/database.ts";
import type { Caller } from "./caller.ts";

/** Verifies a bearer token another component issues (the OIDC provider plugs its access tokens in here). */
export type TokenVerifier = (token: string, instanceId: string | undefined) => Promise<Caller | undefined>;

interface PatRow {
  instance_id: string;
  user_id: string;
  org_id: string;
  state: number;
  expires_at: Date | string | null;
  [key: string]: unknown;
}

type CachedPat = PatRow & { expiresAt: number | null };

/** How long a PAT lookup is reused: the bound should another process's revocation notification be lost. */
const PAT_CACHE_MS = 2_000;
const PAT_CACHE_MAX = 10_000;

/** User events after which that user's cached PATs must be looked up again. */
const PAT_INVALIDATING = new Set<string>([
  UserEvent.patRemoved,
  UserEvent.removed,
  UserEvent.locked,
  UserEvent.unlocked,
  UserEvent.deactivated,
  UserEvent.reactivated,
  UserEvent.patAdded,
]);

/**
 * Turns `Authorization: Bearer <token>` into a Caller: a personal access token (looked up by its
 * SHA-256), a system user's self-signed JWT, or a token of a registered verifier. Anything else is 401.
 * A token only counts in its own instance: a PAT of another instance's user is unknown here.
 */
export class Authenticator {
  private readonly verifiers: TokenVerifier[] = [];
  private readonly systemKeys = new Map<string, Promise<CryptoKey>>();

  /** `<instance>:<SHA-256 of a PAT>` → its row (null: unknown), for PAT_CACHE_MS. */
  private readonly patCache = new Map<string, { pat: CachedPat | null; until: number }>();
  /**
   * Counts the cache's invalidations: a lookup that ran across one is not cached, since it may have read
   * the row as it was before the change (another process's notification can arrive while it runs).
   */
  private patGeneration = 0;

  constructor(
    private readonly db: Queryable,
    private readonly config: Config,
    eventStore?: EventStore,
  ) {
    // Changes to users and their tokens apply at once: this process's, and on PostgreSQL other processes'
    // when their notification arrives; PAT_CACHE_MS bounds an entry's age in any case.
    eventStore?.onCommitted((events) => {
      for (const event of events) {
        if (event.aggregateType === USER && PAT_INVALIDATING.has(event.type))
          this.forgetUser(event.instanceId, event.aggregateId);
        if (event.aggregateType === INSTANCE && event.type === InstanceEvent.removed) this.forgetAll();
      }
    });
    eventStore?.onStale(() => this.forgetAll());
  }

  private forgetAll(): void {
    this.patGeneration++;
    this.patCache.clear();
  }

  private forgetUser(instanceId: string, userId: string): void {
    this.patGeneration++;
    for (const [hash, entry] of this.patCache) {
      if (entry.pat === null || (entry.pat.instance_id === instanceId && entry.pat.user_id === userId))
        this.patCache.delete(hash);
    }
  }

  /** The PAT of this instance with that value (a token of another instance's user is unknown here). */
  private async personalAccessToken(token: string, instanceId: string): Promise<CachedPat | null> {
    const key = `${instanceId}:${sha256(token)}`;
    const cached = this.patCache.get(key);
    if (cached && cached.until > Date.now()) return cached.pat;
    const generation = this.patGeneration;
    const rows = await this.db.query<PatRow>(
      `SELECT p.instance_id, p.user_id, u.org_id, u.state, p.expires_at
       FROM personal_access_tokens p JOIN users u ON u.instance_id = p.instance_id AND u.id = p.user_id
       WHERE p.token_hash = $1 AND p.instance_id = $2`,
      [sha256(token), instanceId],
    );
    const row = rows[0];
    const pat = row
      ? { ...row, expiresAt: row.expires_at ? new Date(row.expires_at).getTime() : null }
      : null;
    if (generation !== this.patGeneration) return pat;
    if (this.patCache.size >= PAT_CACHE_MAX) this.patCache.delete(this.patCache.keys().next().value!);
    this.patCache.set(key, { pat, until: Date.now() + PAT_CACHE_MS });
    return pat;
  }

  addVerifier(verifier: TokenVerifier): void {
    this.verifiers.push(verifier);
  }

  async authenticate(
    authorization: string | undefined,
    instanceId: string | undefined,
    host: string,
  ): Promise<Caller> {
    if (!authorization)
      throw new UnauthenticatedError("authentication required: send Authorization: Bearer <token>");
    const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
    if (!match) throw new UnauthenticatedError("the Authorization header must be Bearer <token>");
    const token = match[1];

    const system = await this.systemUser(token, host);
    if (system) return system;

    if (instanceId) {
      const pat = await this.personalAccessToken(token, instanceId);
      if (pat) {
        if (pat.expiresAt !== null && pat.expiresAt <= Date.now())
          throw new UnauthenticatedError("the token has expired");
        if (pat.state !== UserState.active)
          throw new UnauthenticatedError("the user of the token is not active");
        return {
          kind: "user",
          userId: pat.user_id,
          instanceId: pat.instance_id,
          orgId: pat.org_id,
          via: "pat",
        };
      }
    }

    for (const verify of this.verifiers) {
      const caller = await verify(token, instanceId);
      if (caller) return caller;
    }
    throw new UnauthenticatedError("invalid or expired token");
  }

  /**
   * A JWT whose issuer is a configured system user, signed with that user's key: `iss` = `sub` = the system
   * user's ID, `aud` = the external URL (never the Host the request happened to name), `iat` and `exp`
   * required with `exp` at most an hour after `iat` (5 s clock skew), so a leaked token is good for an hour
   * at most.
   */
  private async systemUser(token: string, host: string): Promise<Caller | undefined> {
    if (token.split(".").length !== 3) return undefined;
    let issuer: string | undefined;
    let alg: string | undefined;
    try {
      issuer = decodeJwt(token).iss;
      alg = decodeProtectedHeader(token).alg;
    } catch {
      return undefined;
    }
    const pem = issuer ? this.config.systemApiUsers[issuer] : undefined;
    if (!issuer || !pem || !alg) return undefined;
    let key = this.systemKeys.get(`${issuer}:${alg}`);
    if (!key) {
      key = importSPKI(pem, alg);
      this.systemKeys.set(`${issuer}:${alg}`, key);
    }
    try {
      const { payload } = await jwtVerify(token, await key, {
        issuer,
        subject: issuer,
        audience: systemUserAudience(this.config, host),
        clockTolerance: SYSTEM_TOKEN_SKEW,
        maxTokenAge: SYSTEM_TOKEN_MAX_LIFETIME,
        requiredClaims: ["iat", "exp"],
      });
      if (payload.exp! - payload.iat! > SYSTEM_TOKEN_MAX_LIFETIME) {
        throw new Error(`"exp" must be at most ${SYSTEM_TOKEN_MAX_LIFETIME} seconds after "iat"`);
      }
    } catch (error) {
      this.systemKeys.delete(`${issuer}:${alg}`);
      throw new UnauthenticatedError(`invalid system user token: ${(error as Error).message}`);
    }
    return { kind: "system", userId: issuer };
  }
}

/** The longest a system user's JWT may live (`exp` - `iat`), in seconds. */
const SYSTEM_TOKEN_MAX_LIFETIME = 3600;
/** Clock difference tolerated for system users' JWTs, in seconds. */
const SYSTEM_TOKEN_SKEW = 5;

/**
 * The audience of system users' JWTs: the external URL (PLATFORM_EXTERNAL_SECURE / _DOMAIN / _PORT), whatever
 * the Host. An external port of 0 (a server on an ephemeral port, as in tests) means the request's port.
 */
export function systemUserAudience(config: Config, host: string): string {
  if (config.externalPort !== 0) return externalOrigin(config);
  const port = /:(\d+)$/.exec(host.trim())?.[1];
  return externalOrigin({ ...config, externalPort: port ? Number(port) : config.externalSecure ? 443 : 80 });
}
