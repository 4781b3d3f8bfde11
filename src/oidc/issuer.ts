import { type Config, externalOrigin } from "../config.ts";
import { hostWithoutPort } from "../query/instances.ts";

/** The OIDC endpoint paths, relative to the issuer. */
export const OidcPath = {
  discovery: "/.well-known/openid-configuration",
  authorize: "/oauth/v2/authorize",
  token: "/oauth/v2/token",
  introspect: "/oauth/v2/introspect",
  userinfo: "/oidc/v1/userinfo",
  revoke: "/oauth/v2/revoke",
  endSession: "/oidc/v1/end_session",
  keys: "/oauth/v2/keys",
} as const;

/**
 * The issuer of a request: `<scheme>://<host>[:port]` with the host the request addressed (always one of
 * the instance's domains, since that is how the instance was found), like ZITADEL: an instance reachable
 * under several domains is its own issuer under each, and tokens carry the issuer they were issued under.
 * Scheme and port are the external ones (PLATFORM_EXTERNAL_SECURE / _PORT); an external port of 0 (a server
 * on an ephemeral port, as in tests) means the port the client used.
 */
export function issuerFor(config: Config, host: string): string {
  let domain = hostWithoutPort(host);
  if (domain.includes(":")) domain = `[${domain}]`;
  let port = config.externalPort;
  if (port === 0) {
    const match = /:(\d+)$/.exec(host.trim());
    port = match ? Number(match[1]) : config.externalSecure ? 443 : 80;
  }
  return externalOrigin({ ...config, externalPort: port }, domain);
}
