import { decodeJwt, decodeProtectedHeader, type JWTPayload, jwtVerify } from "jose";
import type { Caller } from "../../auth/caller.ts";
import { sha256 } from "../../crypto/tokens.ts";
import { impersonatedEvent } from "../../domain/user/commands.ts";
import { newId } from "../../id.ts";
import { activeAccessToken, isJwt } from "../access-tokens.ts";
import { isActive, loadUser, type UserRecord } from "../claims.ts";
import { ASSERTION_ALGS, authenticateClient } from "../client-auth.ts";
import { GrantType, type OidcClient } from "../clients.ts";
import type { OidcContext, RequestInfo } from "../context.ts";
import { InvalidRequest, InvalidTarget, UnauthorizedClient, UnsupportedGrantType } from "../errors.ts";
import { multiValues, required } from "../http.ts";
import { type Issuance, idToken, prepareTokens, storeTokens, type TokenResponse } from "../issue.ts";
import { SIGNING_ALG } from "../keys.ts";
import {
  MANAGEMENT_PROJECT_ALIAS,
  type ParsedScope,
  parseScope,
  Reserved,
  Scope,
  scopeFromValues,
} from "../scopes.ts";
import { type ActClaim, type Lineage, parseHandle } from "../token-store.ts";
import type { Grant } from "./types.ts";

/** Token type identifiers (RFC 8693 §3, interface.md §4.3, contract.md §5). */
export const TokenType = {
  accessToken: "urn:ietf:params:oauth:token-type:access_token",
  refreshToken: "urn:ietf:params:oauth:token-type:refresh_token",
  idToken: "urn:ietf:params:oauth:token-type:id_token",
  jwt: "urn:ietf:params:oauth:token-type:jwt",
  userId: "urn:platform:params:oauth:token-type:user_id",
} as const;
export type TokenType = (typeof TokenType)[keyof typeof TokenType];

const KNOWN_TYPES = new Set<string>(Object.values(TokenType));

/** interface.md §4.3's token type table: where each type is allowed (anything else: invalid_request). */
const ALLOWED = {
  subject_token_type: new Set<string>([
    TokenType.accessToken,
    TokenType.idToken,
    TokenType.jwt,
    TokenType.userId,
  ]),
  actor_token_type: new Set<string>([TokenType.accessToken, TokenType.idToken]),
  requested_token_type: new Set<string>([TokenType.accessToken, TokenType.idToken, TokenType.jwt]),
};
/** Subject types that only come with an actor token (the client, or a bare ID, vouches for the user). */
const NEEDS_ACTOR = new Set<string>([TokenType.jwt, TokenType.userId]);

/** The permission an actor needs to get tokens for another user (src/auth/permissions.ts). */
const IMPERSONATE = "user.impersonate";

/** A subject or actor token, checked: whose it is and what it may pass on. */
interface Presented {
  user: UserRecord;
  audience: string[];
  scope: string[];
  /** When it stops being valid (undefined: a user ID, or a PAT without expiration). */
  expiresAt?: Date;
  /** It is an impersonation token itself. */
  act?: ActClaim;
  /** Itself and what it descends from (stored tokens and PATs only; ID tokens are not revocable). */
  tokenIds: string[];
  patIds: string[];
  sessionId?: string | null;
  authTime?: Date | null;
  amr?: string[] | null;
}

type Role = "subject_token" | "actor_token";

/**
 * `urn:ietf:params:oauth:grant-type:token-exchange` (RFC 8693) with the rules of contract.md §5a, only while
 * the instance's `token_exchange` flag is on (else unsupported_grant_type) and for clients with
 * OIDC_GRANT_TYPE_TOKEN_EXCHANGE (else unauthorized_client); docs/token-exchange.md.
 *
 * The issued tokens are for the subject's user. Their audience is `audience` (each value one of the subject's
 * or actor's audiences, else invalid_target) or the subject's, plus the projects of audience scopes in
 * `scope` (same rule); their scope is `scope` or the subject's (the actor's when the subject has none). An
 * actor token of another user is impersonation: the actor needs `user.impersonate` in the subject's
 * organization, the tokens carry `act: {sub: <actor>}` and a `user.impersonated` event records it. No token
 * issued outlives the subject or actor token, and each stays active only while they do (its lineage).
 */
