import { InvalidArgumentError } from "../../errors.ts";
import {
  ApiAuthMethod,
  type ApiConfig,
  AppKind,
  OidcAppType,
  OidcAuthMethod,
  type OidcConfig,
  OidcGrantType,
  OidcResponseType,
} from "./events.ts";

/** Largest tolerated clock skew of an OIDC app: 5 s (docs/projects.md). */
export const MAX_CLOCK_SKEW_NS = 5_000_000_000;

/** Schemes that never make a redirect target (script or local content). */
const FORBIDDEN_SCHEMES = new Set(["javascript:", "data:", "vbscript:", "file:", "blob:", "about:"]);

const responseTypeName: Record<number, string> = {
  [OidcResponseType.code]: "OIDC_RESPONSE_TYPE_CODE",
  [OidcResponseType.idToken]: "OIDC_RESPONSE_TYPE_ID_TOKEN",
  [OidcResponseType.idTokenToken]: "OIDC_RESPONSE_TYPE_ID_TOKEN_TOKEN",
};

const grantTypeName: Record<number, string> = {
  [OidcGrantType.authorizationCode]: "OIDC_GRANT_TYPE_AUTHORIZATION_CODE",
  [OidcGrantType.implicit]: "OIDC_GRANT_TYPE_IMPLICIT",
  [OidcGrantType.refreshToken]: "OIDC_GRANT_TYPE_REFRESH_TOKEN",
  [OidcGrantType.tokenExchange]: "OIDC_GRANT_TYPE_TOKEN_EXCHANGE",
};

/**
 * The configuration as stored: an empty `grant_types` means [AUTHORIZATION_CODE] and an empty
 * `response_types` [CODE] when the code flow is allowed (as ZITADEL does; an app without it, e.g. only for
 * token exchange, needs no response type); everything else is kept as given (order included).
 */
export function normalizeOidcConfig(config: OidcConfig): OidcConfig {
  const grantTypes = config.grant_types.length ? config.grant_types : [OidcGrantType.authorizationCode];
  const responseTypes =
    config.response_types.length || !grantTypes.includes(OidcGrantType.authorizationCode)
      ? config.response_types
      : [OidcResponseType.code];
  return { ...config, response_types: responseTypes, grant_types: grantTypes };
}

/** `localhost`, 127.0.0.0/8 and ::1 (RFC 8252 §7.3): http is fine there, nobody else can listen. */
export function isLoopbackHost(hostname: string): boolean {
  const host = hostname.toLowerCase();
  return host === "localhost" || /^127(\.\d{1,3}){3}$/.test(host) || host === "[::1]";
}

/**
 * Checks one redirect or post-logout redirect URI: absolute, without fragment; https, or http on a
 * loopback host (any host in dev mode); custom schemes (`com.example.app:/cb`) only for native apps.
 */
function checkRedirectUri(uri: string, config: OidcConfig, field: string): void {
  let url: URL;
  try {
    if (/\s/.test(uri) || !/^[a-zA-Z][a-zA-Z0-9+.-]*:/.test(uri)) throw new Error("not absolute");
    url = new URL(uri);
  } catch {
    throw new InvalidArgumentError("must be an absolute URI", field);
  }
  if (uri.includes("#")) throw new InvalidArgumentError("must not contain a fragment", field);
  const scheme = url.protocol;
  if (FORBIDDEN_SCHEMES.has(scheme))
    throw new InvalidArgumentError(`the scheme ${scheme.slice(0, -1)} is not allowed`, field);
  if (scheme === "https:" || scheme === "http:") {
    if (url.hostname === "") throw new InvalidArgumentError("must name a host", field);
    if (scheme === "http:" && !config.dev_mode && !isLoopbackHost(url.hostname)) {
      throw new InvalidArgumentError(
        "must use https; http is allowed only for loopback hosts (localhost, 127.0.0.1, [::1]) or with dev_mode",
        field,
      );
    }
    return;
  }
  if (config.app_type !== OidcAppType.native) {
    throw new InvalidArgumentError(
      `the custom scheme ${scheme.slice(0, -1)} is allowed only for native apps (OIDC_APP_TYPE_NATIVE)`,
      field,
    );
  }
}

