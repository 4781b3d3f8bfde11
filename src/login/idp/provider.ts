/**
 * The relying-party side of a sign-in with an external identity provider (openid-client): the
 * authorization URL (state, nonce, PKCE S256) and, at the callback, the code exchange with every check
 * openid-client makes (state, issuer, ID token signature, audience, nonce, PKCE), then the identity the
 * provider answered.
 *
 * - `oidc`, `codehost_b_self_hosted`: OpenID Connect discovery at the provider's `issuer`;
 * - `codehost_b`: the same at the fixed public issuer, or PLATFORM_IDP_CODEHOST_B_ISSUER;
 * - `oauth`: plain OAuth 2.0 with the configured endpoints; the identity comes from the user endpoint
 *   (its `id_attribute`, default `id`).
 *
 * Claims of OIDC providers: the ID token's when the provider maps from it (`is_id_token_mapping`), else
 * the userinfo endpoint's (checked to be about the ID token's `sub`).
 */
import type * as Client from "openid-client";
import type { OutboundLevel } from "../../net/outbound.ts";
import type { LoginIdp } from "../../query/idps.ts";

/** The identity an external provider answered, in the form the login flow maps to a user. */
export interface ExternalIdentity {
  /** The identity's ID at the provider (`sub`, or the OAuth user endpoint's ID attribute). */
  id: string;
  /** `preferred_username` (else the e-mail address, else the ID). */
  username: string;
  givenName: string;
  familyName: string;
  displayName: string;
  email: string;
  emailVerified: boolean;
  preferredLanguage?: string;
}

/** What the callback needs to finish what `authorizationRequest` started (stored with the intent). */
export interface AuthorizationChecks {
  state: string;
  nonce: string;
  codeVerifier: string;
}

const DISCOVERY_TTL_MS = 5 * 60 * 1000;
const TIMEOUT_SECONDS = 10;

/**
 * How this process reaches providers: the codehost_b issuer, and per level of the outbound-address policy
 * (src/net/outbound.ts) the fetch every request to a provider goes through (discovery, keys, token,
 * userinfo, user endpoint), so an organization owner cannot point a provider at an address closed to
 * organizations, and nobody at one closed to every outbound connection.
 */
export interface ProviderAccess {
  codehostBIssuer: string;
  fetch: Record<OutboundLevel, Client.CustomFetch>;
}

/**
 * The level whose guard a provider's requests pass: its owner's, except for codehost_b, whose issuer the
 * operator chose (PLATFORM_IDP_CODEHOST_B_ISSUER), whoever created the provider.
 */
export function outboundLevelOf(idp: LoginIdp): OutboundLevel {
  return idp.type === "codehost_b" ? "instance" : idp.owner;
}
const discovered = new Map<string, { config: Promise<Client.Configuration>; expires: number }>();

/** openid-client, loaded at the first sign-in with a provider (a server without providers never needs it). */
let loaded: Promise<typeof Client> | undefined;
const openidClient = () => (loaded ??= import("openid-client"));

/** The issuer of an OIDC-based provider (undefined for plain OAuth 2.0). */
function issuerOf(idp: LoginIdp, codehostBIssuer: string): string | undefined {
  if (idp.type === "codehost_b") return codehostBIssuer;
  if (idp.type === "oauth") return undefined;
  return idp.config.issuer;
}

/**
 * openid-client talks https only; a provider at an `http:` address (a local provider in development and
 * tests, an issuer set by the operator) is allowed explicitly.
 */
function options(client: typeof Client, url: string, fetch: Client.CustomFetch) {
  const common = { timeout: TIMEOUT_SECONDS, [client.customFetch]: fetch };
  return url.startsWith("http:") ? { ...common, execute: [client.allowInsecureRequests] } : common;
}

/**
 * The provider's client configuration (discovery cached for 5 minutes per issuer, client and level: the
 * configuration keeps the fetch it was discovered with).
 */
