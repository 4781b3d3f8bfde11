/**
 * The subject and actor tokens of a token exchange (RFC 8693, docs/token-exchange.md): each is checked as the
 * credential it still is — valid, unrevoked, of a live browser session when it came from one, meant for the
 * requesting client — and tells whose it is and what it may pass on (audience, scope, end, lineage).
 */
import { decodeProtectedHeader, type JWTPayload, jwtVerify } from "jose";
import { sha256 } from "../../crypto/tokens.ts";
import { activeAccessToken, isJwt } from "../access-tokens.ts";
import { assertionAudienceProblem } from "../assertion-audience.ts";
import { isActive, loadUser, type UserRecord } from "../claims.ts";
import { ASSERTION_ALGS } from "../client-auth.ts";
import type { OidcClient } from "../clients.ts";
import type { OidcContext, RequestInfo } from "../context.ts";
import { InvalidRequest } from "../errors.ts";
import { Scope } from "../scopes.ts";
import { type ActClaim, actorsOf, parseHandle } from "../token-store.ts";

/** Token type identifiers (RFC 8693 §3, and this provider's user ID type). */
export const TokenType = {
  accessToken: "urn:ietf:params:oauth:token-type:access_token",
  refreshToken: "urn:ietf:params:oauth:token-type:refresh_token",
  idToken: "urn:ietf:params:oauth:token-type:id_token",
  jwt: "urn:ietf:params:oauth:token-type:jwt",
  userId: "urn:platform:params:oauth:token-type:user_id",
} as const;
export type TokenType = (typeof TokenType)[keyof typeof TokenType];

export type Role = "subject_token" | "actor_token";

/** The client presenting the tokens. */
export interface Presenter {
  client: OidcClient;
  /** It authenticated with `client_id` alone (method none): anyone may claim to be it. */
  isPublic: boolean;
  /** The token endpoint's URL (an accepted `aud` of a `jwt` subject token). */
  endpointUrl: string;
}

/** A subject or actor token, checked: whose it is and what it may pass on. */
export interface Presented {
  user: UserRecord;
  /** The audiences it lets the new tokens have. */
  audience: string[];
  /** The scope it was granted; undefined when it has none of its own (a PAT, a `jwt`, a user ID). */
  scope?: string[];
  /** When it stops being valid (undefined: a user ID, or a PAT without expiration). */
  expiresAt?: Date;
  /** It is an impersonation token itself. */
  act?: ActClaim;
  /** Itself and what it descends from (stored tokens and PATs). */
  tokenIds: string[];
  patIds: string[];
  /** The browser sessions it lasts only as long as: its own and its ancestors'. */
  sessionIds: string[];
  sessionId?: string | null;
  authTime?: Date | null;
  amr?: string[] | null;
}

/** invalid_request for a subject or actor token that is not (or no longer, or not here) valid. */
export function invalid(role: Role, why = "is invalid or expired"): InvalidRequest {
  return new InvalidRequest(`${role} ${why}`);
}

/** Checks a subject or actor token of its type and tells whose it is. */
export async function presentedToken(
  ctx: OidcContext,
  info: RequestInfo,
  presenter: Presenter,
  role: Role,
  value: string,
  type: TokenType,
): Promise<Presented> {
  switch (type) {
    case TokenType.accessToken:
      return accessTokenOf(ctx, info, presenter, role, value);
    case TokenType.idToken:
      return idTokenOf(ctx, info, presenter, role, value);
    case TokenType.jwt:
      return clientJwtOf(ctx, info, presenter, role, value);
    case TokenType.userId:
      return userIdOf(ctx, info, role, value);
    default:
      throw invalid(role);
  }
}

/** The client is named in an audience: by its client ID, or by its project (the resource-server case). */
function names(audience: readonly string[], client: OidcClient): boolean {
  return audience.includes(client.clientId) || (!!client.projectId && audience.includes(client.projectId));
}

/**
 * An access token of this provider (opaque or JWT, active with its lineage), meant for the requesting
 * client, of a browser session that lasts; or a personal access token (confidential clients only).
 */
