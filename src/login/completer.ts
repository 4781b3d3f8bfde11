/**
 * The hand-off from the login UI to the OIDC protocol side.
 *
 * When a session has authenticated an auth request, the login UI marks the request done (once,
 * `AuthRequestStore.finish`) and calls `complete`: the protocol side issues the code (or the tokens of
 * the implicit flow) and answers where the browser goes. With `prompt=none` and no usable session the UI
 * calls `fail` with `login_required` / `interaction_required`. The UI turns the answer into the HTTP
 * response: a redirect (302 after a GET, 303 after a POST) or the auto-submitting form_post page
 * (`renderFormPost` in ./render.ts).
 */
import type { FastifyRequest } from "fastify";
import type { AuthRequest } from "./auth-requests.ts";
import type { LoginSession } from "./sessions.ts";

/** Where the browser goes back to the client. */
export type ClientResponse =
  /** A redirect to `url` (query or fragment response modes; errors). */
  | { kind: "redirect"; url: string }
  /** `response_mode=form_post`: a page that posts `fields` to `action` (the redirect URI). */
  | { kind: "form_post"; action: string; fields: Record<string, string> };

/** OAuth errors the login UI reports for an auth request. */
export type AuthRequestError = "login_required" | "interaction_required" | "access_denied";

export interface AuthRequestCompleter {
  /**
   * The auth request (done, `sessionId` = `session.id`) was authenticated by `session`: answer the client
   * with a code (`response_type=code`) or tokens (implicit). `session.authTime` is the ID token's
   * `auth_time`, `session.amr` its `amr`.
   */
  complete(input: {
    authRequest: AuthRequest;
    session: LoginSession;
    request: FastifyRequest;
  }): Promise<ClientResponse>;
  /** The auth request cannot succeed: answer the client with `error` (and the request's `state`). */
  fail(input: {
    authRequest: AuthRequest;
    error: AuthRequestError;
    description?: string;
    request: FastifyRequest;
  }): Promise<ClientResponse>;
}

/** An OAuth response to a redirect URI in the request's response mode (query unless fragment). */
export function redirectWith(authRequest: AuthRequest, params: Record<string, string | undefined>): string {
  const values = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) if (value !== undefined) values.set(key, value);
  if (authRequest.responseMode === "fragment") return `${authRequest.redirectUri}#${values}`;
  const separator = authRequest.redirectUri.includes("?") ? "&" : "?";
  return `${authRequest.redirectUri}${separator}${values}`;
}

/**
 * The completer until the OIDC provider's authorization endpoint exists: no auth request can be created
 * without it, so this only answers `server_error` to the client.
 */
export const unavailableCompleter: AuthRequestCompleter = {
  async complete({ authRequest }) {
    return {
      kind: "redirect",
      url: redirectWith(authRequest, {
        error: "server_error",
        error_description: "the authorization endpoint is not available",
        state: authRequest.state,
      }),
    };
  },
  async fail({ authRequest, error, description }) {
    return {
      kind: "redirect",
      url: redirectWith(authRequest, { error, error_description: description, state: authRequest.state }),
    };
  },
};
