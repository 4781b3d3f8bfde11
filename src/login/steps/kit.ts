/**
 * What every step of the login UI shares (./index.ts registers the steps): reading a form, the URL of a
 * step, loading the auth request of a page, the CSRF check of a form post, the page context, the message
 * page, the rate limits of the sign-in posts, and completing a request.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { usernameKey } from "../../domain/user/username.ts";
import type { AuthRequest, UiState } from "../auth-requests.ts";
import type { LoginIdps } from "../idp/login-idps.ts";
import type { Login } from "../login.ts";
import { PasskeyPresence } from "../passkey-presence.ts";
import { initials, type PageContext, sendPage } from "../render.ts";
import type { LoginSession } from "../sessions.ts";
import { csrfToken, csrfValid, readUserAgent, type UserAgent } from "../user-agent.ts";

export type Body = Record<string, string | string[] | undefined>;
export type Query = Record<string, string | undefined>;

const MAX_FIELD = 1000;

/**
 * One form field: the first value, trimmed and cut at MAX_FIELD characters; a password (`raw`) as typed
 * (the form body limit bounds it).
 */
export function field(body: Body | undefined, name: string, options: { raw?: boolean } = {}): string {
  const given = body?.[name];
  const value = (Array.isArray(given) ? given[0] : given) ?? "";
  return options.raw ? value : value.trim().slice(0, MAX_FIELD);
}

/** Steps (../sessions.ts `LoginStep`) whose page is not at `/ui/login/<step>`. */
const STEP_PATHS: Record<string, string> = { "mfa-setup": "mfa/setup" };

/** The page of a step (`/ui/login/<step>`), for an auth request or for the UI's own sign-in. */
export function stepUrl(step: string, authRequestId?: string): string {
  const base = `/ui/login/${STEP_PATHS[step] ?? step}`;
  return authRequestId ? `${base}?authRequest=${encodeURIComponent(authRequestId)}` : base;
}

/** The entry, which decides the next step of an auth request again. */
export const entryUrl = (authRequestId: string) =>
  `/ui/login?authRequest=${encodeURIComponent(authRequestId)}`;

export const backToSignIn = { url: "/ui/login/loginname", text: "error.back" };

/** The error a POST left on the auth request for `page`, if the request is at that page. */
export const errorOn = (authRequest: AuthRequest | undefined, page: string): UiState =>
  authRequest?.uiState.page === page ? authRequest.uiState : {};

/**
 * The avatar, name and login name of an account; `hideSuffix` (the branding's hide_login_name_suffix):
 * the username without `@domain`.
 */
export function accountView(
  session: Pick<LoginSession, "displayName" | "loginName" | "username" | "id">,
  hideSuffix = false,
) {
  return {
    sessionId: session.id,
    displayName: session.displayName,
    loginName: hideSuffix ? session.username : session.loginName,
    initials: initials(session.displayName || session.loginName),
  };
}

/** The options of a message page (errors, signed out); `status` as the situation requires. */
export interface MessageOptions {
  status: number;
  title: string;
  message: string;
  values?: Record<string, string | number>;
  alert?: boolean;
  link?: { url: string; text: string };
  authRequest?: AuthRequest;
}

type Limiter = ReturnType<FastifyInstance["createRateLimit"]>;

/** The rate limits of the sign-in posts (./index.ts creates them in the UI's scope). */
export interface SignInLimits {
  perIp?: Limiter;
  perName?: Limiter;
  /** Codes sent by e-mail or SMS during sign-ins, per client IP (on top of the per-user bound). */
  codesPerIp?: Limiter;
  /** The login name `perName` counts a request under (its key generator reads it). */
  keys: WeakMap<FastifyRequest, string>;
}

/** The helpers of the steps that need the Login: one per login UI scope. */
export class StepKit {
  /** Whether anyone in an instance has a passkey (the login-name page's autofill). */
  readonly passkeys: PasskeyPresence;

  constructor(
    readonly login: Login,
    /** External identity providers (the login-name page's buttons, the idp/ steps). */
    readonly idps: LoginIdps,
    private readonly limits: SignInLimits,
  ) {
    this.passkeys = new PasskeyPresence(login.deps.db, login.deps.eventStore);
  }

  /** A message page (errors, signed out); `status` as the situation requires. */
  async sendMessage(
    request: FastifyRequest,
    reply: FastifyReply,
    options: MessageOptions,
  ): Promise<FastifyReply> {
    const context = await this.login.pageContext(request, { authRequest: options.authRequest });
    const { t } = context.translator;
    return sendPage(
      reply,
      context,
      "templates/message",
      {
        title: t(options.title),
        message: t(options.message, options.values),
        alert: options.alert ?? true,
        linkUrl: options.link?.url,
        linkText: options.link ? t(options.link.text) : undefined,
      },
      { status: options.status },
    );
  }

  /**
   * The auth request named by `id`, usable by this browser: unknown → 404, expired or done → 400,
   * started in another browser → 403 (each a page saying so). Claims an unclaimed request.
   */
  async loadRequest(
    request: FastifyRequest,
    reply: FastifyReply,
    agent: UserAgent,
    id: string | undefined,
  ): Promise<AuthRequest | undefined> {
    const { login } = this;
    const found = id
      ? await login.authRequests.findClaiming(login.instanceId(request), id, agent.hash)
      : undefined;
    const problem = !found
      ? { status: 404, message: "error.requestUnknown" }
      : found.doneAt
        ? { status: 400, message: "error.requestDone" }
        : found.expired
          ? { status: 400, message: "error.requestExpired" }
          : !(await login.authRequests.claim(found, agent.hash))
            ? { status: 403, message: "error.requestOtherBrowser" }
            : undefined;
    if (problem) {
      await this.sendMessage(request, reply, { ...problem, title: "error.title", link: backToSignIn });
      return undefined;
    }
    return found;
  }

