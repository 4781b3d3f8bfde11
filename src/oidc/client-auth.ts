import { decodeJwt, decodeProtectedHeader, type JWTPayload, jwtVerify } from "jose";
import { constantTimeEqual, sha256 } from "../crypto/tokens.ts";
import { assertionAudienceProblem } from "./assertion-audience.ts";
import type { ClientAuthMethod, OidcClient } from "./clients.ts";
import type { OidcContext, RequestInfo } from "./context.ts";
import { InvalidClient, InvalidRequest } from "./errors.ts";
import type { Params } from "./http.ts";

export const JWT_BEARER_ASSERTION = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

/** Signature algorithms accepted for private_key_jwt assertions (asymmetric only). */
export const ASSERTION_ALGS = [
  "RS256",
  "RS384",
  "RS512",
  "PS256",
  "PS384",
  "PS512",
  "ES256",
  "ES384",
  "ES512",
  "EdDSA",
];

/** Which methods each endpoint accepts (docs/oidc.md "Client authentication"). */
export const endpointAuthMethods = {
  token: ["none", "client_secret_basic", "client_secret_post", "private_key_jwt"],
  revocation: ["none", "client_secret_basic", "client_secret_post", "private_key_jwt"],
  introspection: ["client_secret_basic", "private_key_jwt"],
} as const satisfies Record<string, readonly ClientAuthMethod[]>;

export type AuthEndpoint = keyof typeof endpointAuthMethods;

export interface AuthenticatedClient {
  client: OidcClient;
  method: ClientAuthMethod;
}

interface Presented {
  method: ClientAuthMethod;
  clientId: string;
  secret?: string;
  assertion?: string;
}

/**
 * Client authentication for the token, introspection and revocation endpoints: exactly one of
 * client_secret_basic (Authorization: Basic), client_secret_post (client_id + client_secret),
 * private_key_jwt (client_assertion + client_assertion_type) or none (client_id alone).
 * Two methods in one request: invalid_request. Unknown client, wrong secret or assertion, a method the
 * client is not registered for or the endpoint does not accept, no authentication: invalid_client.
 */
export async function authenticateClient(
  ctx: OidcContext,
  info: RequestInfo,
  authorization: string | undefined,
  params: Params,
  endpoint: AuthEndpoint,
  endpointUrl: string,
): Promise<AuthenticatedClient> {
  const presented = presentedCredentials(authorization, params);
  const basic = presented.method === "client_secret_basic";
  if (!(endpointAuthMethods[endpoint] as readonly string[]).includes(presented.method)) {
    throw new InvalidClient(`${presented.method} is not accepted at this endpoint`, basic);
  }
  const client = await ctx.clients.byClientId(info.instance.id, presented.clientId);
  if (!client) throw new InvalidClient("client authentication failed", basic);
  if (!client.active) throw new InvalidClient("the client is not active", basic);
  if (!client.authMethods.has(presented.method)) {
    throw new InvalidClient(`the client is not registered for ${presented.method}`, basic);
  }
  switch (presented.method) {
    case "client_secret_basic":
    case "client_secret_post":
      if (!client.secretHash || !constantTimeEqual(sha256(presented.secret ?? ""), client.secretHash)) {
        throw new InvalidClient("client authentication failed", basic);
      }
      break;
    case "private_key_jwt":
      await verifyClientAssertion(ctx, info, client, presented.assertion!, endpointUrl);
      break;
    case "none":
      break;
  }
  return { client, method: presented.method };
}

