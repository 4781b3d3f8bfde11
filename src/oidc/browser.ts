/**
 * The endpoints a browser opens: authorization (`/oauth/v2/authorize`, GET and POST) and end session
 * (`/oidc/v1/end_session`, GET and POST). They answer with redirects, the form_post page or a localized
 * error page of the login UI, never with JSON; registered after the login UI (they use its cookie parser,
 * auth request store, sessions and pages).
 *
 * Authorization, after validation (./endpoints/authorize.ts):
 * - `prompt=none`: decided here, never a page: the browser's session goes straight back with a code or
 *   tokens, or `login_required` / `interaction_required` goes to the redirect URI;
 * - no prompt and exactly one usable session: straight back to the client as well (single sign-on);
 * - otherwise the request is stored (10 minutes, bound to the browser's cookie when it has one) and the
 *   browser goes to the login UI, which calls the completer (./complete.ts) when someone signed in.
 *
 * A cross-site POST carries no SameSite=Lax cookie, so a POST whose browser we cannot see is never decided
 * here: the login UI (a GET, with the cookie) decides, as for every other stored request.
 *
 * End session, after validation (./endpoints/end-session.ts): at once when an id_token_hint names one of
 * the browser's sessions (or nothing is signed in), else after the person confirmed on the login UI's
 * confirmation page (src/login/logout.ts), whose form posts back here with the browser's CSRF token.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import {
  AUTH_REQUEST_LIFETIME_MS,
  type AuthRequest,
  type AuthRequestInput,
  type ClientResponse,
  LOGOUT_CONFIRMATION_FIELD,
  type Login,
  loginUrl,
  logoutConfirmed,
  readUserAgent,
  SIGNED_OUT_URL,
  sendFormPost,
  sendLogoutConfirmation,
  sendLogoutRefused,
} from "../login/index.ts";
import { isConnectionFailure } from "../storage/availability.ts";
import { authorizationResponse, unexpected } from "./complete.ts";
import { type OidcContext, type RequestInfo, requestInfo } from "./context.ts";
import { validateAuthorizeRequest } from "./endpoints/authorize.ts";
import { END_SESSION_PARAMETERS, endSessionRequest, logoutPlan } from "./endpoints/end-session.ts";
import { OAuthError } from "./errors.ts";
import { type CollectedParams, collectParams } from "./http.ts";
import { OidcPath } from "./issuer.ts";

const FORM = "application/x-www-form-urlencoded";
/** Largest POST body of these endpoints (an ID token hint and the authorization parameters fit easily). */
const BODY_LIMIT = 64 * 1024;

/** Registers the authorization and end-session endpoints in their own scope. */
export function registerBrowserEndpoints(app: FastifyInstance, ctx: OidcContext, login: Login): void {
  app.register(async (scope) => routes(scope, ctx, login));
}

/** The query string of a request, as sent. */
function rawQuery(request: FastifyRequest): string {
  const q = request.url.indexOf("?");
  return q < 0 ? "" : request.url.slice(q + 1);
}

/** The parameters of a GET (query) or a form POST (body); undefined for a POST of another content type. */
function paramsOf(request: FastifyRequest): CollectedParams | undefined {
  if (request.method !== "POST") return collectParams(rawQuery(request));
  const type = String(request.headers["content-type"] ?? "")
    .split(";", 1)[0]
    .trim()
    .toLowerCase();
  if (type !== FORM) return undefined;
  return collectParams(typeof request.body === "string" ? request.body : "");
}

/** ui_locales of a request that could not be validated (for the language of its error page). */
function uiLocalesOf(params: CollectedParams | undefined): string[] {
  return (params?.values.get("ui_locales") ?? "").slice(0, 200).split(" ").filter(Boolean);
}

/** An auth request that is not stored: decided and answered within one authorization request. */
function transientAuthRequest(input: AuthRequestInput): AuthRequest {
  const now = new Date();
  return {
    ...input,
    id: "",
    prompt: input.prompt ?? [],
    uiLocales: input.uiLocales ?? [],
    acrValues: input.acrValues ?? [],
    uiState: {},
    createdAt: now,
    expiresAt: new Date(now.getTime() + AUTH_REQUEST_LIFETIME_MS),
  };
}