/**
 * The rules a ZITADEL or Keycloak user expects of an OIDC client, on the normalized configuration; the
 * first broken rule throws INVALID_ARGUMENT naming the field under `field` (e.g. `app.oidc`).
 */
export function checkOidcConfig(config: OidcConfig, field: string): void {
  config.redirect_uris.forEach((uri, i) => {
    checkRedirectUri(uri, config, `${field}.redirect_uris[${i}]`);
  });
  config.post_logout_redirect_uris.forEach((uri, i) => {
    checkRedirectUri(uri, config, `${field}.post_logout_redirect_uris[${i}]`);
  });

  const grants = new Set(config.grant_types);
  config.response_types.forEach((type, i) => {
    const needed = type === OidcResponseType.code ? OidcGrantType.authorizationCode : OidcGrantType.implicit;
    if (!grants.has(needed)) {
      throw new InvalidArgumentError(
        `${responseTypeName[type]} needs the grant type ${grantTypeName[needed]}`,
        `${field}.response_types[${i}]`,
      );
    }
  });

  const browserFlow = grants.has(OidcGrantType.authorizationCode) || grants.has(OidcGrantType.implicit);
  if (browserFlow && config.redirect_uris.length === 0) {
    throw new InvalidArgumentError(
      "at least one redirect URI is required for the authorization code and implicit flows",
      `${field}.redirect_uris`,
    );
  }

  // A public client proves at the token endpoint who it is only through PKCE, i.e. after the code flow; an
  // implicit-only client never calls it.
  const tokenGrant = config.grant_types.find(
    (g) => g === OidcGrantType.refreshToken || g === OidcGrantType.tokenExchange,
  );
  if (
    config.auth_method === OidcAuthMethod.none &&
    !grants.has(OidcGrantType.authorizationCode) &&
    tokenGrant !== undefined
  ) {
    throw new InvalidArgumentError(
      `OIDC_AUTH_METHOD_TYPE_NONE (no client authentication) needs OIDC_GRANT_TYPE_AUTHORIZATION_CODE with PKCE for ${grantTypeName[tokenGrant]}`,
      `${field}.auth_method`,
    );
  }
  if (
    config.app_type === OidcAppType.userAgent &&
    (config.auth_method === OidcAuthMethod.basic || config.auth_method === OidcAuthMethod.post)
  ) {
    throw new InvalidArgumentError(
      "user agent apps cannot keep a client secret: use OIDC_AUTH_METHOD_TYPE_NONE (PKCE)",
      `${field}.auth_method`,
    );
  }

  if (
    !Number.isSafeInteger(config.clock_skew_ns) ||
    config.clock_skew_ns < 0 ||
    config.clock_skew_ns > MAX_CLOCK_SKEW_NS
  ) {
    throw new InvalidArgumentError("must be between 0s and 5s", `${field}.clock_skew`);
  }
}

/** Whether an app of this kind and method authenticates with a client secret. */
export function usesSecret(kind: number, authMethod: number): boolean {
  if (kind === AppKind.oidc) return authMethod === OidcAuthMethod.basic || authMethod === OidcAuthMethod.post;
  return authMethod === ApiAuthMethod.basic;
}

/** Whether an app of this kind and method authenticates with its keys (private_key_jwt). */
export function usesKeys(kind: number, authMethod: number): boolean {
  return kind === AppKind.oidc
    ? authMethod === OidcAuthMethod.privateKeyJwt
    : authMethod === ApiAuthMethod.privateKeyJwt;
}

/** Two configurations are the same (a patch with no change appends nothing). */
export function sameConfig(a: OidcConfig | ApiConfig, b: OidcConfig | ApiConfig): boolean {
  return JSON.stringify(a, Object.keys(a).sort()) === JSON.stringify(b, Object.keys(b).sort());
}