async function accessTokenOf(
  ctx: OidcContext,
  info: RequestInfo,
  presenter: Presenter,
  role: Role,
  value: string,
): Promise<Presented> {
  const instanceId = info.instance.id;
  const { client } = presenter;
  if (isJwt(value) || parseHandle(value)?.kind === "at") {
    const stored = await activeAccessToken(ctx, instanceId, value);
    if (!stored?.user) throw invalid(role);
    // A public client cannot prove who it is: it passes on only what was issued to it. A confidential client
    // may also pass on a token that names it as an audience (it received the token as a resource server).
    if (stored.clientId !== client.clientId) {
      if (presenter.isPublic) {
        throw invalid(role, "was issued to another client; a public client may exchange only its own tokens");
      }
      if (!names(stored.audience, client)) {
        throw invalid(
          role,
          "was issued to another client and its audience names neither this client nor its project",
        );
      }
    }
    if (stored.sessionId && !(await ctx.tokens.liveSessions(instanceId, [stored.sessionId])).size) {
      throw invalid(role, "was issued in a session that has ended (signed out)");
    }
    return {
      user: stored.user,
      audience: stored.audience,
      scope: stored.scope,
      expiresAt: stored.expiresAt,
      act: stored.lineage?.act,
      tokenIds: [...(stored.lineage?.tokenIds ?? []), stored.id],
      patIds: stored.lineage?.patIds ?? [],
      sessionIds: unique([
        ...(stored.lineage?.sessionIds ?? []),
        ...(stored.sessionId ? [stored.sessionId] : []),
      ]),
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
  if (presenter.isPublic) {
    throw invalid(role, "is a personal access token; a public client may exchange only its own tokens");
  }
  const user = await loadUser(ctx.db, instanceId, pat.user_id);
  if (!isActive(user)) throw invalid(role, "belongs to a user who is not active");
  // A PAT is good for the management APIs: that is its audience. It carries no scope of its own.
  return {
    user,
    audience: [info.instance.iamProjectId],
    expiresAt,
    tokenIds: [],
    patIds: [pat.id],
    sessionIds: [],
  };
}

/**
 * An ID token this instance signed (under this issuer), unexpired, of an active user, issued to the
 * requesting client (OpenID Connect Core §2: it is for that client only) in a browser session that lasts
 * (its `sid`). It proves a sign-in, nothing more: its scope is `openid`, its audience at most the client and
 * the client's project (never the APIs the access token of that sign-in was for).
 */
async function idTokenOf(
  ctx: OidcContext,
  info: RequestInfo,
  presenter: Presenter,
  role: Role,
  value: string,
): Promise<Presented> {
  let payload: JWTPayload;
  try {
    const { kid, typ } = decodeProtectedHeader(value);
    const key = kid ? await ctx.keys.verificationKey(info.instance.id, kid) : undefined;
    // JWT access tokens are signed by the same keys; they are typed at+jwt.
    if (!key || typ !== "JWT") throw new Error("not an ID token of this instance");
    ({ payload } = await jwtVerify(value, key.publicKey, {
      algorithms: [key.alg],
      issuer: info.issuer,
      requiredClaims: ["sub", "exp", "aud"],
    }));
  } catch {
    throw invalid(role);
  }
  const { client } = presenter;
  const aud = typeof payload.aud === "string" ? [payload.aud] : (payload.aud ?? []);
  const issuedTo = typeof payload.azp === "string" ? payload.azp : aud.length === 1 ? aud[0] : undefined;
  if (issuedTo !== client.clientId) {
    throw invalid(role, "is an ID token of another client; only the client it was issued to may exchange it");
  }
  const act = actClaim(payload.act);
  if (typeof payload.sid !== "string" || payload.sid === "") {
    throw invalid(
      role,
      "is an ID token without a session (sid); only an ID token of a browser session is accepted, while the session lasts",
    );
  }
  // The session belongs to the subject, or, for an impersonation, to one of its actors.
  const sessionUser = (await ctx.tokens.liveSessions(info.instance.id, [payload.sid])).get(payload.sid);
  if (!sessionUser || (sessionUser !== payload.sub && !actorsOf(act).includes(sessionUser))) {
    throw invalid(role, "was issued in a session that has ended (signed out)");
  }
  const user = await loadUser(ctx.db, info.instance.id, String(payload.sub));
  if (!isActive(user)) throw invalid(role, "belongs to a user who is not active");
  return {
    user,
    audience: aud.filter((a) => a === client.clientId || (!!client.projectId && a === client.projectId)),
    scope: [Scope.openid],
    expiresAt: new Date(payload.exp! * 1000),
    act,
    tokenIds: [],
    patIds: [],
    sessionIds: [payload.sid],
    sessionId: payload.sid,
    authTime: typeof payload.auth_time === "number" ? new Date(payload.auth_time * 1000) : null,
    amr: Array.isArray(payload.amr) ? payload.amr.map(String) : null,
  };
}

/**
 * A JWT the requesting client signed with one of its keys (`kid` = key ID): `iss` = the client ID, `sub` =
 * an active user of the instance, `aud` one audience naming this server (../assertion-audience.ts: the
 * issuer or the token endpoint; the issuer alone in the strict profile), `iat` at most an hour old, `exp`.
 */
async function clientJwtOf(
  ctx: OidcContext,
  info: RequestInfo,
  presenter: Presenter,
  role: Role,
  value: string,
): Promise<Presented> {
  const { client } = presenter;
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
    throw invalid(role, "is not a valid JWT of the client (a key of the client, iss = client ID, iat, exp)");
  }
  const wrongAudience = assertionAudienceProblem(
    payload.aud,
    ctx.config.assertionAudience,
    info,
    presenter.endpointUrl,
  );
  if (wrongAudience) throw invalid(role, `has a wrong audience: ${wrongAudience}`);
  const user = await loadUser(ctx.db, info.instance.id, String(payload.sub));
  if (!isActive(user)) throw invalid(role, "names a user (sub) who does not exist or is not active");
  return {
    user,
    audience: [],
    expiresAt: new Date(payload.exp! * 1000),
    tokenIds: [],
    patIds: [],
    sessionIds: [],
  };
}

/** A bare user ID of an active user of the instance. */
async function userIdOf(ctx: OidcContext, info: RequestInfo, role: Role, value: string): Promise<Presented> {
  const user = /^[A-Za-z0-9_-]{1,200}$/.test(value)
    ? await loadUser(ctx.db, info.instance.id, value)
    : undefined;
  if (!isActive(user)) throw invalid(role, "names a user who does not exist or is not active");
  return { user, audience: [], tokenIds: [], patIds: [], sessionIds: [] };
}

/** The `act` claim of a token, when it is well-formed (anything else is ignored). */
function actClaim(value: unknown): ActClaim | undefined {
  if (!value || typeof value !== "object" || typeof (value as ActClaim).sub !== "string") return undefined;
  const nested = actClaim((value as ActClaim).act);
  return { sub: (value as ActClaim).sub, ...(nested ? { act: nested } : {}) };
}

export function unique<T>(values: Iterable<T>): T[] {
  return [...new Set(values)];
}
