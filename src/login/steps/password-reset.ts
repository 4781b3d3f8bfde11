/**
 * A forgotten password: asking for the e-mail, then the page of its link.
 *
 *   GET  /ui/login/password-reset?authRequest=<id>          the login name (prefilled from the sign-in)
 *   POST /ui/login/password-reset                           asks for the code; rate-limited per IP and name
 *   GET  /ui/login/password-reset/sent?authRequest=<id>     "If an account exists for this name, we sent…"
 *   GET  /ui/login/password-reset?userID=<id>&code=<code>   the e-mail's link: the code (filled in), a new
 *                                                           password with the policy
 *   POST /ui/login/password-reset/set                       sets it with the code (rate-limited per IP)
 *   GET  /ui/login/password-reset/done?authRequest=<id>     "Your password was changed", then on to sign in
 *
 * The request never tells whether the name exists: every name gets the same page at once, and the work
 * (the lookup, then the code and its PASSWORD_RESET message through the users API's command, in the
 * transaction of the code's event) starts once the answer is sent, so neither the page nor its timing
 * depends on the name; an unknown name, a user without an e-mail address or beyond the per-user code limit only
 * leave no message. What the page does tell is whether e-mail can be sent at all (an instance matter):
 * with no active SMTP provider it says the e-mail could not be sent. The login setting
 * `hide_password_reset` removes the request (the link's page still works: the API can send codes).
 */
