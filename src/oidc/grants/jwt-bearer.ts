import { decodeJwt, decodeProtectedHeader, errors, type JWTPayload, jwtVerify } from "jose";
import { sha256 } from "../../crypto/tokens.ts";
import { UserType } from "../../domain/user/events.ts";
import { assertionAudienceProblem } from "../assertion-audience.ts";
import { isActive, loadUser } from "../claims.ts";
import { ASSERTION_ALGS } from "../client-auth.ts";
import { GrantType, machineKeys } from "../clients.ts";
import type { OidcContext, RequestInfo } from "../context.ts";
import { InvalidGrant, UnauthorizedClient } from "../errors.ts";
import type { Params } from "../http.ts";
import { required } from "../http.ts";
import { issueTokens, resolveAudience, withoutOfflineAccess } from "../issue.ts";
import { parseScope, Scope } from "../scopes.ts";
import type { Grant } from "./types.ts";

/** Clock difference tolerated for jwt-bearer assertions, in seconds. */
const ASSERTION_SKEW = 1;

/** The scope granted when neither the request nor the assertion names one (RFC 6749 §3.3: a default). */
export const JWT_BEARER_DEFAULT_SCOPE = Scope.openid;

/** The longest `jti` accepted (it is stored until the assertion expires). */
const MAX_JTI_LENGTH = 200;

/**
 * `urn:ietf:params:oauth:grant-type:jwt-bearer` (RFC 7521, RFC 7523 §2.1 as updated by RFC 7523bis): a
 * machine user signs an assertion with one of its keys and gets an access token, plus an ID token when
 * `openid` is in the scope. The assertion is the authentication: no client authentication is needed.
 *
 * - `iss` = `sub` = the user ID; `aud` one audience naming this server (../assertion-audience.ts: the
 *   issuer or the token endpoint, as a string or a one-element array, as RFC 7523 §3 allows and
 *   golang.org/x/oauth2/jwt sends by default; the issuer as a string alone in the strict profile of
 *   RFC 7523bis). An array naming anyone else is refused: it may have been made for that party.
 * - `kid` names the key; without it (RFC 7515 makes it optional) every unexpired key of the user is tried.
 * - `iat` at most an hour old, `exp` in the future (1 s clock skew).
 * - Single use: the `jti` (or, without one, the assertion itself) is remembered until the assertion can no
 *   longer be used, in the store of the client assertions' `jti`s.
 * - `scope` is optional (RFC 7521 §4.1): without it, the assertion's `scope` claim (Go's
 *   golang.org/x/oauth2/jwt sends its scopes there), else `openid`.
 */
export const jwtBearerGrant: Grant = async (ctx, info, request) => {
  const assertion = required(request.params, "assertion");
  let kid: string | undefined;
  let unverified: JWTPayload;
  try {
    kid = decodeProtectedHeader(assertion).kid;
    unverified = decodeJwt(assertion);
  } catch {
    throw new InvalidGrant("assertion is not a JWT");
  }
  const userId = unverified.sub;
  if (typeof userId !== "string" || userId === "") {
    throw new InvalidGrant("assertion has no sub: it must be the machine user's ID");
  }
  if (unverified.iss !== userId) throw new InvalidGrant("assertion's iss must equal its sub (the user ID)");
  const wrongAudience = assertionAudienceProblem(
    unverified.aud,
    ctx.config.assertionAudience,
    info,
    request.endpointUrl,
  );
  if (wrongAudience) throw new InvalidGrant(`assertion's ${wrongAudience}`);
  if (kid !== undefined && typeof kid !== "string")
    throw new InvalidGrant("assertion's kid must be a string");

  const user = await loadUser(ctx.db, info.instance.id, userId);
  if (!user || user.type !== UserType.machine) {
    throw new InvalidGrant(`assertion's sub ${userId} is not a machine user of this instance`);
  }
  const payload = await verifyAssertion(ctx, info, userId, assertion, kid);
  if (!isActive(user)) throw new InvalidGrant("the user is not active");

  const client = await ctx.clients.machineUser(info.instance.id, user.username);
  if (client?.kind !== "machine" || client.userId !== user.id) {
    throw new InvalidGrant(`assertion's sub ${userId} is not a machine user of this instance`);
  }
  if (!client.grantTypes.has(GrantType.jwtBearer)) {
    throw new UnauthorizedClient("the client may not use the jwt-bearer grant");
  }
  const scope = withoutOfflineAccess(parseScope(requestedScope(request.params, payload)));
  const audience = await resolveAudience(ctx, info, client, scope);
  // Last: a request refused for another reason leaves the assertion usable.
  await useOnce(ctx, info, userId, assertion, payload);
  return issueTokens(ctx, info, {
    client,
    subject: user.id,
    user,
    scope,
    audience,
    authTime: new Date(),
    idToken: true,
  });
};

