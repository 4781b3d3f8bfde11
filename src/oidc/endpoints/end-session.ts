/**
 * The end-session endpoint's request (interface.md §4.3 "End-session endpoint", OpenID Connect
 * RP-Initiated Logout 1.0): optional `id_token_hint`, `client_id`, `post_logout_redirect_uri`, `state`.
 * The client is the hint's `azp` or `client_id`; when both are given they must be equal. The
 * post-logout redirect URI must be one the client registered, exactly; without a client it is ignored
 * (the browser sees the signed-out page). A bad request ends nothing: its error is shown at the server.
 */
import type { OidcContext, RequestInfo } from "../context.ts";
import { InvalidRequest } from "../errors.ts";
import type { CollectedParams } from "../http.ts";
import { verifyIdTokenHint } from "../id-token-hint.ts";
import { isRegisteredPostLogoutUri } from "../redirect-uris.ts";

/** Longest state echoed to the post-logout redirect URI. */
const MAX_STATE = 4096;

export type EndSessionDecision =
  /** The request is invalid: shown at the server, nothing ended. */
  | { kind: "page"; error: InvalidRequest }
  | {
      kind: "end";
      /** The hint's user: only that user's sessions of the browser end. Undefined: every session. */
      userId?: string;
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
  // Without a client, post_logout_redirect_uri is ignored (interface.md §4.3).
  if (postLogout !== undefined && client) {
    if (!isRegisteredPostLogoutUri(client, postLogout)) {
      return page("post_logout_redirect_uri is not one of the application's registered post-logout URIs");
    }
    redirectTo = postLogout;
    if (state !== undefined) {
      redirectTo += `${postLogout.includes("?") ? "&" : "?"}${new URLSearchParams({ state })}`;
    }
  }
  return { kind: "end", userId: hint?.userId, redirectTo };
}