import type { FastifyBaseLogger, FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { hashPassword } from "../../crypto/password.ts";
import { findUser } from "../../domain/session/commands.ts";
import { endSessionsOnPasswordChange } from "../../domain/session/user-sessions.ts";
import { foldUser } from "../../domain/user/commands.ts";
import { type PasswordCodeReason, USER } from "../../domain/user/events.ts";
import {
  FailedPreconditionError,
  type InvalidArgumentError,
  NotFoundError,
  ResourceExhaustedError,
} from "../../errors.ts";
import { LOGIN_PATHS } from "../../notifications/messages/links.ts";
import type { AuthRequest } from "../auth-requests.ts";
import type { Login } from "../login.ts";
import { sendPage } from "../render.ts";
import {
  codePasswordFields,
  codesOf,
  linkOf,
  linkUrl,
  newPasswordOf,
  rememberSignIn,
  requestOfLink,
} from "./code-kit.ts";
import { type Body, errorOn, field, type Query, type StepKit, stepUrl } from "./kit.ts";

/** The request's template (../templates/password-reset.eta) and `ui_state.page`. */
const PAGE = "password-reset";
/** The link page's template (shared with the invitation) and its `ui_state.page`. */
const SET_TEMPLATE = "templates/code-password";
const TEMPLATE = "steps/password-reset";
const SET_PAGE = "password-reset-set";
/** `ui_state.page` of the outcomes the 303s lead to. */
const SENT = "password-reset-sent";
const DONE = "password-reset-done";

export function passwordResetStep(ui: FastifyInstance, kit: StepKit): void {
  const { login } = kit;
  const { config, db } = login.deps;
  /** The requests' work still running after their answers (waited for when the server closes). */
  const running = new Set<Promise<void>>();
  ui.addHook("onClose", async () => {
    await Promise.allSettled([...running]);
  });

  const hidden = (authRequest: AuthRequest | undefined, instanceId: string) =>
    login.loginFlag(instanceId, authRequest?.orgId, "hide_password_reset");
  const backUrl = (authRequest: AuthRequest | undefined) =>
    authRequest?.loginName ? stepUrl("password", authRequest.id) : stepUrl("loginname", authRequest?.id);

  ui.get<{ Querystring: Query }>("/login/password-reset", async (request, reply) => {
    const link = linkOf(request.query);
    const agent = login.userAgent(request, reply);
    // the e-mail's link, or the page after a post of its form
    if (link.userId || link.code) {
      const { authRequest, failed } = await requestOfLink(
        kit,
        request,
        reply,
        agent,
        request.query.authRequest,
      );
      if (failed) return reply;
      const context = await kit.pageFor(request, agent, authRequest);
      const { t } = context.translator;
      const state = errorOn(authRequest, SET_PAGE);
      return sendPage(reply, context, SET_TEMPLATE, {
        title: t("passwordReset.setTitle"),
        intro: t("passwordReset.setIntro"),
        submit: t("passwordChange.submit"),
        action: `${LOGIN_PATHS.passwordReset}/set`,
        userId: link.userId,
        error: state.error,
        fields: codePasswordFields(t, state, link.code, config.passwordMinLength),
        backUrl: backUrl(authRequest),
      });
    }
    let authRequest: AuthRequest | undefined;
    if (request.query.authRequest) {
      authRequest = await kit.loadRequest(request, reply, agent, request.query.authRequest);
      if (!authRequest) return reply;
    }
    if (await hidden(authRequest, login.instanceId(request))) return sendHidden(request, reply, authRequest);
    const context = await kit.pageFor(request, agent, authRequest);
    const { t } = context.translator;
    const state = errorOn(authRequest, PAGE);
    return sendPage(reply, context, TEMPLATE, {
      title: t("passwordReset.title"),
      error: state.error,
      loginName: state.values?.loginName ?? authRequest?.loginName ?? authRequest?.loginHint ?? "",
      backUrl: backUrl(authRequest),
    });
  });

  function sendHidden(request: FastifyRequest, reply: FastifyReply, authRequest?: AuthRequest) {
    return kit.sendMessage(request, reply, {
      status: 403,
      title: "passwordReset.title",
      message: "error.passwordResetDisabled",
      authRequest,
      link: { url: backUrl(authRequest), text: "error.back" },
    });
  }

  ui.post("/login/password-reset", async (request, reply) => {
    const agent = await kit.checkForm(request, reply);
    if (!agent) return reply;
    const authRequest = await kit.requestOfForm(request, reply, agent);
    if (!authRequest) return reply;
    const instanceId = login.instanceId(request);
    if (await hidden(authRequest, instanceId)) return sendHidden(request, reply, authRequest);
    const loginName = field(request.body as Body, "loginName");
    if (!loginName) {
      await login.authRequests.setUiState(authRequest, { page: PAGE, error: "error.loginNameRequired" });
      return reply.redirect(stepUrl(PAGE, authRequest.id), 303);
    }
    // counted per IP and per name whether the name exists or not
    const tooMany = await kit.limitPassword(request, reply, authRequest, loginName);
    if (tooMany) return reply;

    const codes = codesOf(login);
    const canSend = await codes.providerActive(db, instanceId, "password");
    await login.authRequests.setUiState(authRequest, {
      page: SENT,
      values: { loginName, delivery: canSend ? "on" : "off" },
    });
    rememberSignIn(login, request, reply, authRequest);
    // once the answer is out: its time must not depend on the name (on the embedded database the work's
    // statements would otherwise run before the answer's, on its one connection)
    reply.raw.once("close", () => {
      const work = requestCode(login, request.log, instanceId, authRequest, loginName).finally(() =>
        running.delete(work),
      );
      running.add(work);
    });
    return reply.redirect(
      `${LOGIN_PATHS.passwordReset}/sent?authRequest=${encodeURIComponent(authRequest.id)}`,
      303,
    );
  });

  ui.get<{ Querystring: Query }>("/login/password-reset/sent", async (request, reply) => {
    const agent = login.userAgent(request, reply);
    const authRequest = await kit.loadRequest(request, reply, agent, request.query.authRequest);
    if (!authRequest) return reply;
    const state = errorOn(authRequest, SENT);
    if (!state.values) return reply.redirect(stepUrl(PAGE, authRequest.id), 302);
    const unavailable = state.values.delivery === "off";
    return kit.sendMessage(request, reply, {
      status: 200,
      title: unavailable ? "passwordReset.unavailableTitle" : "passwordReset.sentTitle",
      message: unavailable ? "error.emailUnavailable" : "passwordReset.sent",
      values: { loginName: state.values.loginName ?? "" },
      alert: unavailable,
      authRequest,
      link: { url: backUrl(authRequest), text: "error.back" },
    });
  });

  ui.post("/login/password-reset/set", async (request, reply) => {
    const agent = await kit.checkForm(request, reply);
    if (!agent) return reply;
    const authRequest = await kit.requestOfForm(request, reply, agent);
    if (!authRequest) return reply;
    const tooMany = await kit.limitPerIp(request, reply, authRequest);
    if (tooMany) return reply;
    const body = request.body as Body;
    const link = linkOf(body);
    const { password, errors } = newPasswordOf(body, config.passwordMinLength);
    if (!link.code) errors.code = "field.required";
    const again = async (fieldErrors: Record<string, string>) => {
      await login.authRequests.setUiState(authRequest, {
        page: SET_PAGE,
        error: "error.formInvalid",
        fieldErrors,
      });
      return reply.redirect(linkUrl(LOGIN_PATHS.passwordReset, link, authRequest.id), 303);
    };
    if (Object.keys(errors).length) return again(errors);

    const refused = await setPasswordWithCode(
      login,
      authRequest.instanceId,
      link,
      await hashPassword(password),
      "reset",
    );
    if (refused) return again({ code: "field.codeInvalid" });
    await login.authRequests.setUiState(authRequest, { page: DONE });
    return reply.redirect(
      `${LOGIN_PATHS.passwordReset}/done?authRequest=${encodeURIComponent(authRequest.id)}`,
      303,
    );
  });

  ui.get<{ Querystring: Query }>("/login/password-reset/done", async (request, reply) => {
    const agent = login.userAgent(request, reply);
    const authRequest = await kit.loadRequest(request, reply, agent, request.query.authRequest);
    if (!authRequest) return reply;
    if (authRequest.uiState.page !== DONE) return reply.redirect(stepUrl(PAGE, authRequest.id), 302);
    // a sign-in of an application goes on with the new password; the UI's own, from the login name
    const next = authRequest.clientId
      ? authRequest.loginName
        ? stepUrl("password", authRequest.id)
        : stepUrl("loginname", authRequest.id)
      : stepUrl("loginname");
    return kit.sendMessage(request, reply, {
      status: 200,
      title: "passwordReset.doneTitle",
      message: "passwordReset.done",
      alert: false,
      authRequest,
      link: { url: next, text: "passwordReset.continue" },
    });
  });
}

/**
 * The request's work after its answer: the user of the name (of the sign-in's organization, if it names
 * one) gets a password code by e-mail through the users API's command. Whatever refuses it (no such user,
 * no e-mail address, the per-user limit) only leaves no message: nobody is waiting for an answer.
 */
async function requestCode(
  login: Login,
  log: FastifyBaseLogger,
  instanceId: string,
  authRequest: AuthRequest,
  loginName: string,
): Promise<void> {
  const { db, eventStore } = login.deps;
  try {
    const user = await findUser(db, instanceId, { loginName });
    if (authRequest.orgId !== undefined && user.orgId !== authRequest.orgId) return;
    const codes = codesOf(login, await login.messageLabelOrg(authRequest));
    await eventStore.push({ instanceId, creator: user.id }, async (tx) => {
      const aggregate = foldUser(await tx.load(USER, user.id));
      if (!aggregate) throw new NotFoundError("user not found");
      return [(await codes.passwordCode(tx, instanceId, aggregate, "reset", false)).event];
    });
  } catch (error) {
    if (
      error instanceof NotFoundError ||
      error instanceof FailedPreconditionError ||
      error instanceof ResourceExhaustedError
    )
      return;
    log.error({ err: error }, "password reset request failed");
  }
}

/**
 * Sets the password with a password code of `reason` (this page's reset, the invitation page's invite)
 * through the users API's decision: the check and the change in one command, a wrong code counted as a
 * wrong try, a code of the other kind refused like a wrong one (not counted); an invitation's code also
 * verifies the e-mail address. Answers the refusal, if any (an unknown user is refused like a wrong code).
 */
export async function setPasswordWithCode(
  login: Login,
  instanceId: string,
  link: { userId: string; code: string },
  passwordHash: string,
  reason: PasswordCodeReason,
): Promise<InvalidArgumentError | NotFoundError | undefined> {
  const codes = codesOf(login);
  let refused: InvalidArgumentError | undefined;
  try {
    await login.deps.eventStore.push({ instanceId, creator: link.userId }, async (tx) => {
      const user = foldUser(await tx.load(USER, link.userId));
      if (!user) throw new NotFoundError("user not found");
      const decided = codes.setPasswordWithCode(instanceId, user, link.code, passwordHash, { reason });
      refused = decided.ok ? undefined : decided.error;
      // a forgotten password's new one (or the first one) ends every session of the user
      return [...decided.events, ...(await endSessionsOnPasswordChange(tx, instanceId, decided.events))];
    });
  } catch (error) {
    if (error instanceof NotFoundError || error instanceof FailedPreconditionError)
      return new NotFoundError("user not found");
    throw error;
  }
  return refused;
}
