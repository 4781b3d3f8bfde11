import { isActive, loadUser } from "../claims.ts";
import { authenticateClient } from "../client-auth.ts";
import { GrantType } from "../clients.ts";
import { InvalidGrant, InvalidScope, UnauthorizedClient } from "../errors.ts";
import { required } from "../http.ts";
import { prepareTokens, resolveAudience, storeTokens } from "../issue.ts";
import { parseScope, scopeFromValues } from "../scopes.ts";
import { parseHandle, secretMatches } from "../token-store.ts";
import type { Grant } from "./types.ts";

/**
 * `refresh_token` (RFC 6749 §6) with rotation: every use returns a new refresh token of the same family
 * and retires the old one; using a retired one again is invalid_grant and revokes the whole family
 * (refresh and access tokens: RFC 9700 §4.14.2). `scope` may narrow the original scope, never widen it
 * (invalid_scope). Idle expiry (30 d unused) and absolute expiry (90 d after the family began). A public
 * client refreshes with its client_id alone.
 */
export const refreshTokenGrant: Grant = async (ctx, info, request) => {
  const { params } = request;
  const value = required(params, "refresh_token");
  const { client } = await authenticateClient(
    ctx,
    info,
    request.authorization,
    params,
    "token",
    request.endpointUrl,
  );
  if (!client.grantTypes.has(GrantType.refreshToken)) {
    throw new UnauthorizedClient("the client may not use the refresh_token grant");
  }
  const handle = parseHandle(value);
  const record =
    handle?.kind === "rt" ? await ctx.tokens.findRefreshToken(info.instance.id, handle.id) : undefined;
  if (!handle || !record || !secretMatches(handle, record.secretHash)) {
    throw new InvalidGrant("the refresh token is invalid");
  }
  if (record.clientId !== client.clientId)
    throw new InvalidGrant("the refresh token was issued to another client");
  if (record.revokedAt) throw new InvalidGrant("the refresh token was revoked");
  if (record.rotatedAt) {
    await ctx.tokens.revokeFamily(info.instance.id, record.familyId);
    throw new InvalidGrant("the refresh token was used before; its family is revoked");
  }
  const now = Date.now();
  if (record.expiresAt.getTime() <= now || record.absoluteExpiresAt.getTime() <= now) {
    throw new InvalidGrant("the refresh token has expired");
  }

  const original = scopeFromValues(record.scope);
  let scope = original;
  const requested = params.get("scope");
  if (requested !== undefined) {
    scope = parseScope(requested);
    const wider = scope.values.find((v) => !original.values.includes(v));
    if (wider) throw new InvalidScope(`scope ${wider} was not granted originally`);
  }
  const user = await loadUser(ctx.db, info.instance.id, record.subject);
  if (!isActive(user)) throw new InvalidGrant("the user is not active");
  // An exchanged family (token exchange) lives only as long as the tokens it was exchanged from: they are
  // its absolute end (notAfter), and a revoked ancestor, an ended session or an inactive actor ends it.
  const lineage = record.lineage ?? undefined;
  if (lineage && !(await ctx.tokens.lineageActive(info.instance.id, lineage))) {
    throw new InvalidGrant(
      "a token this refresh token was exchanged from is revoked, its session ended, or its actor is inactive",
    );
  }

  const issuer = { ...info, issuer: record.issuer };
  // An exchanged family keeps the audience the exchange granted (never the client's own).
  const audience = lineage
    ? { audience: record.audience, projectIds: record.audience }
    : await resolveAudience(ctx, issuer, client, scope);
  const prepared = await prepareTokens(ctx, issuer, {
    client,
    subject: user.id,
    user,
    scope,
    audience,
    familyId: record.familyId,
    sessionId: record.sessionId,
    authTime: record.authTime,
    amr: record.amr,
    idToken: true,
    refresh: { familyId: record.familyId, scope: record.scope, absoluteExpiresAt: record.absoluteExpiresAt },
    lineage,
    notAfter: lineage ? record.absoluteExpiresAt : undefined,
    idTokenAudience: lineage
      ? [client.clientId, ...record.audience.filter((a) => a !== client.clientId)]
      : undefined,
  });
  const rotated = await ctx.db.transaction(async (tx) => {
    if (!(await ctx.tokens.markRotated(tx, info.instance.id, record.id))) return false;
    await storeTokens(ctx, prepared, tx);
    return true;
  });
  if (!rotated) {
    // Revoked meanwhile (its session ended, its family revoked), or a concurrent use of the same token won the
    // race: this one is a reuse.
    if ((await ctx.tokens.findRefreshToken(info.instance.id, record.id))?.revokedAt)
      throw new InvalidGrant("the refresh token was revoked");
    await ctx.tokens.revokeFamily(info.instance.id, record.familyId);
    throw new InvalidGrant("the refresh token was used before; its family is revoked");
  }
  return prepared.response;
};
