import { compactVerify, decodeProtectedHeader } from "jose";
import { isActive } from "./claims.ts";
import type { OidcContext } from "./context.ts";
import { SIGNING_ALG } from "./keys.ts";
import { parseHandle, type StoredAccessToken, secretMatches } from "./token-store.ts";

/** A token looks like a JWT (three dot-separated parts). */
export function isJwt(token: string): boolean {
  return token.split(".").length === 3;
}

/**
 * The stored access token a bearer value stands for when it is one of this instance's, unexpired,
 * unrevoked, and its user still exists and is active; undefined otherwise. A JWT must verify against
 * the instance's published keys and its `jti` must be a stored JWT access token of the same subject.
 */
export async function activeAccessToken(
  ctx: OidcContext,
  instanceId: string,
  token: string,
): Promise<StoredAccessToken | undefined> {
  let stored: StoredAccessToken | undefined;
  if (isJwt(token)) {
    const jti = await verifiedJti(ctx, instanceId, token);
    if (!jti) return undefined;
    stored = await ctx.tokens.findAccessToken(instanceId, jti.jti);
    if (!stored || stored.secretHash !== null || stored.subject !== jti.sub) return undefined;
  } else {
    const handle = parseHandle(token);
    if (handle?.kind !== "at") return undefined;
    stored = await ctx.tokens.findAccessToken(instanceId, handle.id);
    if (!stored || !secretMatches(handle, stored.secretHash)) return undefined;
  }
  if (stored.revokedAt || stored.expiresAt.getTime() <= Date.now()) return undefined;
  if (!isActive(stored.user)) return undefined;
  return stored;
}

/**
 * The `jti` and `sub` of a JWT this instance signed (signature only: expiry and revocation are the stored
 * row's, which every caller reads next).
 */
export async function verifiedJti(
  ctx: OidcContext,
  instanceId: string,
  token: string,
): Promise<{ jti: string; sub: string } | undefined> {
  let kid: string | undefined;
  try {
    kid = decodeProtectedHeader(token).kid;
  } catch {
    return undefined;
  }
  if (!kid) return undefined;
  const key = await ctx.keys.verificationKey(instanceId, kid);
  if (!key) return undefined;
  try {
    const { payload } = await compactVerify(token, key.publicKey, { algorithms: [SIGNING_ALG] });
    const claims = JSON.parse(new TextDecoder().decode(payload)) as Record<string, unknown>;
    if (typeof claims.jti !== "string" || typeof claims.sub !== "string") return undefined;
    return { jti: claims.jti, sub: claims.sub };
  } catch {
    return undefined;
  }
}
