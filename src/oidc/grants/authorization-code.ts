import { createHash } from "node:crypto";
import { isActive } from "../claims.ts";
import { authenticateClient } from "../client-auth.ts";
import { GrantType } from "../clients.ts";
import { InvalidGrant, UnauthorizedClient } from "../errors.ts";
import { required } from "../http.ts";
import { prepareTokens, resolveAudience } from "../issue.ts";
import { Scope, scopeFromValues } from "../scopes.ts";
import { parseHandle, secretMatches } from "../token-store.ts";
import type { Grant } from "./types.ts";

/** RFC 7636 §4.1: 43-128 unreserved characters. */
const CODE_VERIFIER = /^[A-Za-z0-9._~-]{43,128}$/;

/**
 * `authorization_code` (RFC 6749 §4.1.3, RFC 7636): the code is single use: a second redemption is
 * invalid_grant and revokes every token issued from it. `redirect_uri` must equal the authorization
 * request's; a code issued with a PKCE challenge needs the matching verifier, one issued without must
 * not get one, and a public client (method none) cannot redeem a code without PKCE.
 */
export const authorizationCodeGrant: Grant = async (ctx, info, request) => {
  const { params } = request;
  const code = required(params, "code");
  const redirectUri = required(params, "redirect_uri");
  const verifier = params.get("code_verifier");
  const { client, method } = await authenticateClient(
    ctx,
    info,
    request.authorization,
    params,
    "token",
    request.endpointUrl,
  );
  if (!client.grantTypes.has(GrantType.authorizationCode)) {
    throw new UnauthorizedClient("the client may not use the authorization_code grant");
  }
  const handle = parseHandle(code);
  const found =
    handle?.kind === "ac" ? await ctx.tokens.findCodeWithUser(info.instance.id, handle.id) : undefined;
  const record = found?.code;
  if (!handle || !record || !secretMatches(handle, record.secretHash)) {
    throw new InvalidGrant("the code is invalid");
  }
  if (record.clientId !== client.clientId) throw new InvalidGrant("the code was issued to another client");
  if (record.redeemedAt) {
    await ctx.tokens.revokeFamily(info.instance.id, record.id);
    throw new InvalidGrant("the code was used before; the tokens issued from it are revoked");
  }
  if (record.expiresAt.getTime() <= Date.now()) throw new InvalidGrant("the code has expired");
  if (record.redirectUri !== redirectUri) {
    throw new InvalidGrant("redirect_uri differs from the one of the authorization request");
  }
  if (record.codeChallenge) {
    if (verifier === undefined)
      throw new InvalidGrant("code_verifier is required (the code has a challenge)");
    if (!CODE_VERIFIER.test(verifier)) throw new InvalidGrant("code_verifier is malformed");
    const computed = createHash("sha256").update(verifier, "ascii").digest("base64url");
    if (computed !== record.codeChallenge)
      throw new InvalidGrant("code_verifier does not match the challenge");
  } else {
    if (verifier !== undefined) throw new InvalidGrant("code_verifier given, but the code has no challenge");
    if (method === "none") throw new InvalidGrant("a public client must use PKCE");
  }
  const user = found?.user;
  if (!isActive(user)) throw new InvalidGrant("the user is not active");

  const scope = scopeFromValues(record.scope);
  const issuer = { ...info, issuer: record.issuer };
  const audience = await resolveAudience(ctx, issuer, client, scope);
  const offline = scope.values.includes(Scope.offlineAccess) && client.grantTypes.has(GrantType.refreshToken);
  const prepared = await prepareTokens(ctx, issuer, {
    client,
    subject: user.id,
    user,
    scope,
    audience,
    familyId: record.id,
    sessionId: record.sessionId,
    authTime: record.authTime,
    amr: record.amr,
    nonce: record.nonce,
    idToken: true,
    refresh: offline
      ? {
          familyId: record.id,
          scope: record.scope,
          absoluteExpiresAt: new Date(Date.now() + ctx.lifetimes.refreshAbsolute * 1000),
        }
      : undefined,
  });
  // the redemption and the tokens' rows in one statement
  const redeemed = await ctx.tokens.redeemCode(
    info.instance.id,
    record.id,
    prepared.access,
    prepared.refresh,
  );
  if (!redeemed) {
    // Voided meanwhile (its session ended), or another request redeemed it: then a second redemption all the same.
    if (!(await ctx.tokens.findCode(info.instance.id, record.id))?.redeemedAt)
      throw new InvalidGrant("the code has expired");
    await ctx.tokens.revokeFamily(info.instance.id, record.id);
    throw new InvalidGrant("the code was used before; the tokens issued from it are revoked");
  }
  return prepared.response;
};