  /** A form post from this browser's pages: the CSRF token matches its cookie (403 page otherwise). */
  async checkForm(request: FastifyRequest, reply: FastifyReply): Promise<UserAgent | undefined> {
    const agent = readUserAgent(request);
    if (csrfValid(agent, (request.body as Body | undefined)?.csrf)) return agent;
    await this.sendMessage(request, reply, {
      status: 403,
      title: "error.title",
      message: "error.csrf",
      link: backToSignIn,
    });
    return undefined;
  }

  /**
   * The auth request of a form post, or a new one for the UI's own sign-in (no client: completion goes
   * to the account page).
   */
  async requestOfForm(
    request: FastifyRequest,
    reply: FastifyReply,
    agent: UserAgent,
  ): Promise<AuthRequest | undefined> {
    const id = field(request.body as Body, "authRequest");
    if (id) return this.loadRequest(request, reply, agent, id);
    return this.login.authRequests.create({
      instanceId: this.login.instanceId(request),
      clientId: "",
      redirectUri: "/",
      responseType: "code",
      scope: [],
      userAgentHash: agent.hash,
    });
  }

  /**
   * The context of a page with forms (the CSRF token of the browser); `userOrgId`: the organization of the
   * user the page is for, once known (its branding applies unless the auth request names one).
   */
  async pageFor(
    request: FastifyRequest,
    agent: UserAgent,
    authRequest: AuthRequest | undefined,
    userOrgId?: string,
  ): Promise<PageContext> {
    return this.login.pageContext(request, { authRequest, csrf: csrfToken(agent), userOrgId });
  }

  /** The browser's sessions an auth request may use (those of its organization). */
  async sessionsFor(request: FastifyRequest, authRequest: AuthRequest): Promise<LoginSession[]> {
    const sessions = await this.login.sessionsOfUserAgent(request);
    return sessions.filter((s) => authRequest.orgId === undefined || s.orgId === authRequest.orgId);
  }

  /**
   * Hands the request to the completer with `session` (once; a second attempt shows "already
   * complete"). The UI's own sign-ins go to the account page.
   */
  async complete(
    request: FastifyRequest,
    reply: FastifyReply,
    authRequest: AuthRequest,
    session: LoginSession,
  ): Promise<FastifyReply> {
    const { login } = this;
    const done = await login.authRequests.finish(authRequest, session.id);
    if (!done) {
      return this.sendMessage(request, reply, {
        status: 400,
        title: "error.title",
        message: "error.requestDone",
        link: backToSignIn,
      });
    }
    if (done.clientId === "") return reply.redirect("/", request.method === "POST" ? 303 : 302);
    const response = await login.completer.complete({ authRequest: done, session, request });
    return login.sendClientResponse(request, reply, response, done);
  }

  /**
   * The 429 page when a post is one too many for its client address; else undefined. Without an auth
   * request (the account page's forms) the page links back to the account page.
   */
  limitPerIp(
    request: FastifyRequest,
    reply: FastifyReply,
    authRequest: AuthRequest | undefined,
  ): Promise<boolean> {
    return this.limited(this.limits.perIp, request, reply, authRequest);
  }

  /** The 429 page when a request would send one code by e-mail or SMS too many for its client address. */
  limitCodesPerIp(
    request: FastifyRequest,
    reply: FastifyReply,
    authRequest: AuthRequest | undefined,
  ): Promise<boolean> {
    return this.limited(this.limits.codesPerIp, request, reply, authRequest);
  }

  /** The 429 page when a password post is one too many (per IP, then per login name): then true. */
  async limitPassword(
    request: FastifyRequest,
    reply: FastifyReply,
    authRequest: AuthRequest | undefined,
    loginName: string,
  ): Promise<boolean> {
    if (await this.limited(this.limits.perIp, request, reply, authRequest)) return true;
    this.limits.keys.set(request, usernameKey(loginName));
    return this.limited(this.limits.perName, request, reply, authRequest);
  }

  /**
   * Answers the 429 page when `limiter` says the request is one too many: then true, and the caller must
   * stop (return `reply`). A boolean, not the reply: a Fastify reply is a thenable that resolves, once
   * sent, to undefined, so an `await` of a reply reads as "not limited" and the request went on, checking
   * the password it had just refused.
   */
  private async limited(
    limiter: Limiter | undefined,
    request: FastifyRequest,
    reply: FastifyReply,
    authRequest?: AuthRequest,
  ): Promise<boolean> {
    if (!limiter) return false;
    const limit = await limiter(request);
    if (limit.isAllowed || !limit.isExceeded) return false;
    const seconds = Math.max(1, limit.ttlInSeconds);
    reply.header("retry-after", String(seconds));
    await this.sendMessage(request, reply, {
      status: 429,
      title: "error.tooManyAttemptsTitle",
      message: "error.tooManyAttempts",
      values: { seconds },
      authRequest,
      link: authRequest
        ? { url: stepUrl("password", authRequest.id), text: "error.back" }
        : { url: "/", text: "error.toAccount" },
    });
    return true;
  }
}