/** Which method the request uses, and the client ID it names; invalid_request when it is ambiguous. */
function presentedCredentials(authorization: string | undefined, params: Params): Presented {
  const basicHeader =
    authorization && /^basic /i.test(authorization) ? authorization.slice(6).trim() : undefined;
  const secret = params.get("client_secret");
  const assertion = params.get("client_assertion");
  const assertionType = params.get("client_assertion_type");
  const formClientId = params.get("client_id");
  const used = [basicHeader !== undefined, secret !== undefined, assertion !== undefined].filter(
    Boolean,
  ).length;
  if (used > 1) throw new InvalidRequest("only one client authentication method may be used per request");
  if ((assertion === undefined) !== (assertionType === undefined)) {
    throw new InvalidRequest("client_assertion and client_assertion_type go together");
  }

  if (basicHeader !== undefined) {
    const decoded = Buffer.from(basicHeader, "base64").toString("utf8");
    const colon = decoded.indexOf(":");
    if (colon < 0 || !/^[A-Za-z0-9+/]+=*$/.test(basicHeader)) {
      throw new InvalidClient("malformed Basic credentials", true);
    }
    let clientId: string;
    let clientSecret: string;
    try {
      // RFC 6749 §2.3.1: both parts are form-encoded before base64.
      clientId = decodeForm(decoded.slice(0, colon));
      clientSecret = decodeForm(decoded.slice(colon + 1));
    } catch {
      throw new InvalidClient("malformed Basic credentials", true);
    }
    if (formClientId !== undefined && formClientId !== clientId) {
      throw new InvalidRequest("client_id differs from the client of the Basic credentials");
    }
    return { method: "client_secret_basic", clientId, secret: clientSecret };
  }
  if (secret !== undefined) {
    if (formClientId === undefined) throw new InvalidRequest("client_secret needs client_id");
    return { method: "client_secret_post", clientId: formClientId, secret };
  }
  if (assertion !== undefined) {
    if (assertionType !== JWT_BEARER_ASSERTION) {
      throw new InvalidRequest(`client_assertion_type must be ${JWT_BEARER_ASSERTION}`);
    }
    let claims: JWTPayload;
    try {
      claims = decodeJwt(assertion);
    } catch {
      throw new InvalidClient("client_assertion is not a JWT");
    }
    const clientId = typeof claims.sub === "string" ? claims.sub : undefined;
    if (!clientId) throw new InvalidClient("client_assertion has no sub");
    if (formClientId !== undefined && formClientId !== clientId) {
      throw new InvalidRequest("client_id differs from the client of the assertion");
    }
    return { method: "private_key_jwt", clientId, assertion };
  }
  if (formClientId !== undefined) return { method: "none", clientId: formClientId };
  throw new InvalidClient("client authentication required");
}

function decodeForm(value: string): string {
  return decodeURIComponent(value.replace(/\+/g, " "));
}

/**
 * RFC 7523 §3 for client authentication: signed by a key of the client, `iss` = `sub` = client ID, `aud`
 * one audience naming this server (./assertion-audience.ts: the issuer, the token endpoint or this endpoint,
 * or the issuer alone in the strict profile), `exp` required and at most an hour ahead, `jti` required and
 * used once. Every check comes before the `jti` is stored, so a refused assertion uses nothing up.
 */
async function verifyClientAssertion(
  ctx: OidcContext,
  info: RequestInfo,
  client: OidcClient,
  assertion: string,
  endpointUrl: string,
): Promise<void> {
  let kid: string | undefined;
  try {
    kid = decodeProtectedHeader(assertion).kid;
  } catch {
    throw new InvalidClient("client_assertion is not a JWT");
  }
  const keys = await client.publicKeys(kid);
  const now = Date.now();
  const skew = client.clockSkewSeconds;
  let payload: JWTPayload | undefined;
  for (const key of keys) {
    if (key.expiresAt && key.expiresAt.getTime() <= now) continue;
    try {
      payload = (
        await jwtVerify(assertion, key.key, {
          algorithms: ASSERTION_ALGS,
          issuer: client.clientId,
          subject: client.clientId,
          clockTolerance: skew,
          requiredClaims: ["exp", "jti"],
        })
      ).payload;
      break;
    } catch {
      // try the next key; none verifying is reported below
    }
  }
  if (!payload) throw new InvalidClient("client_assertion is invalid (signature, iss, sub or exp)");
  const wrongAudience = assertionAudienceProblem(
    payload.aud,
    ctx.config.assertionAudience,
    info,
    endpointUrl,
  );
  if (wrongAudience) throw new InvalidClient(`client_assertion's ${wrongAudience}`);
  const exp = payload.exp!;
  if (exp * 1000 > now + (ctx.lifetimes.assertionMaxAge + skew) * 1000) {
    throw new InvalidClient("client_assertion expires too far in the future (at most one hour)");
  }
  if (typeof payload.jti !== "string" || payload.jti.length === 0 || payload.jti.length > 200) {
    throw new InvalidClient("client_assertion needs a jti");
  }
  const fresh = await ctx.tokens.useAssertion(
    info.instance.id,
    client.clientId,
    payload.jti,
    new Date(exp * 1000),
  );
  if (!fresh) throw new InvalidClient("client_assertion was used before (jti)");
}
