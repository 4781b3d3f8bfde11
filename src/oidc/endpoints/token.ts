import type { GrantName } from "../../metrics/metrics.ts";
import { GrantType } from "../clients.ts";
import type { OidcContext, RequestInfo } from "../context.ts";
import { UnsupportedGrantType } from "../errors.ts";
import { authorizationCodeGrant } from "../grants/authorization-code.ts";
import { clientCredentialsGrant } from "../grants/client-credentials.ts";
import { jwtBearerGrant } from "../grants/jwt-bearer.ts";
import { refreshTokenGrant } from "../grants/refresh-token.ts";
import { tokenExchangeGrant } from "../grants/token-exchange.ts";
import type { Grant } from "../grants/types.ts";
import { type Params, required } from "../http.ts";
import type { TokenResponse } from "../issue.ts";

/** Each grant type with its name in the metrics. */
const grants: Record<string, { grant: Grant; name: GrantName }> = {
  [GrantType.authorizationCode]: { grant: authorizationCodeGrant, name: "authorization_code" },
  [GrantType.refreshToken]: { grant: refreshTokenGrant, name: "refresh_token" },
  [GrantType.clientCredentials]: { grant: clientCredentialsGrant, name: "client_credentials" },
  [GrantType.jwtBearer]: { grant: jwtBearerGrant, name: "jwt_bearer" },
  [GrantType.tokenExchange]: { grant: tokenExchangeGrant, name: "token_exchange" },
};

/** Token parameters that may be given more than once (RFC 8693 §2.1: `audience`, `resource`). */
export const MULTI_VALUED_TOKEN_PARAMS: ReadonlySet<string> = new Set(["audience", "resource"]);

/** The token endpoint (RFC 6749 §3.2): dispatches on `grant_type`; unknown types are unsupported_grant_type. */
export async function tokenEndpoint(
  ctx: OidcContext,
  info: RequestInfo,
  params: Params,
  authorization: string | undefined,
  endpointUrl: string,
): Promise<TokenResponse> {
  const grantType = required(params, "grant_type");
  const known = Object.hasOwn(grants, grantType) ? grants[grantType] : undefined;
  if (!known) throw new UnsupportedGrantType(`grant_type ${grantType} is not supported`);
  const response = await known.grant(ctx, info, { params, authorization, endpointUrl });
  ctx.metrics?.tokenIssued(known.name);
  return response;
}
