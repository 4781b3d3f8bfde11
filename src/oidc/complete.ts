/**
 * The protocol side of a finished sign-in: the login UI (or the authorization endpoint, when it needs no
 * page) hands over an authenticated auth request, and this answers the client at its redirect URI in the
 * request's response mode, always with `iss` (RFC 9207) and the request's `state`:
 *
 * - `code`: a single-use authorization code (./codes.ts) carrying what the token endpoint needs (scope,
 *   nonce, PKCE challenge, redirect URI, session, auth_time, amr);
 * - `id_token token`: an access token and an ID token with `at_hash` (./issue.ts, the token endpoint's
 *   code: the ID token leaves the profile, email, phone and address claims to userinfo unless the client
 *   sets id_token_userinfo_assertion);
 * - `id_token`: an ID token alone, with the user claims of the requested scope.
 */
import type {
  AuthRequest,
  AuthRequestCompleter,
  AuthRequestError,
  ClientResponse,
  LoginSession,
} from "../login/index.ts";
import { isConnectionFailure } from "../storage/availability.ts";
import { isActive, loadUser } from "./claims.ts";
import { issueAuthorizationCode } from "./codes.ts";
import { type OidcContext, type RequestInfo, requestInfo } from "./context.ts";
import type { ResponseTarget } from "./endpoints/authorize.ts";
import { InvalidScope } from "./errors.ts";
import {
  type Issuance,
  idToken,
  prepareTokens,
  resolveAudience,
  storeTokens,
  withoutOfflineAccess,
} from "./issue.ts";
import { scopeFromValues } from "./scopes.ts";

/**
 * An authorization response (or error) for `target`: a redirect with the parameters in the query or the
 * fragment, or the form_post page's fields. `iss` and `state` are added here.
 */
export function authorizationResponse(
  target: Pick<ResponseTarget, "redirectUri" | "responseMode" | "state">,
  issuer: string,
  params: Record<string, string | number | undefined>,
): ClientResponse {
  const fields: Record<string, string> = {};
  for (const [key, value] of Object.entries({ ...params, state: target.state, iss: issuer })) {
    if (value !== undefined) fields[key] = String(value);
  }
  if (target.responseMode === "form_post") {
    return { kind: "form_post", action: target.redirectUri, fields };
  }
  const encoded = new URLSearchParams(fields).toString();
  if (target.responseMode === "fragment")
    return { kind: "redirect", url: `${target.redirectUri}#${encoded}` };
  const separator = target.redirectUri.includes("?") ? "&" : "?";
  return { kind: "redirect", url: `${target.redirectUri}${separator}${encoded}` };
}

function targetOf(authRequest: AuthRequest): ResponseTarget {
  const implicit = authRequest.responseType !== "code";
  const mode = authRequest.responseMode;
  return {
    redirectUri: authRequest.redirectUri,
    responseMode:
      mode === "query" || mode === "fragment" || mode === "form_post"
        ? mode
        : implicit
          ? "fragment"
          : "query",
    state: authRequest.state,
  };
}

/** The completer the platform plugs into the login UI (`platform.login.completer`). */
export function oidcCompleter(ctx: OidcContext): AuthRequestCompleter {
  return {
    async complete({ authRequest, session, request }) {
      const info = await requestInfo(ctx, request);
      let answer: Record<string, string | number | undefined>;
      try {
        answer = await answerFor(ctx, info, authRequest, session);
      } catch (error) {
        // The client can only learn of it at its redirect URI (RFC 6749 §4.1.2.1).
        request.log.error({ err: error }, "completing an authorization request failed");
        answer = unexpected(error);
      }
      return authorizationResponse(targetOf(authRequest), info.issuer, answer);
    },

    async fail({ authRequest, error, description, request }) {
      const { issuer } = await requestInfo(ctx, request);
      return authorizationResponse(targetOf(authRequest), issuer, {
        error,
        error_description: description ?? defaultDescriptions[error],
      });
    },
  };
}