async function configurationOf(idp: LoginIdp, access: ProviderAccess): Promise<Client.Configuration> {
  const client = await openidClient();
  const level = outboundLevelOf(idp);
  const fetch = access.fetch[level];
  const auth = client.ClientSecretBasic(idp.config.clientSecret);
  const issuer = issuerOf(idp, access.codehostBIssuer);
  if (issuer === undefined) {
    const config = new client.Configuration(
      {
        issuer: new URL(idp.config.authorizationEndpoint ?? "").origin,
        authorization_endpoint: idp.config.authorizationEndpoint,
        token_endpoint: idp.config.tokenEndpoint,
      },
      idp.config.clientId,
      idp.config.clientSecret,
      auth,
    );
    if (idp.config.authorizationEndpoint?.startsWith("http:")) client.allowInsecureRequests(config);
    config.timeout = TIMEOUT_SECONDS;
    config[client.customFetch] = fetch;
    return config;
  }
  const key = JSON.stringify([level, issuer, idp.config.clientId, idp.config.clientSecret]);
  const cached = discovered.get(key);
  if (cached && cached.expires > Date.now()) return cached.config;
  const config = client.discovery(
    new URL(issuer),
    idp.config.clientId,
    idp.config.clientSecret,
    auth,
    options(client, issuer, fetch),
  );
  discovered.set(key, { config, expires: Date.now() + DISCOVERY_TTL_MS });
  config.catch(() => discovered.delete(key));
  return config;
}

/** The provider's authorization URL for a sign-in, and the checks the callback needs. */
export async function authorizationRequest(
  idp: LoginIdp,
  access: ProviderAccess,
  redirectUri: string,
  state: string,
): Promise<{ url: URL; checks: AuthorizationChecks }> {
  const client = await openidClient();
  const config = await configurationOf(idp, access);
  const codeVerifier = client.randomPKCECodeVerifier();
  const nonce = client.randomNonce();
  const oidc = idp.type !== "oauth";
  const scopes = idp.config.scopes.length ? idp.config.scopes : oidc ? ["openid", "profile", "email"] : [];
  if (oidc && !scopes.includes("openid")) scopes.unshift("openid");
  const parameters: Record<string, string> = {
    redirect_uri: redirectUri,
    response_type: "code",
    state,
    code_challenge: await client.calculatePKCECodeChallenge(codeVerifier),
    code_challenge_method: "S256",
  };
  if (scopes.length) parameters.scope = scopes.join(" ");
  if (oidc) parameters.nonce = nonce;
  return { url: client.buildAuthorizationUrl(config, parameters), checks: { state, nonce, codeVerifier } };
}

const text = (value: unknown): string => (typeof value === "string" ? value : "");

/** The identity of OIDC claims (ID token or userinfo). */
export function identityOfClaims(claims: Record<string, unknown>): ExternalIdentity {
  const id = text(claims.sub);
  const email = text(claims.email);
  const givenName = text(claims.given_name);
  const familyName = text(claims.family_name);
  return {
    id,
    username: text(claims.preferred_username) || email || id,
    givenName,
    familyName,
    displayName: text(claims.name) || [givenName, familyName].filter(Boolean).join(" "),
    email,
    emailVerified: claims.email_verified === true,
    preferredLanguage: text(claims.locale) || undefined,
  };
}

/**
 * Finishes the sign-in at the callback: exchanges the code (openid-client checks state, issuer, PKCE, and
 * the ID token with its nonce) and answers the external identity.
 */
export async function finishAuthorization(
  idp: LoginIdp,
  access: ProviderAccess,
  callbackUrl: URL,
  checks: AuthorizationChecks,
): Promise<ExternalIdentity> {
  const client = await openidClient();
  const config = await configurationOf(idp, access);
  if (idp.type === "oauth") {
    const tokens = await client.authorizationCodeGrant(config, callbackUrl, {
      pkceCodeVerifier: checks.codeVerifier,
      expectedState: checks.state,
    });
    const endpoint = idp.config.userEndpoint ?? "";
    const response = await client.fetchProtectedResource(
      config,
      tokens.access_token,
      new URL(endpoint),
      "GET",
    );
    if (!response.ok) throw new Error(`the provider's user endpoint answered ${response.status}`);
    const user = (await response.json()) as Record<string, unknown>;
    const idValue = user[idp.config.idAttribute || "id"];
    const id = typeof idValue === "number" ? String(idValue) : text(idValue);
    if (!id) throw new Error("the provider's user endpoint answered no ID");
    const identity = identityOfClaims({ ...user, sub: id });
    return {
      ...identity,
      username: identity.username === id ? text(user.login) || text(user.username) || id : identity.username,
      displayName: identity.displayName || text(user.name),
    };
  }
  const tokens = await client.authorizationCodeGrant(config, callbackUrl, {
    pkceCodeVerifier: checks.codeVerifier,
    expectedState: checks.state,
    expectedNonce: checks.nonce,
    idTokenExpected: true,
  });
  const idToken = tokens.claims();
  if (!idToken) throw new Error("the provider answered no ID token");
  if (idp.config.isIdTokenMapping) return identityOfClaims(idToken as Record<string, unknown>);
  const userinfo = await client.fetchUserInfo(config, tokens.access_token, idToken.sub);
  return identityOfClaims({ ...idToken, ...userinfo });
}
