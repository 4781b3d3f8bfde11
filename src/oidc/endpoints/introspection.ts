import { acrOf } from "../../domain/session/amr.ts";
import { activeAccessToken } from "../access-tokens.ts";
import { loadMetadata, loadUserData, loginName, roleClaims, userClaims } from "../claims.ts";
import { authenticateClient } from "../client-auth.ts";
import type { OidcClient } from "../clients.ts";
import type { OidcContext, RequestInfo } from "../context.ts";
import { withFunctionClaims } from "../functions.ts";
import { type Params, required } from "../http.ts";
import { Reserved, scopeFromValues } from "../scopes.ts";
import { actorsOf, type StoredAccessToken } from "../token-store.ts";

/**
 * Whether the caller is the token's audience, decided by identity. An app: its project is in the audience
 * (project IDs are generated, and no client ID can take their form), or its client ID. A machine user: its
 * client ID is in the audience and it is the token's user or one of its actors (token exchange), by user
 * ID: a username that once was another machine user's does not make that user's tokens its own.
 */
function isAudience(caller: OidcClient, token: StoredAccessToken): boolean {
  if (caller.kind === "machine") {
    return (
      token.audience.includes(caller.clientId) &&
      (token.subject === caller.userId || actorsOf(token.lineage?.act).includes(caller.userId!))
    );
  }
  return (
    token.audience.includes(caller.clientId) ||
    (caller.projectId !== undefined && token.audience.includes(caller.projectId))
  );
}

/**
 * Token introspection (RFC 7662): client_secret_basic or private_key_jwt only. `active: false` for
 * expired, revoked, malformed and unknown tokens and for callers that are not its audience (`isAudience`);
 * else the token's fields, `username` (`<username>@<primary domain>`), `act` for an impersonation token
 * (token exchange), the user claims its scope allows and its roles.
 */
export async function introspectionEndpoint(
  ctx: OidcContext,
  info: RequestInfo,
  params: Params,
  authorization: string | undefined,
  endpointUrl: string,
): Promise<Record<string, unknown>> {
  const { client } = await authenticateClient(ctx, info, authorization, params, "introspection", endpointUrl);
  const token = required(params, "token");
  const stored = await activeAccessToken(ctx, info.instance.id, token);
  if (!stored?.user) return { active: false };
  if (!isAudience(client, stored)) return { active: false };
  const audience = stored.audience;
  const scope = scopeFromValues(stored.scope);
  const user = stored.user;
  const tokenClient =
    stored.clientId === client.clientId
      ? client
      : await ctx.clients.byClientId(info.instance.id, stored.clientId);
  const [metadata, data, roles] = await Promise.all([
    scope.values.includes(Reserved.metadata) ? loadMetadata(ctx.db, info.instance.id, user.id) : undefined,
    loadUserData(ctx.db, info.instance.id, user.id, scope),
    roleClaims(
      ctx.userGrants,
      info.instance.id,
      user.id,
      scope,
      {
        clientProjectId: tokenClient?.projectId,
        audienceProjectIds: audience.filter((a) => a !== stored.clientId),
      },
      tokenClient?.projectRoleAssertion === true,
    ),
  ]);
  const iat = Math.floor(stored.issuedAt.getTime() / 1000);
  const claims = {
    active: true,
    scope: stored.scope.join(" "),
    client_id: stored.clientId,
    token_type: "Bearer",
    exp: Math.floor(stored.expiresAt.getTime() / 1000),
    iat,
    nbf: iat,
    sub: user.id,
    aud: audience,
    iss: stored.issuer,
    jti: stored.id,
    username: loginName(user),
    ...(stored.authTime ? { auth_time: Math.floor(stored.authTime.getTime() / 1000) } : {}),
    ...(stored.amr?.length ? { amr: stored.amr } : {}),
    ...(acrOf(stored.amr) ? { acr: acrOf(stored.amr) } : {}),
    ...(stored.lineage?.act ? { act: stored.lineage.act } : {}),
    ...userClaims(user, scope, { metadata, data }),
    ...roles,
  };
  return withFunctionClaims(ctx, info, "preuserinfo", { userId: user.id, user }, tokenClient, claims);
}