/** The error parameters for an unexpected failure: server_error, or temporarily_unavailable (database). */
export function unexpected(error: unknown): Record<string, string> {
  return isConnectionFailure(error)
    ? { error: "temporarily_unavailable", error_description: "temporarily unavailable; retry later" }
    : { error: "server_error", error_description: "unexpected condition; try again later" };
}

const defaultDescriptions: Record<AuthRequestError, string> = {
  login_required: "the user must sign in",
  interaction_required: "the user must choose an account or register",
  access_denied: "the sign-in was not completed",
};

/** The parameters of the answer: a code, the implicit tokens, or an error the client can act on. */
async function answerFor(
  ctx: OidcContext,
  info: RequestInfo,
  authRequest: AuthRequest,
  session: LoginSession,
): Promise<Record<string, string | number | undefined>> {
  const instanceId = info.instance.id;
  const client = await ctx.clients.byClientId(instanceId, authRequest.clientId);
  if (!client?.active || !client.responseTypes.includes(authRequest.responseType)) {
    return {
      error: "unauthorized_client",
      error_description: "the application was removed or changed during the sign-in",
    };
  }
  // A login session is read with its user, active and human (src/login/sessions.ts), in this same request,
  // and a code's redemption reads the user again (the token endpoint refuses an inactive one): a code needs
  // no read of its own. The implicit responses carry the user's claims: those read the user here.
  const user =
    authRequest.responseType === "code" ? undefined : await loadUser(ctx.db, instanceId, session.userId);
  // The project's role check: only users holding a role in it may sign in to its applications.
  if (client.projectRoleCheck && client.projectId) {
    const grants = await ctx.userGrants(instanceId, session.userId, [client.projectId]);
    if (!grants.some((g) => g.roles.length > 0)) {
      return {
        error: "access_denied",
        error_description: "the user has no role in the application's project",
      };
    }
  }
  const authTime = session.authTime ?? session.createdAt;
  const amr = session.amr.length ? session.amr : undefined;

  if (authRequest.responseType === "code") {
    const code = await issueAuthorizationCode(ctx, {
      instanceId,
      issuer: info.issuer,
      clientId: client.clientId,
      redirectUri: authRequest.redirectUri,
      scope: authRequest.scope,
      nonce: authRequest.nonce,
      codeChallenge: authRequest.codeChallenge?.challenge,
      codeChallengeMethod: authRequest.codeChallenge ? "S256" : undefined,
      userId: session.userId,
      sessionId: session.id,
      authTime,
      amr,
    });
    return { code };
  }

  if (!isActive(user)) return { error: "access_denied", error_description: "the user is not active" };
  // Implicit: no refresh token, so offline_access is not granted.
  const scope = withoutOfflineAccess(scopeFromValues(authRequest.scope));
  let audience: Awaited<ReturnType<typeof resolveAudience>>;
  try {
    audience = await resolveAudience(ctx, info, client, scope);
  } catch (error) {
    // a project of an audience scope was deleted during the sign-in
    if (error instanceof InvalidScope) return { error: error.error, error_description: error.description };
    throw error;
  }
  const issuance: Issuance = {
    client,
    subject: user.id,
    user,
    scope,
    audience,
    sessionId: session.id,
    authTime,
    amr,
    nonce: authRequest.nonce,
    idToken: true,
  };
  const granted = scope.values.join(" ");
  if (authRequest.responseType === "id_token token") {
    const prepared = await prepareTokens(ctx, info, issuance);
    await storeTokens(ctx, prepared);
    ctx.metrics?.tokenIssued("implicit");
    const { response } = prepared;
    return {
      access_token: response.access_token,
      token_type: response.token_type,
      expires_in: response.expires_in,
      id_token: response.id_token,
      scope: granted,
    };
  }
  // id_token alone: nothing to fetch userinfo with, so the ID token carries the scope's user claims.
  const token = await idToken(ctx, info, issuance, {});
  ctx.metrics?.tokenIssued("implicit");
  return {
    id_token: token,
    token_type: "Bearer",
    expires_in: ctx.lifetimes.idToken,
    scope: granted,
  };
}
