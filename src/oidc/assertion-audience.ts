import type { AssertionAudienceProfile } from "../config.ts";
import { endpointUrl, type RequestInfo } from "./context.ts";
import { OidcPath } from "./issuer.ts";

/**
 * The one rule for the `aud` of every JWT a client or machine user signs for this server: client assertions
 * (private_key_jwt) at each endpoint that authenticates clients, the jwt-bearer grant's assertions and the
 * client-signed JWTs of token exchange. The assertion names exactly one audience, and that audience is this
 * server:
 *
 * - `compatible`: the issuer, the token endpoint's URL or the URL of the endpoint called, as a string or as a
 *   one-element array (the defaults of golang.org/x/oauth2/jwt, Authlib and openid-client all pass);
 * - `strict`: the issuer, as a string.
 *
 * An array with any further member is refused in both: an assertion that also names another party was made
 * for that party as well, and could be played here by it (the audience injection of RFC 7523bis).
 * Returns why `aud` is refused, or undefined when it is accepted.
 */
export function assertionAudienceProblem(
  aud: unknown,
  profile: AssertionAudienceProfile,
  info: RequestInfo,
  calledUrl: string,
): string | undefined {
  if (profile === "strict") {
    if (aud === info.issuer) return undefined;
    return `aud must be the issuer ${info.issuer} as a single string (the strict profile: no array, no endpoint URL)`;
  }
  const accepted = acceptedAudiences(info, calledUrl);
  const single = Array.isArray(aud) && aud.length === 1 ? aud[0] : aud;
  if (typeof single === "string" && accepted.includes(single)) return undefined;
  const named = accepted.join(", ");
  if (Array.isArray(aud) && aud.length > 1) {
    return `aud must name one audience, not ${aud.length}: one of ${named}`;
  }
  return `aud must be one of ${named}, as a string or a one-element array`;
}

/** The issuer, the token endpoint's URL and the called endpoint's URL (once when it is the token endpoint). */
function acceptedAudiences(info: RequestInfo, calledUrl: string): string[] {
  const token = endpointUrl(info, OidcPath.token);
  return calledUrl === token ? [info.issuer, token] : [info.issuer, token, calledUrl];
}
