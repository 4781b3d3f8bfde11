import { decodeProtectedHeader } from "jose";
import { isActive } from "./claims.ts";
import type { OidcContext } from "./context.ts";
import {
  jwtMatches,
  parseHandle,
  type StoredAccessToken,
  secretMatches,
  unverifiedJti,
} from "./token-store.ts";

/** A token looks like a JWT (three dot-separated parts). */
export function isJwt(token: string): boolean {
  return token.split(".").length === 3;
}

/**
 * The stored access token a bearer value stands for when it is one of this instance's, unexpired,
 * unrevoked, and its user still exists and is active; undefined otherwise. Both formats are checked
 * against the stored SHA-256: of an opaque token's secret part, or of the whole JWT (so a JWT needs no
 * signature check here: only the exact token issued matches); a JWT is active only while the key that
 * signed it is published (deleting a web key ends its tokens, here as at clients). An exchanged token is
 * active only while what it descends from is (its lineage: ancestor tokens unrevoked, actors active;
 * docs/token-exchange.md).
 */
export async function activeAccessToken(
  ctx: OidcContext,
  instanceId: string,
  token: string,
): Promise<StoredAccessToken | undefined> {
  const stored = await storedAccessToken(ctx, instanceId, token);
  if (!stored || stored.revokedAt || stored.expiresAt.getTime() <= Date.now()) return undefined;
  if (!isActive(stored.user)) return undefined;
  if (stored.jwt && !(await signedByPublishedKey(ctx, instanceId, token))) return undefined;
  if (stored.lineage && !(await ctx.tokens.lineageActive(instanceId, stored.lineage))) return undefined;
  return stored;
}

async function signedByPublishedKey(ctx: OidcContext, instanceId: string, token: string): Promise<boolean> {
  const { kid } = decodeProtectedHeader(token);
  return typeof kid === "string" && (await ctx.keys.verificationKey(instanceId, kid)) !== undefined;
}

/** The stored access token that is exactly `token` (opaque or JWT), whatever its state. */
export async function storedAccessToken(
  ctx: OidcContext,
  instanceId: string,
  token: string,
): Promise<StoredAccessToken | undefined> {
  if (isJwt(token)) {
    const jti = unverifiedJti(token);
    if (!jti) return undefined;
    const stored = await ctx.tokens.findAccessToken(instanceId, jti);
    return stored && jwtMatches(token, stored) ? stored : undefined;
  }
  const handle = parseHandle(token);
  if (handle?.kind !== "at") return undefined;
  const stored = await ctx.tokens.findAccessToken(instanceId, handle.id);
  return stored && !stored.jwt && secretMatches(handle, stored.secretHash) ? stored : undefined;
}
