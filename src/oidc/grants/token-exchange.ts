import { decodeJwt } from "jose";
import type { Caller } from "../../auth/caller.ts";
import { impersonatedEvent } from "../../domain/user/commands.ts";
import { newId } from "../../id.ts";
import type { UserRecord } from "../claims.ts";
import { authenticateClient } from "../client-auth.ts";
import { GrantType } from "../clients.ts";
import type { OidcContext, RequestInfo } from "../context.ts";
import {
  InvalidRequest,
  InvalidScope,
  InvalidTarget,
  UnauthorizedClient,
  UnsupportedGrantType,
} from "../errors.ts";
import { multiValues, required } from "../http.ts";
import { type Issuance, idToken, prepareTokens, storeTokens, type TokenResponse } from "../issue.ts";
import {
  MANAGEMENT_PROJECT_ALIAS,
  type ParsedScope,
  parseScope,
  Reserved,
  Scope,
  scopeFromValues,
} from "../scopes.ts";
import type { ActClaim, Lineage } from "../token-store.ts";
import { type Presenter, presentedToken, TokenType, unique } from "./exchange-tokens.ts";
import type { Grant } from "./types.ts";

const KNOWN_TYPES = new Set<string>(Object.values(TokenType));

/** Where each token type is allowed (anything else: invalid_request). */
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

/**
 * `urn:ietf:params:oauth:grant-type:token-exchange` (RFC 8693), only while the instance's `token_exchange`
 * flag is on (else unsupported_grant_type) and for clients with OIDC_GRANT_TYPE_TOKEN_EXCHANGE (else
 * unauthorized_client); docs/token-exchange.md.
 *
 * The subject and actor tokens must still be valid credentials meant for the requesting client
 * (./exchange-tokens.ts). The issued tokens are for the subject's user. Their audience is `audience` (each
 * value one of the subject's or actor's audiences, else invalid_target) or the subject's, plus the projects
 * of audience scopes in `scope` (same rule); their scope is `scope` or the subject's, never wider than the
 * subject token was granted (the actor's when the subject has no scope of its own; else invalid_scope). An
 * actor token of another user is impersonation: the actor needs `user.impersonate` in the subject's
 * organization, the tokens carry `act: {sub: <actor>}` and a `user.impersonated` event records it. No token
 * issued outlives the subject or actor token, and each stays active only while they (and their sessions) do.
 */
export const tokenExchangeGrant: Grant = async (ctx, info, request) => {
  const { params } = request;
  if (!(await ctx.features.flags(info.instance.id)).token_exchange) {
    throw new UnsupportedGrantType(
      "token exchange is disabled for this instance (feature token_exchange, PATCH /settings/v3alpha/features)",
    );
  }
  const { client, method } = await authenticateClient(
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
  const presenter: Presenter = { client, isPublic: method === "none", endpointUrl: request.endpointUrl };

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

  const subject = await presentedToken(ctx, info, presenter, "subject_token", subjectToken, subjectType);
  const actor =
    actorToken === undefined
      ? undefined
      : await presentedToken(ctx, info, presenter, "actor_token", actorToken, actorType!);
  if (actor?.act) {
    throw new InvalidRequest("actor_token is an impersonation token itself; an actor acts as itself only");
  }

  // Audience: requested values within the subject's and actor's audiences, else the subject's (actor's).
  const available = new Set([...subject.audience, ...(actor?.audience ?? [])]);
  const requestedAudience = unique(multiValues(params, "audience"));
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
  /** A scope value as granted: an audience scope by the project it names (`platform` is an alias). */
  const canonical = (value: string) => {
    const project = Reserved.projectAudience.exec(value)?.[1];
    return project === undefined ? value : `aud:${projectAudience(project)}`;
  };

  // Scope: never wider than what the subject token was granted (the actor token's when the subject has no
  // scope of its own: a PAT, a jwt or a user ID), as a refresh never widens its grant.
  const grantedBy = subject.scope === undefined && actor ? "actor_token" : "subject_token";
  const granted = subject.scope ?? actor?.scope ?? [];
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
    }
    const grantedValues = new Set(granted.map(canonical));
    const wider = scope.values.find((v) => !grantedValues.has(canonical(v)));
    if (wider !== undefined) {
      throw new InvalidScope(
        `scope ${wider} was not granted to the ${grantedBy}: an exchange may only keep or narrow its scope`,
      );
    }
    for (const project of scope.audienceProjects) {
      const id = projectAudience(project);
      if (!audience.includes(id)) audience.push(id);
    }
  } else {
    scope = scopeFromValues(
      granted.filter((value) => {
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
  // Every exchanged token has a lineage: it marks the token as exchanged, and it ends with what it names.
  const lineage: Lineage = {
    ...(act ? { act } : {}),
    tokenIds: unique([...subject.tokenIds, ...(actor?.tokenIds ?? [])]),
    patIds: unique([...subject.patIds, ...(actor?.patIds ?? [])]),
    sessionIds: unique([...subject.sessionIds, ...(actor?.sessionIds ?? [])]),
  };
  const ends = [subject.expiresAt, actor?.expiresAt].filter((d): d is Date => d !== undefined);
  const notAfter = ends.length ? new Date(Math.min(...ends.map((d) => d.getTime()))) : undefined;

  // A refresh token only for a client that can keep it (confidential) and may refresh; otherwise
  // offline_access is not granted (left out of the scope, RFC 6749 §3.3).
  const offline =
    requestedType !== TokenType.idToken &&
    scope.values.includes(Scope.offlineAccess) &&
    !presenter.isPublic &&
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