export const tokenExchangeGrant: Grant = async (ctx, info, request) => {
  const { params } = request;
  if (!(await ctx.features.flags(info.instance.id)).token_exchange) {
    throw new UnsupportedGrantType(
      "token exchange is disabled for this instance (feature token_exchange, PATCH /settings/v3alpha/features)",
    );
  }
  const { client } = await authenticateClient(
    ctx,
    info,
    request.authorization,
    params,
    "token",
    request.endpointUrl,
  );
  if (!client.grantTypes.has(GrantType.tokenExchange)) {
    throw new UnauthorizedClient(
      "the client may not use the token-exchange grant (grant type OIDC_GRANT_TYPE_TOKEN_EXCHANGE)",
    );
  }

  const subjectToken = required(params, "subject_token");
  const subjectType = tokenType("subject_token_type", required(params, "subject_token_type"));
  const actorToken = params.get("actor_token");
  const actorTypeParam = params.get("actor_token_type");
  if (actorToken !== undefined && actorTypeParam === undefined) {
    throw new InvalidRequest("actor_token_type is required with actor_token");
  }
  if (actorToken === undefined && actorTypeParam !== undefined) {
    throw new InvalidRequest("actor_token_type is given without actor_token");
  }
  const actorType = actorTypeParam === undefined ? undefined : tokenType("actor_token_type", actorTypeParam);
  const requestedType = tokenType(
    "requested_token_type",
    params.get("requested_token_type") ?? TokenType.accessToken,
  );
  if (NEEDS_ACTOR.has(subjectType) && actorToken === undefined) {
    throw new InvalidRequest(`subject_token_type ${subjectType} is allowed only with an actor_token`);
  }
  if (params.has("resource")) {
    throw new InvalidTarget("resource is not supported: name the token's audience with audience");
  }
  const requestedScope = params.has("scope") ? parseScope(params.get("scope")) : undefined;

  const subject = await present(
    ctx,
    info,
    client,
    request.endpointUrl,
    "subject_token",
    subjectToken,
    subjectType,
  );
  const actor =
    actorToken === undefined
      ? undefined
      : await present(ctx, info, client, request.endpointUrl, "actor_token", actorToken, actorType!);
  if (actor?.act) {
    throw new InvalidRequest("actor_token is an impersonation token itself; an actor acts as itself only");
  }

  // Audience: requested values within the subject's and actor's audiences, else the subject's (actor's).
  const available = new Set([...subject.audience, ...(actor?.audience ?? [])]);
  const requestedAudience = [...new Set(multiValues(params, "audience"))];
  const outside = requestedAudience.find((a) => !available.has(a));
  if (outside !== undefined) {
    throw new InvalidTarget(`audience ${outside} is not an audience of the subject_token or actor_token`);
  }
  const audience = requestedAudience.length
    ? requestedAudience
    : subject.audience.length
      ? [...subject.audience]
      : [...(actor?.audience ?? [])];
  const projectAudience = (project: string) =>
    project === MANAGEMENT_PROJECT_ALIAS ? info.instance.iamProjectId : project;

  // Scope: as requested (its audience scopes must name available audiences, and join the audience), else
  // the subject's (actor's) without the audience scopes the audience left out.
  let scope: ParsedScope;
  if (requestedScope) {
    scope = requestedScope;
    for (const project of scope.audienceProjects) {
      const id = projectAudience(project);
      if (!available.has(id)) {
        throw new InvalidTarget(
          `scope names the audience ${project}, not an audience of the subject_token or actor_token`,
        );
      }
      if (!audience.includes(id)) audience.push(id);
    }
  } else {
    const inherited = subject.scope.length ? subject.scope : (actor?.scope ?? []);
    scope = scopeFromValues(
      inherited.filter((value) => {
        const project = Reserved.projectAudience.exec(value)?.[1];
        return project === undefined || audience.includes(projectAudience(project));
      }),
    );
  }

  const impersonator = actor && actor.user.id !== subject.user.id ? actor : undefined;
  if (impersonator) await checkImpersonation(ctx, info, impersonator.user, subject.user);
  const act: ActClaim | undefined = impersonator
    ? { sub: impersonator.user.id, ...(subject.act ? { act: subject.act } : {}) }
    : subject.act;
  const tokenIds = [...new Set([...subject.tokenIds, ...(actor?.tokenIds ?? [])])];
  const patIds = [...new Set([...subject.patIds, ...(actor?.patIds ?? [])])];
  // Every exchanged token has a lineage (empty for an ID token's): it marks the token as exchanged.
  const lineage: Lineage = { ...(act ? { act } : {}), tokenIds, patIds };
  const ends = [subject.expiresAt, actor?.expiresAt].filter((d): d is Date => d !== undefined);
  const notAfter = ends.length ? new Date(Math.min(...ends.map((d) => d.getTime()))) : undefined;

  const offline =
    requestedType !== TokenType.idToken &&
    scope.values.includes(Scope.offlineAccess) &&
    client.grantTypes.has(GrantType.refreshToken);
  if (!offline && scope.values.includes(Scope.offlineAccess)) {
    scope = scopeFromValues(scope.values.filter((v) => v !== Scope.offlineAccess));
  }
  const projects = await ctx.db.query<{ id: string }>(
    "SELECT id FROM projects WHERE instance_id = $1 AND id = ANY($2::text[])",
    [info.instance.id, audience],
  );
  const familyId = offline ? newId() : undefined;
  // Impersonation happens in the actor's authentication (its session); delegation keeps the subject's.
  const authentication = impersonator ?? subject;
  const issuance: Issuance = {
    client,
    subject: subject.user.id,
    user: subject.user,
    scope,
    audience: { audience, projectIds: audience.filter((a) => projects.some((p) => p.id === a)) },
    familyId,
    sessionId: authentication.sessionId ?? null,
    authTime: authentication.authTime ?? null,
    amr: authentication.amr ?? null,
    idToken: true,
    refresh: familyId
      ? {
          familyId,
          scope: scope.values,
          absoluteExpiresAt: earliest(new Date(Date.now() + ctx.lifetimes.refreshAbsolute * 1000), notAfter),
        }
      : undefined,
    accessTokenFormat: requestedType === TokenType.jwt ? "jwt" : "opaque",
    notAfter,
    lineage,
    // OpenID Connect Core §2: an ID token is for the client, so its audience holds it.
    idTokenAudience: [client.clientId, ...audience.filter((a) => a !== client.clientId)],
  };
  const event = (tokenId: string) =>
    impersonatedEvent(subject.user.id, subject.user.orgId, {
      actor_user_id: impersonator!.user.id,
      act: act!,
      client_id: client.clientId,
      token_id: tokenId,
      issued_token_type: requestedType,
    });
  const pushContext = { instanceId: info.instance.id, creator: impersonator?.user.id ?? "" };

  if (requestedType === TokenType.idToken) {
    const jti = newId();
    const token = await idToken(ctx, info, issuance, { jti });
    if (impersonator) await ctx.eventStore.push(pushContext, async () => [event(jti)]);
    const iat = Math.floor(Date.now() / 1000);
    const response: TokenResponse = {
      access_token: token,
      token_type: "N_A",
      issued_token_type: TokenType.idToken,
      expires_in: Math.max(0, Number(decodeJwt(token).exp) - iat),
    };
    if (scope.values.length > 0) response.scope = scope.values.join(" ");
    return response;
  }

  const prepared = await prepareTokens(ctx, info, issuance);
  if (impersonator) {
    // The tokens and the record of who impersonated whom are committed together.
    await ctx.eventStore.push(pushContext, async (tx) => {
      await storeTokens(ctx, prepared, tx);
      return [event(prepared.access.id)];
    });
  } else {
    await storeTokens(ctx, prepared);
  }
  return { ...prepared.response, issued_token_type: requestedType };
};