async function routes(app: FastifyInstance, ctx: OidcContext, login: Login): Promise<void> {
  // Bodies arrive raw: repeated parameters must be seen (collectParams), and other types are refused.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("*", { parseAs: "string", bodyLimit: BODY_LIMIT }, (_request, body, done) =>
    done(null, body),
  );

  // Every answer may carry a code, tokens or the request's parameters: never cached, never a Referer.
  app.addHook("onSend", async (_request, reply, payload) => {
    reply.header("cache-control", "no-store");
    reply.header("referrer-policy", "no-referrer");
    return payload;
  });

  app.setErrorHandler(async (error, request, reply) => {
    const status = (error as { statusCode?: number }).statusCode;
    if (error instanceof OAuthError || (status && status >= 400 && status < 500)) {
      return login.sendProtocolError(request, reply, {
        kind: request.url.startsWith(OidcPath.endSession) ? "signout" : "signin",
        error: error instanceof OAuthError ? error.error : "invalid_request",
        description: error instanceof OAuthError ? error.description : "the request could not be read",
        status: status === 413 ? 413 : 400,
      });
    }
    const unavailable = isConnectionFailure(error);
    request.log.error({ err: error }, `${request.url.split("?", 1)[0]} failed`);
    if (unavailable) reply.header("retry-after", "5");
    return login
      .sendProtocolError(request, reply, {
        kind: "server",
        error: unavailable ? "temporarily_unavailable" : "server_error",
        description: unavailable ? "temporarily unavailable; retry later" : "unexpected condition",
        status: unavailable ? 503 : 500,
      })
      .catch(() => reply.code(500).type("text/plain; charset=utf-8").send("internal error"));
  });

  /** A redirect (302 after a GET, 303 after a POST) or the form_post page, in the request's language. */
  async function send(
    request: FastifyRequest,
    reply: FastifyReply,
    response: ClientResponse,
    uiLocales: string[],
  ): Promise<FastifyReply> {
    if (response.kind === "redirect") {
      return reply.redirect(response.url, request.method === "POST" ? 303 : 302);
    }
    return sendFormPost(
      reply,
      await login.pageContext(request, { uiLocales }),
      response.action,
      response.fields,
    );
  }

  const authorize = async (request: FastifyRequest, reply: FastifyReply) => {
    const info: RequestInfo = await requestInfo(ctx, request);
    const params = paramsOf(request);
    if (!params) {
      return login.sendProtocolError(request, reply, {
        kind: "signin",
        error: "invalid_request",
        description: `the request body must be ${FORM}`,
      });
    }
    const outcome = await validateAuthorizeRequest(ctx, info, params);
    if (outcome.kind === "page") {
      return login.sendProtocolError(request, reply, {
        kind: "signin",
        error: outcome.error.error,
        description: outcome.error.description,
        uiLocales: uiLocalesOf(params),
      });
    }
    if (outcome.kind === "redirect") {
      const { target, error } = outcome;
      const response = authorizationResponse(target, info.issuer, {
        error: error.error,
        error_description: error.description,
      });
      return send(request, reply, response, target.uiLocales ?? []);
    }

    try {
      return await proceed(request, reply, info, outcome.request);
    } catch (error) {
      // The request is valid and its redirect URI known: the client hears of the failure there.
      request.log.error({ err: error }, "authorization request failed");
      return send(
        request,
        reply,
        authorizationResponse(outcome.target, info.issuer, unexpected(error)),
        outcome.target.uiLocales ?? [],
      );
    }
  };

  /** A valid authorization request: answered at once (prompt=none, single sign-on) or via the login UI. */
  async function proceed(
    request: FastifyRequest,
    reply: FastifyReply,
    info: RequestInfo,
    validated: Omit<AuthRequestInput, "instanceId" | "userAgentHash">,
  ): Promise<FastifyReply> {
    const agent = readUserAgent(request);
    const input: AuthRequestInput = {
      ...validated,
      instanceId: info.instance.id,
      userAgentHash: agent?.hash,
    };
    const prompt = input.prompt ?? [];
    const uiLocales = input.uiLocales ?? [];
    const interactive = prompt.some((p) => p === "login" || p === "select_account" || p === "create");
    // A GET is a top-level navigation that carries the cookie when there is one; a POST without it may
    // be cross-site (SameSite=Lax), so only the login UI can see the browser's sessions.
    const seesBrowser = request.method === "GET" || agent !== undefined;
    if (seesBrowser && !interactive) {
      const transient = transientAuthRequest(input);
      const selection = await login.selectSessionFor(request, transient);
      if (selection.result === "session") {
        const { session } = selection;
        const response = await login.completer.complete({
          authRequest: { ...transient, sessionId: session.id, doneAt: new Date() },
          session,
          request,
        });
        return send(request, reply, response, uiLocales);
      }
      if (prompt.includes("none")) {
        const response = await login.completer.fail({
          authRequest: transient,
          error: selection.result,
          request,
        });
        return send(request, reply, response, uiLocales);
      }
    }
    const stored = await login.authRequests.create(input);
    return reply.redirect(loginUrl(stored.id), request.method === "POST" ? 303 : 302);
  }

  /**
   * End session. A request the browser's own session vouches for (an id_token_hint with its `sid`), or one
   * with nothing to end, is carried out at once; any other shows the confirmation page, whose form posts
   * the request back with the browser's CSRF token. Only such a post ends sessions without a hint.
   */
  const endSession = async (request: FastifyRequest, reply: FastifyReply) => {
    const params = paramsOf(request);
    if (!params) {
      return login.sendProtocolError(request, reply, {
        kind: "signout",
        error: "invalid_request",
        description: `the request body must be ${FORM}`,
      });
    }
    // A cross-site form post carries no SameSite=Lax cookie: continue as a GET, which does (and which
    // asks the person again: a confirmation's token is not carried over).
    if (request.method === "POST" && !readUserAgent(request)) {
      const query = new URLSearchParams(
        [...params.values].filter(([name]) => name !== LOGOUT_CONFIRMATION_FIELD),
      ).toString();
      return reply.redirect(`${OidcPath.endSession}${query ? `?${query}` : ""}`, 303);
    }
    const uiLocales = uiLocalesOf(params);
    const confirmation = request.method === "POST" ? params.values.get(LOGOUT_CONFIRMATION_FIELD) : undefined;
    if (confirmation !== undefined && !logoutConfirmed(request, confirmation)) {
      return sendLogoutRefused(login, request, reply, uiLocales);
    }
    const info = await requestInfo(ctx, request);
    const decided = await endSessionRequest(ctx, info, params);
    if (decided.kind === "page") {
      return login.sendProtocolError(request, reply, {
        kind: "signout",
        error: decided.error.error,
        description: decided.error.description,
        uiLocales,
      });
    }
    const sessions = await login.browserSessions(request);
    const plan = logoutPlan(decided.hint, sessions);
    if (plan.confirm && confirmation === undefined) {
      const fields: Record<string, string> = {};
      for (const name of END_SESSION_PARAMETERS) {
        const value = params.values.get(name);
        if (value !== undefined) fields[name] = value;
      }
      return sendLogoutConfirmation(login, request, reply, {
        action: OidcPath.endSession,
        fields,
        sessionIds: plan.sessionIds,
        redirectTo: decided.redirectTo,
        uiLocales,
      });
    }
    if (plan.sessionIds.length > 0) {
      // ending them all clears the cookie too
      const all = plan.sessionIds.length === sessions.length;
      // their tokens and codes end with them (./session-tokens.ts)
      await login.endBrowserSessions(request, reply, all ? {} : { sessionIds: plan.sessionIds });
    }
    return reply.redirect(decided.redirectTo ?? SIGNED_OUT_URL, request.method === "POST" ? 303 : 302);
  };

  const options = { exposeHeadRoute: false };
  app.get(OidcPath.authorize, options, authorize);
  app.post(OidcPath.authorize, options, authorize);
  app.get(OidcPath.endSession, options, endSession);
  app.post(OidcPath.endSession, options, endSession);
}
