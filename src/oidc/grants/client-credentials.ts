import { authenticateClient } from "../client-auth.ts";
import { GrantType } from "../clients.ts";
import { UnauthorizedClient } from "../errors.ts";
import { issueTokens, resolveAudience, withoutOfflineAccess } from "../issue.ts";
import { parseScope } from "../scopes.ts";
import type { Grant } from "./types.ts";

/**
 * `client_credentials` (RFC 6749 §4.4): a machine user authenticates with its `_generate_secret`
 * credentials and gets an access token for itself. Apps may not use it (unauthorized_client). No refresh
 * token and no ID token are issued.
 */
export const clientCredentialsGrant: Grant = async (ctx, info, request) => {
  const { client } = await authenticateClient(
    ctx,
    info,
    request.authorization,
    request.params,
    "token",
    request.endpointUrl,
  );
  if (client.kind !== "machine" || !client.grantTypes.has(GrantType.clientCredentials) || !client.userId) {
    throw new UnauthorizedClient("client_credentials is only for machine users");
  }
  const scope = withoutOfflineAccess(parseScope(request.params.get("scope")));
  const audience = await resolveAudience(ctx, info, client, scope);
  return issueTokens(ctx, info, { client, subject: client.userId, scope, audience, idToken: false });
};
