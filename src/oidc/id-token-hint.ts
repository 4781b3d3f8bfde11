import { compactVerify, decodeProtectedHeader } from "jose";
import type { OidcContext, RequestInfo } from "./context.ts";

/** What an `id_token_hint` tells: the user, the session and the client of an ID token this instance issued. */
export interface IdTokenHint {
  /** `sub`: the user. */
  userId: string;
  /** `sid`: the session it was issued from, when it had one. */
  sessionId?: string;
  /** `azp` (else a single `aud`): the client it was issued to. */
  clientId?: string;
}

/** Longest hint accepted (an ID token with many role claims is a few kilobytes). */
export const MAX_ID_TOKEN_HINT = 16_384;

/**
 * Verifies an `id_token_hint` (authorization and end-session endpoints): an ID token this instance signed
 * (by a key of its JWKS, with that key's algorithm), for this issuer; an expired one is accepted (OIDC
 * Core §3.1.2.1, RP-Initiated Logout §2: the hint identifies, it does not authorize; end session signs out
 * without asking only when its `sid` is a session of the browser, ./endpoints/end-session.ts). JWT access
 * tokens (`typ: at+jwt`) are refused. Undefined when it is not such a token.
 */
export async function verifyIdTokenHint(
  ctx: OidcContext,
  info: RequestInfo,
  token: string,
): Promise<IdTokenHint | undefined> {
  if (token.length > MAX_ID_TOKEN_HINT) return undefined;
  let kid: string;
  let alg: string | undefined;
  try {
    const header = decodeProtectedHeader(token);
    if (typeof header.kid !== "string" || header.typ === "at+jwt") return undefined;
    kid = header.kid;
    alg = header.alg;
  } catch {
    return undefined;
  }
  const key = await ctx.keys.verificationKey(info.instance.id, kid);
  if (!key || alg !== key.alg) return undefined;
  let claims: Record<string, unknown>;
  try {
    const { payload } = await compactVerify(token, key.publicKey, { algorithms: [key.alg] });
    claims = JSON.parse(new TextDecoder().decode(payload));
  } catch {
    return undefined;
  }
  if (claims.iss !== info.issuer || typeof claims.sub !== "string" || claims.sub === "") return undefined;
  const audience = Array.isArray(claims.aud) ? claims.aud : [claims.aud];
  const clientId =
    typeof claims.azp === "string"
      ? claims.azp
      : audience.length === 1 && typeof audience[0] === "string"
        ? audience[0]
        : undefined;
  return {
    userId: claims.sub,
    sessionId: typeof claims.sid === "string" ? claims.sid : undefined,
    clientId,
  };
}