/** A known token type allowed in that parameter, else invalid_request naming it. */
function tokenType(name: keyof typeof ALLOWED, value: string): TokenType {
  if (!KNOWN_TYPES.has(value)) throw new InvalidRequest(`${name} ${value} is not a supported token type`);
  if (!ALLOWED[name].has(value)) throw new InvalidRequest(`${name} ${value} is not allowed`);
  return value as TokenType;
}

function earliest(date: Date, notAfter: Date | undefined): Date {
  return notAfter && notAfter < date ? notAfter : date;
}

/** invalid_request for a subject or actor token that is not (or no longer) valid. */
function invalid(role: Role, why = "is invalid or expired"): InvalidRequest {
  return new InvalidRequest(`${role} ${why}`);
}

/** Checks a subject or actor token of its type and tells whose it is. */
async function present(
  ctx: OidcContext,
  info: RequestInfo,
  client: OidcClient,
  endpointUrl: string,
  role: Role,
  value: string,
  type: TokenType,
): Promise<Presented> {
  switch (type) {
    case TokenType.accessToken:
      return accessTokenOf(ctx, info, role, value);
    case TokenType.idToken:
      return idTokenOf(ctx, info, role, value);
    case TokenType.jwt:
      return clientJwtOf(ctx, info, client, endpointUrl, role, value);
    case TokenType.userId:
      return userIdOf(ctx, info, role, value);
    default:
      throw invalid(role);
  }
}

