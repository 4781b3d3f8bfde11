import type { OidcContext, RequestInfo } from "../context.ts";
import type { Params } from "../http.ts";
import type { TokenResponse } from "../issue.ts";

/** A token request as a grant sees it. */
export interface TokenRequest {
  params: Params;
  /** The raw Authorization header (client_secret_basic). */
  authorization: string | undefined;
  /** This token endpoint's URL (an accepted `aud` of client assertions). */
  endpointUrl: string;
}

/** One grant type of the token endpoint (like node-oidc-provider's lib/actions/grants/*). */
export type Grant = (ctx: OidcContext, info: RequestInfo, request: TokenRequest) => Promise<TokenResponse>;
