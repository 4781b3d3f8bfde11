import { activeAccessToken } from "../access-tokens.ts";
import { loadMetadata, loadUserData, roleClaims, userClaims } from "../claims.ts";
import type { OidcContext, RequestInfo } from "../context.ts";
import { InvalidRequest, InvalidToken } from "../errors.ts";
import { withFunctionClaims } from "../functions.ts";
import type { Params } from "../http.ts";
import { Reserved, scopeFromValues } from "../scopes.ts";

/**
 * The bearer access token of a userinfo request: `Authorization: Bearer`, or (POST, RFC 6750 §2.2) the
 * form parameter `access_token`; not both.
 */
export function bearerToken(authorization: string | undefined, params?: Params): string {
  const fromHeader = authorization ? /^Bearer[ ]+([^\s]+)\s*$/i.exec(authorization)?.[1] : undefined;
  if (authorization && !fromHeader) throw new InvalidToken("the Authorization header must be Bearer <token>");
  const fromBody = params?.get("access_token");
  if (fromHeader && fromBody) throw new InvalidRequest("the access token may be sent only once");
  const token = fromHeader ?? fromBody;
  if (!token) throw new InvalidToken("an access token is required (Authorization: Bearer)");
  return token;
}

/** Userinfo (OpenID Connect Core §5.3): the user claims the token's scope allows, and its roles. */
export async function userinfoEndpoint(
  ctx: OidcContext,
  info: RequestInfo,
  token: string,
): Promise<Record<string, unknown>> {
  const stored = await activeAccessToken(ctx, info.instance.id, token);
  if (!stored?.user) throw new InvalidToken();
  const scope = scopeFromValues(stored.scope);
  const user = stored.user;
  const client = await ctx.clients.byClientId(info.instance.id, stored.clientId);
  const [metadata, data, roles] = await Promise.all([
    scope.values.includes(Reserved.metadata) ? loadMetadata(ctx.db, info.instance.id, user.id) : undefined,
    loadUserData(ctx.db, info.instance.id, user.id, scope),
    roleClaims(
      ctx.userGrants,
      info.instance.id,
      user.id,
      scope,
      {
        clientProjectId: client?.projectId,
        audienceProjectIds: stored.audience.filter((a) => a !== stored.clientId),
      },
      client?.projectRoleAssertion === true,
    ),
  ]);
  const claims = { sub: user.id, ...userClaims(user, scope, { metadata, data }), ...roles };
  return withFunctionClaims(ctx, info, "preuserinfo", { userId: user.id, user }, client, claims);
}