/** An access token of this provider (opaque or JWT, active with its lineage) or a personal access token. */
async function accessTokenOf(
  ctx: OidcContext,
  info: RequestInfo,
  role: Role,
  value: string,
): Promise<Presented> {
  const instanceId = info.instance.id;
  if (isJwt(value) || parseHandle(value)?.kind === "at") {
    const stored = await activeAccessToken(ctx, instanceId, value);
    if (!stored?.user) throw invalid(role);
    return {
      user: stored.user,
      audience: stored.audience,
      scope: stored.scope,
      expiresAt: stored.expiresAt,
      act: stored.lineage?.act,
      tokenIds: [...(stored.lineage?.tokenIds ?? []), stored.id],
      patIds: stored.lineage?.patIds ?? [],
      sessionId: stored.sessionId,
      authTime: stored.authTime,
      amr: stored.amr,
    };
  }
  if (value.length > 200) throw invalid(role);
  const [pat] = await ctx.db.query<{ id: string; user_id: string; expires_at: Date | string | null }>(
    "SELECT id, user_id, expires_at FROM personal_access_tokens WHERE instance_id = $1 AND token_hash = $2",
    [instanceId, sha256(value)],
  );
  const expiresAt = pat?.expires_at ? new Date(pat.expires_at) : undefined;
  if (!pat || (expiresAt && expiresAt.getTime() <= Date.now())) throw invalid(role);
  const user = await loadUser(ctx.db, instanceId, pat.user_id);
  if (!isActive(user)) throw invalid(role, "belongs to a user who is not active");
  // A PAT is good for the management APIs: that is its audience.
  return {
    user,
    audience: [info.instance.iamProjectId],
    scope: [],
    expiresAt,
    tokenIds: [],
    patIds: [pat.id],
  };
}

/** An ID token this instance signed (under this issuer), unexpired, of an active user. */
async function idTokenOf(ctx: OidcContext, info: RequestInfo, role: Role, value: string): Promise<Presented> {
  let payload: JWTPayload;
  try {
    const { kid, typ } = decodeProtectedHeader(value);
    const key = kid ? await ctx.keys.verificationKey(info.instance.id, kid) : undefined;
    // JWT access tokens are signed by the same keys; they are typed at+jwt.
    if (!key || typ !== "JWT") throw new Error("not an ID token of this instance");
    ({ payload } = await jwtVerify(value, key.publicKey, {
      algorithms: [SIGNING_ALG],
      issuer: info.issuer,
      requiredClaims: ["sub", "exp", "aud"],
    }));
  } catch {
    throw invalid(role);
  }
  const user = await loadUser(ctx.db, info.instance.id, String(payload.sub));
  if (!isActive(user)) throw invalid(role, "belongs to a user who is not active");
  const act = actClaim(payload.act);
  return {
    user,
    audience: typeof payload.aud === "string" ? [payload.aud] : (payload.aud ?? []),
    scope: [Scope.openid],
    expiresAt: new Date(payload.exp! * 1000),
    act,
    tokenIds: [],
    patIds: [],
    sessionId: typeof payload.sid === "string" ? payload.sid : null,
    authTime: typeof payload.auth_time === "number" ? new Date(payload.auth_time * 1000) : null,
    amr: Array.isArray(payload.amr) ? payload.amr.map(String) : null,
  };
}

