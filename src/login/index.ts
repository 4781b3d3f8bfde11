/**
 * The login UI (`/ui/login`) and browser sessions: what a person sees when an application sends them to
 * sign in. `registerLogin` adds the routes to the server and answers the `Login` the OIDC protocol side
 * works with (docs/login.md, "For the protocol side"):
 *
 * - `login.authRequests` (AuthRequestStore): `create(input)` by the authorization endpoint, then redirect the
 *   browser to `loginUrl(id)`;
 * - `login.completer` (AuthRequestCompleter): the protocol side's hand-off, called once a session
 *   authenticated a request;
 * - `login.selectSessionFor(request, authRequest)` / `login.sessionsOfUserAgent(request)`: the browser's
 *   sessions (prompt=none, id_token_hint, auth_time / amr);
 * - `login.browserSessions(request)`, `login.endBrowserSessions(request, reply)`, `SIGNED_OUT_URL` and the
 *   confirmation page (`sendLogoutConfirmation`, `logoutConfirmed`, ./logout.ts): end_session;
 * - `login.sendClientResponse(...)` / `renderFormPost(...)`: redirect or the form_post page.
 */
import cookie from "@fastify/cookie";
import type { FastifyInstance } from "fastify";
import { registerBrandingAssets } from "./branding-assets.ts";
import { Login, type LoginDeps, type LoginOptions } from "./login.ts";
import { registerLoginRoutes } from "./steps/index.ts";

export {
  AUTH_REQUEST_LIFETIME_MS,
  type AuthRequest,
  type AuthRequestInput,
  AuthRequestStore,
  loginUrl,
  type Prompt,
  requestedOrgOf,
} from "./auth-requests.ts";
export {
  type AuthRequestCompleter,
  type AuthRequestError,
  type ClientResponse,
  redirectWith,
  unavailableCompleter,
} from "./completer.ts";
export {
  type BrowserSession,
  Login,
  type LoginDeps,
  type LoginOptions,
  SIGNED_OUT_URL,
} from "./login.ts";
export {
  LOGOUT_CONFIRMATION_FIELD,
  type LogoutConfirmation,
  logoutConfirmed,
  sendLogoutConfirmation,
  sendLogoutRefused,
} from "./logout.ts";
export { renderFormPost, sendFormPost } from "./render.ts";
export { findLoginSession, type LoginSession, type SessionSelection } from "./sessions.ts";
export { readUserAgent, USER_AGENT_COOKIE, type UserAgent } from "./user-agent.ts";

/**
 * Registers the cookie parser (all routes), the login UI under /ui and `GET /`, the branding's assets
 * under /assets/v3alpha; answers the Login.
 */
export function registerLogin(app: FastifyInstance, deps: LoginDeps, options: LoginOptions = {}): Login {
  const login = new Login(deps, options);
  app.register(cookie);
  app.register(async (scope) => registerLoginRoutes(scope, login));
  app.register(async (scope) => registerBrandingAssets(scope, login));
  return login;
}
