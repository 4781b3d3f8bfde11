/**
 * The login UI's routes. Every page is server-rendered HTML that works without JavaScript; every form
 * carries the CSRF token of the browser's cookie and every POST answers 303 (post/redirect/get). An
 * error after a POST is kept on the auth request (`ui_state`) and shown by the page the 303 leads to.
 *
 *   GET  /ui/login?authRequest=<id>   entry from the authorization endpoint: decides the next step
 *   GET  /ui/login/loginname          login name (also without auth request: sign-in to the account page)
 *   POST /ui/login/loginname
 *   GET  /ui/login/password           password of the login name or of the chosen session
 *   POST /ui/login/password           rate-limited per IP and per login name
 *   GET  /ui/login/password-change    a new password, when the password must be changed (./password-change.ts)
 *   POST /ui/login/password-change
 *   GET  /ui/login/select             account picker (the browser's sessions)
 *   POST /ui/login/select
 *   GET  /ui/login/register           registration (prompt=create, "Create an account")
 *   POST /ui/login/register
 *   GET  /ui/login/idp/…              sign-in with an external identity provider (./idp/routes.ts)
 *   GET  /ui/login/complete           hands the authenticated auth request to the completer
 *   POST /ui/login/signout            ends the browser's sessions (./logout.ts)
 *   GET  /ui/login/signedout          "You are signed out" (./logout.ts)
 *   GET  /ui/assets/login.<hash>.css  the stylesheet (immutable)
 *   GET  /                            the account page for browsers, a JSON pointer for API clients
 */
import formbody from "@fastify/formbody";
import rateLimit from "@fastify/rate-limit";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { hashPassword } from "../crypto/password.ts";
import { holdOrg } from "../domain/org/locks.ts";
import { type CheckedUser, createSession, findUser } from "../domain/session/commands.ts";
import { addHumanEvent } from "../domain/user/commands.ts";
import { passwordPolicyGaps, passwordRequirements } from "../domain/user/password.ts";
import { usernameKey, usernameProblem } from "../domain/user/username.ts";
import { AlreadyExistsError, NotFoundError } from "../errors.ts";
import { newId } from "../id.ts";
import type { AuthRequest, UiState } from "./auth-requests.ts";
import type { Translator } from "./i18n.ts";
import { LoginIdps, registerIdpRoutes, requestedIdpOf, startUrl } from "./idp/routes.ts";
import type { Login } from "./login.ts";
import { registerLogoutRoutes } from "./logout.ts";
import { checkPasswordForSignIn } from "./password.ts";
import { registerPasswordChangeRoutes } from "./password-change.ts";
import { sharedRateLimitStore } from "./rate-limits.ts";
import { initials, type PageContext, renderFragment, STYLESHEET, sendPage } from "./render.ts";
import { type LoginSession, needsPassword, nextStep, pendingStep, sessionsNow } from "./sessions.ts";
import { csrfToken, csrfValid, readUserAgent, type UserAgent } from "./user-agent.ts";

type Body = Record<string, string | string[] | undefined>;
type Query = Record<string, string | undefined>;

const MAX_FIELD = 1000;

/**
 * One form field: the first value, trimmed and cut at MAX_FIELD characters; a password (`raw`) as typed
 * (the form body limit bounds it).
 */
function field(body: Body | undefined, name: string, options: { raw?: boolean } = {}): string {
  const given = body?.[name];
  const value = (Array.isArray(given) ? given[0] : given) ?? "";
  return options.raw ? value : value.trim().slice(0, MAX_FIELD);
}

function stepUrl(step: string, authRequestId?: string): string {
  const base = `/ui/login/${step}`;
  return authRequestId ? `${base}?authRequest=${encodeURIComponent(authRequestId)}` : base;
}

const entryUrl = (authRequestId: string) => `/ui/login?authRequest=${encodeURIComponent(authRequestId)}`;

