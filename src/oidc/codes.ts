import { newId } from "../id.ts";
import type { OidcContext } from "./context.ts";
import { newHandle } from "./token-store.ts";

/** What the authorization endpoint knows when it issues a code (./complete.ts). */
export interface AuthorizationCodeRequest {
  instanceId: string;
  /** The issuer the authorization request was made to (tokens from the code carry it). */
  issuer: string;
  clientId: string;
  /** Exactly as in the authorization request: the token request must repeat it. */
  redirectUri: string;
  /** The scope granted (already validated). */
  scope: string[];
  nonce?: string;
  /** PKCE (RFC 7636): the S256 challenge, when the client sent one. */
  codeChallenge?: string;
  codeChallengeMethod?: "S256";
  userId: string;
  sessionId?: string;
  authTime: Date;
  amr?: string[];
}

/**
 * Issues a single-use authorization code (stored as SHA-256, valid `lifetimes.authorizationCode`
 * seconds). The authorization endpoint calls this once the user is authenticated and has consented;
 * tests call it directly.
 */
export async function issueAuthorizationCode(
  ctx: OidcContext,
  request: AuthorizationCodeRequest,
): Promise<string> {
  const id = newId();
  const handle = newHandle("ac", id);
  const now = new Date();
  await ctx.tokens.insertCode({
    instanceId: request.instanceId,
    id,
    clientId: request.clientId,
    secretHash: handle.secretHash,
    redirectUri: request.redirectUri,
    scope: request.scope,
    nonce: request.nonce ?? null,
    codeChallenge: request.codeChallenge ?? null,
    codeChallengeMethod: request.codeChallenge ? (request.codeChallengeMethod ?? "S256") : null,
    userId: request.userId,
    sessionId: request.sessionId ?? null,
    authTime: request.authTime,
    amr: request.amr ?? null,
    issuer: request.issuer,
    createdAt: now,
    expiresAt: new Date(now.getTime() + ctx.lifetimes.authorizationCode * 1000),
  });
  return handle.value;
}
