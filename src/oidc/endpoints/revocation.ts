import { isJwt, storedAccessToken } from "../access-tokens.ts";
import { authenticateClient } from "../client-auth.ts";
import type { OidcContext, RequestInfo } from "../context.ts";
import { type Params, required } from "../http.ts";
import { parseHandle, secretMatches } from "../token-store.ts";

/**
 * Token revocation (RFC 7009): an access token (opaque or JWT) revokes itself only; a refresh token
 * revokes its whole family, refresh and access tokens. Unknown tokens and tokens of other clients change
 * nothing and answer 200 all the same.
 */
export async function revocationEndpoint(
  ctx: OidcContext,
  info: RequestInfo,
  params: Params,
  authorization: string | undefined,
  endpointUrl: string,
): Promise<void> {
  const { client } = await authenticateClient(ctx, info, authorization, params, "revocation", endpointUrl);
  const token = required(params, "token");
  const instanceId = info.instance.id;
  const handle = isJwt(token) ? undefined : parseHandle(token);
  if (!handle || handle.kind === "at") {
    const stored = await storedAccessToken(ctx, instanceId, token);
    if (stored && stored.clientId === client.clientId)
      await ctx.tokens.revokeAccessToken(instanceId, stored.id);
  } else if (handle.kind === "rt") {
    const stored = await ctx.tokens.findRefreshToken(instanceId, handle.id);
    if (stored && secretMatches(handle, stored.secretHash) && stored.clientId === client.clientId) {
      await ctx.tokens.revokeFamily(instanceId, stored.familyId);
    }
  }
}
