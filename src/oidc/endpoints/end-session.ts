/**
 * The end-session endpoint's request (OpenID Connect RP-Initiated
 * Logout 1.0): optional `id_token_hint`, `client_id`, `post_logout_redirect_uri`, `state`.
 * The client is the hint's `azp` or `client_id`; when both are given they must be equal. The
 * post-logout redirect URI must be one the client registered, exactly; without a client it is ignored
 * (the browser sees the signed-out page). A bad request ends nothing: its error is shown at the server.
 *
 * Which sessions end, and whether the person must confirm first (`logoutPlan`): any web page can send a
 * browser here, so only an ID token of one of the browser's own sessions (its `sid`) lets the endpoint
 * sign out at once (RP-Initiated Logout 1.0 §2); every other request is confirmed on a page first.
 */
import type { BrowserSession } from "../../login/index.ts";
import type { OidcContext, RequestInfo } from "../context.ts";
import { InvalidRequest } from "../errors.ts";
import type { CollectedParams } from "../http.ts";
import { type IdTokenHint, verifyIdTokenHint } from "../id-token-hint.ts";
import { isRegisteredPostLogoutUri } from "../redirect-uris.ts";

/** Longest state echoed to the post-logout redirect URI. */
const MAX_STATE = 4096;

/** The parameters of an end-session request (what a confirmation page posts back). */
export const END_SESSION_PARAMETERS = [
  "id_token_hint",
  "client_id",
  "post_logout_redirect_uri",
  "state",
  "ui_locales",
] as const;

export type EndSessionDecision =
  /** The request is invalid: shown at the server, nothing ended. */
  | { kind: "page"; error: InvalidRequest }
  | {
      kind: "end";
      /** The verified id_token_hint: only its user's sessions of the browser end. Undefined: every session. */
      hint?: IdTokenHint;
      /** Where the browser goes afterwards (with `state`); undefined: the signed-out page. */
      redirectTo?: string;
    };

export async function endSessionRequest(
  ctx: OidcContext,
  info: RequestInfo,
  params: CollectedParams,
): Promise<EndSessionDecision> {
  const { values, repeated } = params;
  const page = (description: string): EndSessionDecision => ({
    kind: "page",
    error: new InvalidRequest(description),
  });
  if (repeated.size > 0) return page(`parameter ${[...repeated][0]} is repeated`);

  const rawHint = values.get("id_token_hint");
  const hint = rawHint === undefined ? undefined : await verifyIdTokenHint(ctx, info, rawHint);
  if (rawHint !== undefined && !hint) return page("id_token_hint is not a valid ID token of this issuer");

  const givenClientId = values.get("client_id");
  if (givenClientId !== undefined && hint?.clientId !== undefined && givenClientId !== hint.clientId) {
    return page("client_id differs from the client of the id_token_hint (azp)");
  }
  const clientId = givenClientId ?? hint?.clientId;
  const client =
    clientId !== undefined && clientId.length <= 200
      ? await ctx.clients.byClientId(info.instance.id, clientId)
      : undefined;
  if (clientId !== undefined && !client) return page("client_id is not an application of this instance");

  const postLogout = values.get("post_logout_redirect_uri");
  const state = values.get("state");
  if (state !== undefined && state.length > MAX_STATE) {
    return page(`state is too long: at most ${MAX_STATE} characters`);
  }
  let redirectTo: string | undefined;
  // Without a client, post_logout_redirect_uri is ignored: no client, no registered URIs to match it against.
  if (postLogout !== undefined && client) {
    if (!isRegisteredPostLogoutUri(client, postLogout)) {
      return page("post_logout_redirect_uri is not one of the application's registered post-logout URIs");
    }
    redirectTo = postLogout;
    if (state !== undefined) {
      redirectTo += `${postLogout.includes("?") ? "&" : "?"}${new URLSearchParams({ state })}`;
    }
  }
  return { kind: "end", hint, redirectTo };
}

export interface LogoutPlan {
  /** The browser's sessions that end: the hint's user's, or every one without a hint. */
  sessionIds: string[];
  /**
   * Whether the person must confirm first: there is something to end and the request carries no ID token
   * of one of those sessions (a hint without `sid`, or whose session is not among them, does not count).
   */
  confirm: boolean;
}

/** What a valid end-session request does to the browser with `sessions`. */
export function logoutPlan(hint: IdTokenHint | undefined, sessions: readonly BrowserSession[]): LogoutPlan {
  const sessionIds = sessions
    .filter((s) => hint === undefined || s.userId === hint.userId)
    .map((s) => s.sessionId);
  const ofThisBrowser = hint?.sessionId !== undefined && sessionIds.includes(hint.sessionId);
  return { sessionIds, confirm: sessionIds.length > 0 && !ofThisBrowser };
}
