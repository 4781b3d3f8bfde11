import { decodeJwt, decodeProtectedHeader, type JWTPayload, jwtVerify } from "jose";
import { UserType } from "../../domain/user/events.ts";
import { isActive, loadUser } from "../claims.ts";
import { ASSERTION_ALGS } from "../client-auth.ts";
import { GrantType, machineKeys } from "../clients.ts";
import { InvalidGrant, UnauthorizedClient } from "../errors.ts";
import { required } from "../http.ts";
import { issueTokens, resolveAudience, withoutOfflineAccess } from "../issue.ts";
import { parseScope } from "../scopes.ts";
import type { Grant } from "./types.ts";

/** Clock difference tolerated for jwt-bearer assertions, in seconds. */
const ASSERTION_SKEW = 1;

/**
 * `urn:ietf:params:oauth:grant-type:jwt-bearer` (RFC 7523 §2.1, "JWT profile"): a machine user signs an
 * assertion with one of its keys (`kid` = key ID, `iss` = `sub` = user ID, `aud` = the issuer, `iat` at
 * most an hour old, `exp` in the future; 1 s clock skew) and gets an access token, plus an ID token when
 * `openid` is in the scope. The assertion is the authentication: no client authentication is needed.
 */
export const jwtBearerGrant: Grant = async (ctx, info, request) => {
  const assertion = required(request.params, "assertion");
  const scope = withoutOfflineAccess(parseScope(required(request.params, "scope")));
  let kid: string | undefined;
  let unverified: JWTPayload;
  try {
    kid = decodeProtectedHeader(assertion).kid;
    unverified = decodeJwt(assertion);
  } catch {
    throw new InvalidGrant("assertion is not a JWT");
  }
  const userId = unverified.sub;
  if (!kid || typeof userId !== "string" || unverified.iss !== userId) {
    throw new InvalidGrant("assertion needs kid (the key ID) and iss = sub = the user ID");
  }
  const user = await loadUser(ctx.db, info.instance.id, userId);
  if (!user || user.type !== UserType.machine) throw new InvalidGrant("assertion: unknown user or key");
  if (!isActive(user)) throw new InvalidGrant("the user is not active");
  const [key] = await machineKeys(ctx.db, info.instance.id, userId, kid);
  if (!key) throw new InvalidGrant("assertion: unknown user or key");
  if (key.expiresAt && key.expiresAt.getTime() <= Date.now()) throw new InvalidGrant("the key has expired");
  try {
    await jwtVerify(assertion, key.key, {
      algorithms: ASSERTION_ALGS,
      issuer: userId,
      subject: userId,
      audience: [info.issuer, request.endpointUrl],
      clockTolerance: ASSERTION_SKEW,
      maxTokenAge: ctx.lifetimes.assertionMaxAge,
      requiredClaims: ["iat", "exp"],
    });
  } catch (error) {
    throw new InvalidGrant(`assertion is invalid: ${(error as Error).message}`);
  }
  const client = await ctx.clients.machineUser(info.instance.id, user.username);
  if (client?.kind !== "machine" || client.userId !== user.id) {
    throw new InvalidGrant("assertion: unknown user or key");
  }
  if (!client.grantTypes.has(GrantType.jwtBearer)) {
    throw new UnauthorizedClient("the client may not use the jwt-bearer grant");
  }
  const audience = await resolveAudience(ctx, info, client, scope);
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