/**
 * A JWT the requesting client signed with one of its keys (`kid` = key ID): `iss` = the client ID, `sub` =
 * an active user of the instance, `aud` = the issuer or the token endpoint, `iat` at most an hour old, `exp`.
 */
async function clientJwtOf(
  ctx: OidcContext,
  info: RequestInfo,
  client: OidcClient,
  endpointUrl: string,
  role: Role,
  value: string,
): Promise<Presented> {
  let kid: string | undefined;
  try {
    kid = decodeProtectedHeader(value).kid;
  } catch {
    throw invalid(role, "is not a JWT");
  }
  let payload: JWTPayload | undefined;
  const now = Date.now();
  for (const key of await client.publicKeys(kid)) {
    if (key.expiresAt && key.expiresAt.getTime() <= now) continue;
    try {
      ({ payload } = await jwtVerify(value, key.key, {
        algorithms: ASSERTION_ALGS,
        issuer: client.clientId,
        audience: [info.issuer, endpointUrl],
        clockTolerance: client.clockSkewSeconds,
        maxTokenAge: ctx.lifetimes.assertionMaxAge,
        requiredClaims: ["sub", "iat", "exp"],
      }));
      break;
    } catch {
      // the next key; none verifying is reported below
    }
  }
  if (!payload) {
    throw invalid(
      role,
      "is not a valid JWT of the client (a key of the client, iss = client ID, aud, iat, exp)",
    );
  }
  const user = await loadUser(ctx.db, info.instance.id, String(payload.sub));
  if (!isActive(user)) throw invalid(role, "names a user (sub) who does not exist or is not active");
  return {
    user,
    audience: [],
    scope: [],
    expiresAt: new Date(payload.exp! * 1000),
    tokenIds: [],
    patIds: [],
  };
}

/** A bare user ID of an active user of the instance. */
async function userIdOf(ctx: OidcContext, info: RequestInfo, role: Role, value: string): Promise<Presented> {
  const user = /^[A-Za-z0-9_-]{1,200}$/.test(value)
    ? await loadUser(ctx.db, info.instance.id, value)
    : undefined;
  if (!isActive(user)) throw invalid(role, "names a user who does not exist or is not active");
  return { user, audience: [], scope: [], tokenIds: [], patIds: [] };
}

/** The `act` claim of a token, when it is well-formed (anything else is ignored). */
function actClaim(value: unknown): ActClaim | undefined {
  if (!value || typeof value !== "object" || typeof (value as ActClaim).sub !== "string") return undefined;
  const nested = actClaim((value as ActClaim).act);
  return { sub: (value as ActClaim).sub, ...(nested ? { act: nested } : {}) };
}

/**
 * Impersonation: the actor needs user.impersonate in the subject's organization (IAM_END_USER_IMPERSONATOR
 * for any user of the instance, ORG_END_USER_IMPERSONATOR for that organization's users).
 */
async function checkImpersonation(
  ctx: OidcContext,
  info: RequestInfo,
  actor: UserRecord,
  subject: UserRecord,
): Promise<void> {
  const caller: Caller = {
    kind: "user",
    userId: actor.id,
    instanceId: info.instance.id,
    orgId: actor.orgId,
    via: "access_token",
  };
  const allowed = await ctx.authorizer.can(caller, IMPERSONATE, {
    type: "org",
    instanceId: info.instance.id,
    orgId: subject.orgId,
  });
  if (!allowed) {
    throw new InvalidRequest(
      `the actor may not impersonate the subject: impersonation needs the permission ${IMPERSONATE} in the subject's organization (role IAM_END_USER_IMPERSONATOR, or ORG_END_USER_IMPERSONATOR of organization ${subject.orgId})`,
    );
  }
  // No control over a more privileged account (src/auth/authorize.ts).
  if (!(await ctx.authorizer.controlsAccount(caller, info.instance.id, subject.id))) {
    throw new InvalidRequest(
      "the actor may not impersonate the subject: the subject holds roles the actor does not hold (no control over a more privileged account)",
    );
  }
}