/** A message page (errors, signed out); `status` as the situation requires. */
async function sendMessage(
  login: Login,
  request: FastifyRequest,
  reply: FastifyReply,
  options: {
    status: number;
    title: string;
    message: string;
    values?: Record<string, string | number>;
    alert?: boolean;
    link?: { url: string; text: string };
    authRequest?: AuthRequest;
  },
): Promise<FastifyReply> {
  const context = await login.pageContext(request, { authRequest: options.authRequest });
  const { t } = context.translator;
  return sendPage(
    reply,
    context,
    "message",
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

const backToSignIn = { url: "/ui/login/loginname", text: "error.back" };

/** The avatar, name and login name of an account. */
function accountView(session: Pick<LoginSession, "displayName" | "loginName" | "id">) {
  return {
    sessionId: session.id,
    displayName: session.displayName,
    loginName: session.loginName,
    initials: initials(session.displayName || session.loginName),
  };
}

export async function registerLoginRoutes(app: FastifyInstance, login: Login): Promise<void> {
  const { config, db, eventStore } = login.deps;
  const idps = new LoginIdps(login);

  app.get("/", async (request, reply) => {
    reply.header("vary", "Accept, Cookie");
    const accept = String(request.headers.accept ?? "");
    if (!accept.includes("text/html")) {
      return reply.send({
        message: "Platform identity server. Browsers get the account page here.",
        discovery: "/.well-known/openid-configuration",
        docs: "/docs",
        openapi: "/openapi.json",
      });
    }
    const sessions = await login.sessionsOfUserAgent(request);
    if (sessions.length === 0) return reply.redirect(stepUrl("loginname"), 302);
    const agent = login.userAgent(request, reply);
    const context = await login.pageContext(request, { csrf: csrfToken(agent) });
    const { t, dateTime } = context.translator;
    const [current] = sessions;
    return sendPage(reply, context, "account", {
      title: t("account.title"),
      current: { ...accountView(current), email: current.email },
      sessions: sessions.map((s) => ({
        ...accountView(s),
        lastSignIn: s.authTime ? t("account.lastSignIn", { time: dateTime(s.authTime) }) : undefined,
      })),
    });
  });

  await app.register(
    async (ui) => {
      await ui.register(formbody, { bodyLimit: 64 * 1024 });
      // PostgreSQL: counted in the database, shared by every process (./rate-limits.ts); embedded: in memory
      await ui.register(rateLimit, {
        global: false,
        ...(db.kind === "postgres" ? { store: sharedRateLimitStore(db, ui.log) } : {}),
      });
      const limitKeys = new WeakMap<FastifyRequest, string>();
      const perIp =
        config.loginAttemptsPerIp > 0
          ? ui.createRateLimit({ max: config.loginAttemptsPerIp, timeWindow: 60_000 })
          : undefined;
      const perName =
        config.loginAttemptsPerName > 0
          ? ui.createRateLimit({
              max: config.loginAttemptsPerName,
              timeWindow: 60_000,
              keyGenerator: (request) => `name:${limitKeys.get(request) ?? ""}`,
            })
          : undefined;

      /** Answers the 429 page when `limiter` says the request is one too many; undefined otherwise. */
      async function limited(
        limiter: typeof perIp,
        request: FastifyRequest,
        reply: FastifyReply,
        authRequest?: AuthRequest,
      ): Promise<FastifyReply | undefined> {
        if (!limiter) return undefined;
        const limit = await limiter(request);
        if (limit.isAllowed || !limit.isExceeded) return undefined;
        const seconds = Math.max(1, limit.ttlInSeconds);
        reply.header("retry-after", String(seconds));
        return sendMessage(login, request, reply, {
          status: 429,
          title: "error.tooManyAttemptsTitle",
          message: "error.tooManyAttempts",
          values: { seconds },
          authRequest,
          link: authRequest ? { url: stepUrl("password", authRequest.id), text: "error.back" } : undefined,
        });
      }

      ui.setNotFoundHandler(async (request, reply) =>
        sendMessage(login, request, reply, {
          status: 404,
          title: "error.title",
          message: "error.notFound",
          link: backToSignIn,
        }),
      );

      ui.setErrorHandler(async (error, request, reply) => {
        const status = (error as { statusCode?: number }).statusCode;
        if (status && status >= 400 && status < 500) {
          return sendMessage(login, request, reply, {
            status,
            title: "error.title",
            message: "error.badRequest",
            link: backToSignIn,
          });
        }
        request.log.error({ err: error }, "login UI request failed");
        return sendMessage(login, request, reply, {
          status: 500,
          title: "error.title",
          message: "error.server",
          link: backToSignIn,
        }).catch(() => reply.code(500).type("text/plain; charset=utf-8").send("internal error"));
      });

      ui.get(`/assets/login.${STYLESHEET.hash}.css`, async (_request, reply) =>
        reply
          .header("cache-control", "public, max-age=31536000, immutable")
          .type("text/css; charset=utf-8")
          .send(STYLESHEET.body),
      );

      /**
       * The auth request named by `id`, usable by this browser: unknown → 404, expired or done → 400,
       * started in another browser → 403 (each a page saying so). Claims an unclaimed request.
       */
      async function loadRequest(
        request: FastifyRequest,
        reply: FastifyReply,
        agent: UserAgent,
        id: string | undefined,
      ): Promise<AuthRequest | undefined> {
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
          await sendMessage(login, request, reply, { ...problem, title: "error.title", link: backToSignIn });
          return undefined;
        }
        return found;
      }

      /** A form post from this browser's pages: the CSRF token matches its cookie (403 page otherwise). */
      async function checkForm(request: FastifyRequest, reply: FastifyReply): Promise<UserAgent | undefined> {
        const agent = readUserAgent(request);
        if (csrfValid(agent, (request.body as Body | undefined)?.csrf)) return agent;
        await sendMessage(login, request, reply, {
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
      async function requestOfForm(
        request: FastifyRequest,
        reply: FastifyReply,
        agent: UserAgent,
      ): Promise<AuthRequest | undefined> {
        const id = field(request.body as Body, "authRequest");
        if (id) return loadRequest(request, reply, agent, id);
        return login.authRequests.create({
          instanceId: login.instanceId(request),
          clientId: "",
          redirectUri: "/",
          responseType: "code",
          scope: [],
          userAgentHash: agent.hash,
        });
      }

      async function pageFor(
        request: FastifyRequest,
        agent: UserAgent,
        authRequest: AuthRequest | undefined,
      ): Promise<PageContext> {
        return login.pageContext(request, { authRequest, csrf: csrfToken(agent) });
      }

      const errorOn = (authRequest: AuthRequest | undefined, page: string): UiState =>
        authRequest?.uiState.page === page ? authRequest.uiState : {};

      /**
       * Hands the request to the completer with `session` (once; a second attempt shows "already
       * complete"). The UI's own sign-ins go to the account page.
       */
      async function complete(
        request: FastifyRequest,
        reply: FastifyReply,
        authRequest: AuthRequest,
        session: LoginSession,
      ): Promise<FastifyReply> {
        const done = await login.authRequests.finish(authRequest, session.id);
        if (!done) {
          return sendMessage(login, request, reply, {
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

      /** The browser's sessions an auth request may use (those of its organization). */
      async function sessionsFor(request: FastifyRequest, authRequest: AuthRequest): Promise<LoginSession[]> {
        const sessions = await login.sessionsOfUserAgent(request);
        return sessions.filter((s) => authRequest.orgId === undefined || s.orgId === authRequest.orgId);
      }

      // ---------------------------------------------------------------------------------------------
      // Entry

      ui.get<{ Querystring: Query }>("/login", async (request, reply) => {
        const id = request.query.authRequest;
        if (!id) return reply.redirect(stepUrl("loginname"), 302);
        const agent = login.userAgent(request, reply);
        const authRequest = await loadRequest(request, reply, agent, id);
        if (!authRequest) return reply;
        const sessions = await login.sessionsOfUserAgent(request);
        const instanceId = login.instanceId(request);
        if (authRequest.prompt.includes("none")) {
          const selection = await login.selectSessionFor(request, authRequest);
          if (selection.result === "session") return complete(request, reply, authRequest, selection.session);
          const response = await login.completer.fail({ authRequest, error: selection.result, request });
          return login.sendClientResponse(request, reply, response, authRequest);
        }
        const step = nextStep(authRequest, sessions, {
          allowRegister: await login.allowRegister(instanceId, authRequest.orgId),
          now: sessions.length ? await sessionsNow(db, sessions) : new Date(),
        });
        // urn:platform:iam:org:idp:id:<id>: straight to that provider unless a session can be used as it is
        const requestedIdp = requestedIdpOf(authRequest.scope);
        if (requestedIdp && step.step !== "complete" && step.step !== "register")
          return reply.redirect(startUrl(requestedIdp, authRequest.id), 302);
        switch (step.step) {
          case "complete":
            return complete(request, reply, authRequest, step.session);
          case "password":
          case "password-change":
            await login.authRequests.attachSession(authRequest, step.session.id);
            return reply.redirect(stepUrl(step.step, authRequest.id), 302);
          default:
            return reply.redirect(stepUrl(step.step, authRequest.id), 302);
        }
      });

      // ---------------------------------------------------------------------------------------------
      // Login name

      ui.get<{ Querystring: Query }>("/login/loginname", async (request, reply) => {
        const agent = login.userAgent(request, reply);
        let authRequest: AuthRequest | undefined;
        if (request.query.authRequest) {
          authRequest = await loadRequest(request, reply, agent, request.query.authRequest);
          if (!authRequest) return reply;
        }
        const context = await pageFor(request, agent, authRequest);
        const { t } = context.translator;
        const state = errorOn(authRequest, "loginname");
        const allowRegister = await login.allowRegister(login.instanceId(request), authRequest?.orgId);
        const idpButtons = await idps.buttons(request, authRequest);
        return sendPage(reply, context, "loginname", {
          title: t("loginname.title"),
          error: state.error,
          loginName: state.values?.loginName ?? authRequest?.loginName ?? authRequest?.loginHint ?? "",
          registerUrl: allowRegister ? stepUrl("register", authRequest?.id) : undefined,
          idps: idpButtons.map((b) => ({ url: b.url, label: t("idp.continueWith", { provider: b.name }) })),
        });
      });

      ui.post("/login/loginname", async (request, reply) => {
        const agent = await checkForm(request, reply);
        if (!agent) return reply;
        const loginName = field(request.body as Body, "loginName").slice(0, 400);
        // the usual case in one statement: this browser's request, usable, takes the name
        const id = field(request.body as Body, "authRequest");
        if (id && loginName) {
          const stored = await login.authRequests.setLoginNameOfClaimed(
            login.instanceId(request),
            id,
            agent.hash,
            loginName,
          );
          if (stored) return reply.redirect(stepUrl("password", stored), 303);
        }
        const authRequest = await requestOfForm(request, reply, agent);
        if (!authRequest) return reply;
        if (!loginName) {
          await login.authRequests.setUiState(authRequest, {
            page: "loginname",
            error: "error.loginNameRequired",
          });
          return reply.redirect(stepUrl("loginname", authRequest.id), 303);
        }
        await login.authRequests.setLoginName(authRequest, loginName);
        await login.authRequests.setUiState(authRequest, {});
        return reply.redirect(stepUrl("password", authRequest.id), 303);
      });

      // ---------------------------------------------------------------------------------------------
      // Password

      ui.get<{ Querystring: Query }>("/login/password", async (request, reply) => {
        const agent = login.userAgent(request, reply);
        const authRequest = await loadRequest(request, reply, agent, request.query.authRequest);
        if (!authRequest) return reply;
        let account: ReturnType<typeof accountView> | undefined;
        let reauth = false;
        if (authRequest.sessionId) {
          const session = (await sessionsFor(request, authRequest)).find(
            (s) => s.id === authRequest.sessionId,
          );
          if (session) {
            account = accountView(session);
            reauth = session.authTime !== undefined;
          }
        }
        // a typed login name is shown as typed: the page does not tell whether it exists
        if (!account && authRequest.loginName)
          account = {
            sessionId: "",
            displayName: "",
            loginName: authRequest.loginName,
            initials: initials(authRequest.loginName),
          };
        if (!account) return reply.redirect(stepUrl("loginname", authRequest.id), 302);
        const context = await pageFor(request, agent, authRequest);
        const { t } = context.translator;
        return sendPage(reply, context, "password", {
          title: t("password.title"),
          account,
          reauth,
          error: errorOn(authRequest, "password").error,
          otherAccountUrl: stepUrl("loginname", authRequest.id),
        });
      });

      ui.post("/login/password", async (request, reply) => {
        const agent = await checkForm(request, reply);
        if (!agent) return reply;
        const authRequest = await requestOfForm(request, reply, agent);
        if (!authRequest) return reply;
        const instanceId = login.instanceId(request);
        const again = () => reply.redirect(stepUrl("password", authRequest.id), 303);
        const fail = async (error: string) => {
          await login.authRequests.setUiState(authRequest, { page: "password", error });
          return again();
        };

        const sessions = await sessionsFor(request, authRequest);
        const chosen = authRequest.sessionId
          ? sessions.find((s) => s.id === authRequest.sessionId)
          : undefined;
        const loginName = chosen?.loginName ?? authRequest.loginName;
        if (!loginName) return reply.redirect(stepUrl("loginname", authRequest.id), 303);

        const tooMany = await limited(perIp, request, reply, authRequest);
        if (tooMany) return tooMany;
        limitKeys.set(request, usernameKey(loginName));
        const tooManyForName = await limited(perName, request, reply, authRequest);
        if (tooManyForName) return tooManyForName;

        const password = field(request.body as Body, "password", { raw: true });
        if (!password) return fail("error.passwordRequired");

        let user: CheckedUser | undefined;
        if (chosen) user = { id: chosen.userId, orgId: chosen.orgId };
        else {
          try {
            user = await findUser(db, instanceId, { loginName });
          } catch (error) {
            if (!(error instanceof NotFoundError)) throw error;
          }
          // only users of the requested organization can sign in to it
          if (user && authRequest.orgId !== undefined && user.orgId !== authRequest.orgId) user = undefined;
        }
        // one answer for every failure: wrong password, unknown name, locked, locked out, deactivated
        const sessionId = await checkPasswordForSignIn(login, {
          instanceId,
          user,
          password,
          sessionId: user && (chosen ?? sessions.find((s) => s.userId === user.id))?.id,
          userAgentHash: agent.hash,
        });
        if (!sessionId) return fail("error.invalidCredentials");
        await login.authRequests.attachSession(authRequest, sessionId);
        await login.authRequests.setUiState(authRequest, {});
        return reply.redirect(stepUrl("complete", authRequest.id), 303);
      });

      // ---------------------------------------------------------------------------------------------
      // Account picker

      ui.get<{ Querystring: Query }>("/login/select", async (request, reply) => {
        const agent = login.userAgent(request, reply);
        const authRequest = await loadRequest(request, reply, agent, request.query.authRequest);
        if (!authRequest) return reply;
        const sessions = await sessionsFor(request, authRequest);
        if (sessions.length === 0) return reply.redirect(stepUrl("loginname", authRequest.id), 302);
        // the login_hint's sessions first
        const step = nextStep({ ...authRequest, prompt: ["select_account"] }, sessions, {
          allowRegister: false,
          now: new Date(),
        });
        const ordered = step.step === "select" ? step.sessions : sessions;
        const context = await pageFor(request, agent, authRequest);
        const { t } = context.translator;
        return sendPage(reply, context, "select", {
          title: t("select.title"),
          accounts: ordered.map(accountView),
          otherAccountUrl: stepUrl("loginname", authRequest.id),
        });
      });

      ui.post("/login/select", async (request, reply) => {
        const agent = await checkForm(request, reply);
        if (!agent) return reply;
        const authRequest = await requestOfForm(request, reply, agent);
        if (!authRequest) return reply;
        const sessionId = field(request.body as Body, "sessionId");
        const session = (await sessionsFor(request, authRequest)).find((s) => s.id === sessionId);
        if (!session) return reply.redirect(stepUrl("select", authRequest.id), 303);
        await login.authRequests.attachSession(authRequest, session.id);
        const next = needsPassword(authRequest, session, await sessionsNow(db, [session]))
          ? "password"
          : "complete";
        return reply.redirect(stepUrl(next, authRequest.id), 303);
      });

      // ---------------------------------------------------------------------------------------------
      // Registration

      /** The organization new users join: the requested one, else the instance's default. */
      async function registrationOrg(request: FastifyRequest, authRequest?: AuthRequest) {
        return authRequest?.orgId ?? (await login.instance(request)).defaultOrgId;
      }

      /** The registration values' errors (field → message key): required, no spaces, lengths, e-mail. */
      function validateRegistration(values: Record<string, string>): Record<string, string> {
        const errors: Record<string, string> = {};
        for (const [name, value] of Object.entries(values)) if (!value) errors[name] = "field.required";
        const usernameIssue = values.username ? usernameProblem(values.username) : undefined;
        if (usernameIssue === "whitespace") errors.username = "field.usernameSpaces";
        else if (usernameIssue === "too_long") errors.username = "field.tooLong";
        else if (usernameIssue) errors.username = "field.usernameInvalid";
        for (const name of ["username", "givenName", "familyName"] as const)
          if (values[name].length > 200) errors[name] = "field.tooLong";
        if (values.email && !/^[\w.!#$%&'*+/=?^{|}~-]+@[\w.-]+$/u.test(values.email))
          errors.email = "field.emailInvalid";
        if (values.email.length > 320) errors.email = "field.emailInvalid";
        return errors;
      }

      function registerFields(
        t: Translator["t"],
        state: UiState,
        options: { withPassword: boolean; readOnly: string[] } = { withPassword: true, readOnly: [] },
      ) {
        const values = state.values ?? {};
        const errors = state.fieldErrors ?? {};
        const minLength = config.passwordMinLength;
        const policy = renderHtmlPolicy(t, minLength);
        const make = (
          name: string,
          label: string,
          type: string,
          autocomplete: string,
          extra: Record<string, unknown> = {},
        ) => {
          const error = errors[name] ? t(errors[name], { max: 200 }) : undefined;
          const describedBy = [...((extra.describedBy as string[]) ?? [])];
          if (error) describedBy.unshift(`${name}-error`);
          return {
            name,
            label: t(label),
            type,
            autocomplete,
            value: type === "password" ? undefined : (values[name] ?? ""),
            error,
            readOnly: options.readOnly.includes(name),
            ...extra,
            describedBy,
          };
        };
        const fields = [
          make("username", "register.username", "text", "username", {
            autocapitalize: "none",
            maxLength: 200,
          }),
          make("givenName", "register.givenName", "text", "given-name", { maxLength: 200 }),
          make("familyName", "register.familyName", "text", "family-name", { maxLength: 200 }),
          make("email", "register.email", "email", "email", { maxLength: 320 }),
          ...(options.withPassword
            ? [
                make("password", "register.password", "password", "new-password", {
                  describedBy: ["password-policy"],
                  after: policy,
                }),
                make("passwordConfirm", "register.passwordConfirm", "password", "new-password"),
              ]
            : []),
        ];
        const firstInvalid = fields.find((f) => f.error);
        const firstEditable = fields.find((f) => !f.readOnly);
        const focus = firstInvalid ?? firstEditable;
        if (focus) (focus as Record<string, unknown>).autofocus = true;
        return fields;
      }

      function renderHtmlPolicy(t: Translator["t"], minLength: number): string {
        const rules = passwordRequirements.map((rule) =>
          rule === "length" ? t("policy.length", { min: minLength }) : t(`policy.${rule}`),
        );
        return renderFragment("policy", { rules, t });
      }

      ui.get<{ Querystring: Query }>("/login/register", async (request, reply) => {
        const agent = login.userAgent(request, reply);
        let authRequest: AuthRequest | undefined;
        if (request.query.authRequest) {
          authRequest = await loadRequest(request, reply, agent, request.query.authRequest);
          if (!authRequest) return reply;
        }
        if (!(await login.allowRegister(login.instanceId(request), authRequest?.orgId))) {
          return sendMessage(login, request, reply, {
            status: 403,
            title: "register.title",
            message: "error.registrationDisabled",
            authRequest,
            link: { url: stepUrl("loginname", authRequest?.id), text: "error.back" },
          });
        }
        const context = await pageFor(request, agent, authRequest);
        const { t } = context.translator;
        const state = errorOn(authRequest, "register");
        return sendPage(reply, context, "register", {
          title: t("register.title"),
          error: state.error,
          fields: registerFields(t, state),
          // back to the login-name page (the entry would show this form again with prompt=create)
          signInUrl: stepUrl("loginname", authRequest?.id),
        });
      });

      ui.post("/login/register", async (request, reply) => {
        const agent = await checkForm(request, reply);
        if (!agent) return reply;
        const authRequest = await requestOfForm(request, reply, agent);
        if (!authRequest) return reply;
        const instanceId = login.instanceId(request);
        if (!(await login.allowRegister(instanceId, authRequest.orgId)))
          return reply.redirect(stepUrl("register", authRequest.id), 303);
        const tooMany = await limited(perIp, request, reply, authRequest);
        if (tooMany) return tooMany;

        const body = request.body as Body;
        const values = {
          username: field(body, "username"),
          givenName: field(body, "givenName"),
          familyName: field(body, "familyName"),
          email: field(body, "email"),
        };
        const password = field(body, "password", { raw: true });
        const confirm = field(body, "passwordConfirm", { raw: true });
        const errors = validateRegistration(values);
        if (!password) errors.password = "field.required";
        else if (passwordPolicyGaps(password, config.passwordMinLength).length)
          errors.password = "field.passwordPolicy";
        if (!confirm) errors.passwordConfirm = "field.required";
        else if (password && confirm !== password) errors.passwordConfirm = "field.passwordMismatch";

        const retry = async (fieldErrors: Record<string, string>) => {
          await login.authRequests.setUiState(authRequest, {
            page: "register",
            error: "error.formInvalid",
            values,
            fieldErrors,
          });
          return reply.redirect(stepUrl("register", authRequest.id), 303);
        };
        if (Object.keys(errors).length) return retry(errors);

        const orgId = await registrationOrg(request, authRequest);
        const userId = newId();
        const lang = (await login.translatorFor(request, authRequest)).lang;
        const event = addHumanEvent(userId, orgId, {
          username: values.username,
          profile: {
            given_name: values.givenName,
            family_name: values.familyName,
            display_name: `${values.givenName} ${values.familyName}`,
            preferred_language: lang,
          },
          email: { address: values.email, is_verified: false },
          password_hash: await hashPassword(password),
          password_change_required: false,
        });
        const actor = { instanceId, creator: userId };
        try {
          await eventStore.push(actor, async (tx) => {
            await holdOrg(tx, instanceId, orgId);
            return [event];
          });
        } catch (error) {
          if (error instanceof AlreadyExistsError) return retry({ username: "field.usernameTaken" });
          throw error;
        }
        const created = await createSession(
          eventStore,
          actor,
          { user: { id: userId, orgId }, password, userAgentHash: agent.hash },
          login.policy,
        );
        await login.authRequests.attachSession(authRequest, created.sessionId);
        await login.authRequests.setUiState(authRequest, {});
        return reply.redirect(stepUrl("complete", authRequest.id), 303);
      });

      // ---------------------------------------------------------------------------------------------
      // External identity providers (./idp/routes.ts)

      /** The 429 page when a password post is one too many (per IP, then per login name). */
      const limitPassword = async (
        request: FastifyRequest,
        reply: FastifyReply,
        authRequest: AuthRequest,
        loginName: string,
      ) => {
        const tooMany = await limited(perIp, request, reply, authRequest);
        if (tooMany) return tooMany;
        limitKeys.set(request, usernameKey(loginName));
        return limited(perName, request, reply, authRequest);
      };

      await registerIdpRoutes(ui, login, idps, {
        field,
        stepUrl,
        loadRequest,
        checkForm,
        pageFor,
        sessionsFor,
        sendMessage: (request, reply, options) => sendMessage(login, request, reply, options),
        limitPassword,
        registerFields,
        validateRegistration,
      });

      // ---------------------------------------------------------------------------------------------
      // Password change required (./password-change.ts)

      await registerPasswordChangeRoutes(ui, login, {
        field,
        stepUrl,
        loadRequest,
        checkForm,
        pageFor,
        sessionsFor,
        limitPassword,
      });

      // ---------------------------------------------------------------------------------------------
      // Completion

      ui.get<{ Querystring: Query }>("/login/complete", async (request, reply) => {
        const agent = login.userAgent(request, reply);
        const authRequest = await loadRequest(request, reply, agent, request.query.authRequest);
        if (!authRequest) return reply;
        const session = (await sessionsFor(request, authRequest)).find((s) => s.id === authRequest.sessionId);
        // no authenticated session for it (yet): decide again
        if (!session) return reply.redirect(entryUrl(authRequest.id), 302);
        // the password again, or a new one, before any sign-in completes
        const pending = pendingStep(authRequest, session, await sessionsNow(db, [session]));
        if (pending) return reply.redirect(stepUrl(pending, authRequest.id), 302);
        return complete(request, reply, authRequest, session);
      });

      // ---------------------------------------------------------------------------------------------
      // Sign-out (./logout.ts)

      await registerLogoutRoutes(ui, login, {
        checkForm,
        sendMessage: (request, reply, options) => sendMessage(login, request, reply, options),
      });
    },
    { prefix: "/ui" },
  );
}