/**
 * Verifies the signature with the key `kid` names, or with each unexpired key of the user when the
 * assertion names none, then the claims. Each way to fail has its own description.
 */
async function verifyAssertion(
  ctx: OidcContext,
  info: RequestInfo,
  userId: string,
  assertion: string,
  kid: string | undefined,
): Promise<JWTPayload> {
  const keys = await machineKeys(ctx.db, info.instance.id, userId, kid);
  if (keys.length === 0) {
    throw new InvalidGrant(
      kid === undefined ? "the user has no keys" : `assertion's kid ${kid} is not a key of the user`,
    );
  }
  const now = Date.now();
  const usable = keys.filter((key) => !key.expiresAt || key.expiresAt.getTime() > now);
  if (usable.length === 0) {
    throw new InvalidGrant(
      kid === undefined ? "every key of the user has expired" : `the key ${kid} has expired`,
    );
  }
  for (const key of usable) {
    try {
      const { payload } = await jwtVerify(assertion, key.key, {
        algorithms: ASSERTION_ALGS,
        issuer: userId,
        subject: userId,
        clockTolerance: ASSERTION_SKEW,
        maxTokenAge: ctx.lifetimes.assertionMaxAge,
        requiredClaims: ["iat", "exp"],
      });
      return payload;
    } catch (error) {
      // Not this key (a wrong signature, or a key of another type than alg): another key of the user may
      // have signed it. Claims are checked only once a signature verified.
      if (
        error instanceof errors.JWSSignatureVerificationFailed ||
        error instanceof errors.JOSENotSupported ||
        error instanceof TypeError
      ) {
        continue;
      }
      throw new InvalidGrant(`assertion is invalid: ${(error as Error).message}`);
    }
  }
  throw new InvalidGrant(
    kid === undefined
      ? "assertion's signature does not verify with any key of the user"
      : `assertion's signature does not verify with the key ${kid}`,
  );
}

/**
 * Remembers the assertion (by `jti`, else by its hash) until it can no longer be used: its `exp`, or the end
 * of the hour after `iat` when that comes first. A second use is invalid_grant.
 */
async function useOnce(
  ctx: OidcContext,
  info: RequestInfo,
  userId: string,
  assertion: string,
  payload: JWTPayload,
): Promise<void> {
  const { jti } = payload;
  if (jti !== undefined && typeof jti !== "string")
    throw new InvalidGrant("assertion's jti must be a string");
  if (jti !== undefined && jti.length > MAX_JTI_LENGTH) {
    throw new InvalidGrant(`assertion's jti is longer than ${MAX_JTI_LENGTH} characters`);
  }
  const usableUntil = Math.min(payload.exp!, payload.iat! + ctx.lifetimes.assertionMaxAge) + ASSERTION_SKEW;
  const fresh = await ctx.tokens.useAssertion(
    info.instance.id,
    // The store is keyed by issuer: a grant assertion's issuer is a user ID, kept apart from client IDs
    // (a client ID never contains white space: usernames have none, app client IDs are generated).
    `jwt-bearer ${userId}`,
    jti ? `jti:${jti}` : `sha256:${sha256(assertion)}`,
    new Date(usableUntil * 1000),
  );
  if (!fresh) {
    throw new InvalidGrant(
      jti
        ? "assertion was used before (its jti): sign a new assertion with a new jti for each request"
        : "assertion was used before: sign a new one (with a jti) for each request",
    );
  }
}

/** `scope` if given, else the assertion's `scope` claim, else the default. */
function requestedScope(params: Params, payload: JWTPayload): string {
  const parameter = params.get("scope");
  if (parameter !== undefined) return parameter;
  if (typeof payload.scope === "string" && payload.scope !== "") return payload.scope;
  return JWT_BEARER_DEFAULT_SCOPE;
}
