/**
 * Proving an e-mail address with its code: after registration (./register.ts sends VERIFY_EMAIL and comes
 * here), and from the e-mail's link.
 *
 *   GET  /ui/login/verify-email?authRequest=<id>            the code sent to the new account's address
 *   GET  /ui/login/verify-email?userID=<id>&code=<code>     the e-mail's link: the code filled in
 *   POST /ui/login/verify-email                             checks it (rate-limited per IP); a wrong code
 *                                                           counts toward the code's five tries
 *   POST /ui/login/verify-email/resend                      a new code (rate-limited per IP; at most 3
 *                                                           codes a minute for a user, the API's limit)
 *   GET  /ui/login/verify-email/done?authRequest=<id>       "Your e-mail address is verified"
 *
 * The checks and the new codes are the users API's commands (VerifyEmail, SendEmailCode). With the
 * sign-in's session of that user (after registration) success continues the sign-in, and "Skip for now"
 * does so without a code; from a link it ends on a page leading to the account (or the sign-in the
 * browser was in).
 */
import type { FastifyInstance, FastifyRequest } from "fastify";
import { LOGIN_PATHS } from "../../notifications/messages/links.ts";
import type { AuthRequest } from "../auth-requests.ts";
import { sendPage } from "../render.ts";
import type { LoginSession } from "../sessions.ts";
import {
  codeField,
  linkOf,
  linkUrl,
  normalCode,
  requestOfLink,
  sendChannelCode,
  verifyChannelCode,
} from "./code-kit.ts";
import { type Body, entryUrl, errorOn, field, type Query, type StepKit, stepUrl } from "./kit.ts";

/** Its template, ../templates/verify-email.eta, and the `ui_state.page` of its errors and notices. */
const PAGE = "verify-email";
const TEMPLATE = "steps/verify-email";
const DONE = "verify-email-done";
const PATH = LOGIN_PATHS.verifyEmail;

/** What the page says about the last code: sent, could not be sent (no provider), or one too many. */
export type CodeNotice = "sent" | "resent" | "off" | "limit";
const NOTICES: Record<CodeNotice, { key: string; alert: boolean }> = {
  sent: { key: "verifyEmail.sent", alert: false },
  resent: { key: "verifyEmail.resent", alert: false },
  off: { key: "error.emailUnavailable", alert: true },
  limit: { key: "error.tooManyCodes", alert: true },
};

export function verifyEmailStep(ui: FastifyInstance, kit: StepKit): void {
  const { login } = kit;

  /** The browser's session of the sign-in, when it is `userId`'s (or any user's, without `userId`). */
  async function sessionOf(request: FastifyRequest, authRequest: AuthRequest | undefined, userId: string) {
    if (!authRequest?.sessionId) return undefined;
    const sessions = await kit.sessionsFor(request, authRequest);
    return sessions.find((s) => s.id === authRequest.sessionId && (!userId || s.userId === userId));
  }

  ui.get<{ Querystring: Query }>(PATH.replace("/ui", ""), async (request, reply) => {
    const link = linkOf(request.query);
    const agent = login.userAgent(request, reply);
    const { authRequest, failed } = await requestOfLink(
      kit,
      request,
      reply,
      agent,
      request.query.authRequest,
    );
    if (failed) return reply;
    const session: LoginSession | undefined = await sessionOf(request, authRequest, link.userId);
    const userId = link.userId || session?.userId;
    if (!userId) return reply.redirect(authRequest ? entryUrl(authRequest.id) : stepUrl("loginname"), 302);
    const context = await kit.pageFor(request, agent, authRequest);
    const { t } = context.translator;
    const state = errorOn(authRequest, PAGE);
    const notice = NOTICES[state.values?.notice as CodeNotice];
    const email = session?.userId === userId ? session.email : undefined;
    return sendPage(reply, context, TEMPLATE, {
      title: t("verifyEmail.title"),
      intro: email ? t("verifyEmail.introTo", { email }) : t("verifyEmail.intro"),
      notice: notice && !notice.alert ? t(notice.key) : undefined,
      error: state.error ?? (notice?.alert ? notice.key : undefined),
      userId,
      codeField: { ...codeField(t, state.fieldErrors?.code, link.code), autofocus: true },
      // after registration the sign-in may go on without the code
      skipUrl: session && authRequest ? stepUrl("complete", authRequest.id) : undefined,
    });
  });

  ui.post(PATH.replace("/ui", ""), async (request, reply) => {
    const agent = await kit.checkForm(request, reply);
    if (!agent) return reply;
    const authRequest = await kit.requestOfForm(request, reply, agent);
    if (!authRequest) return reply;
    const tooMany = await kit.limitPerIp(request, reply, authRequest);
    if (tooMany) return reply;
    const body = request.body as Body;
    const userId = field(body, "userID");
    const code = normalCode(field(body, "code"));
    const again = async (error: string) => {
      await login.authRequests.setUiState(authRequest, {
        page: PAGE,
        error: "error.formInvalid",
        fieldErrors: { code: error },
      });
      return reply.redirect(linkUrl(PATH, { userId, code }, authRequest.id), 303);
    };
    if (!code) return again("field.required");

    const verified = await verifyChannelCode(login, authRequest.instanceId, userId, "email", code);
    if (!verified) return again("field.codeInvalid");

    // the sign-in of this user goes on; otherwise a page saying so
    if (await sessionOf(request, authRequest, userId)) {
      await login.authRequests.setUiState(authRequest, {});
      return reply.redirect(stepUrl("complete", authRequest.id), 303);
    }
    await login.authRequests.setUiState(authRequest, { page: DONE });
    return reply.redirect(`${PATH}/done?authRequest=${encodeURIComponent(authRequest.id)}`, 303);
  });

  ui.post(`${PATH.replace("/ui", "")}/resend`, async (request, reply) => {
    const agent = await kit.checkForm(request, reply);
    if (!agent) return reply;
    const authRequest = await kit.requestOfForm(request, reply, agent);
    if (!authRequest) return reply;
    const tooMany = await kit.limitPerIp(request, reply, authRequest);
    if (tooMany) return reply;
    const userId = field(request.body as Body, "userID");
    const notice = await sendEmailCode(kit, authRequest.instanceId, userId, authRequest);
    await login.authRequests.setUiState(authRequest, {
      page: PAGE,
      values: { notice: notice === "sent" ? "resent" : notice },
    });
    return reply.redirect(linkUrl(PATH, { userId }, authRequest.id), 303);
  });

  ui.get<{ Querystring: Query }>(`${PATH.replace("/ui", "")}/done`, async (request, reply) => {
    const agent = login.userAgent(request, reply);
    const authRequest = await kit.loadRequest(request, reply, agent, request.query.authRequest);
    if (!authRequest) return reply;
    if (authRequest.uiState.page !== DONE) return reply.redirect(entryUrl(authRequest.id), 302);
    return kit.sendMessage(request, reply, {
      status: 200,
      title: "verifyEmail.doneTitle",
      message: "verifyEmail.done",
      alert: false,
      authRequest,
      // the sign-in the browser was in goes on; else the account page (which asks to sign in first)
      link: authRequest.clientId
        ? { url: entryUrl(authRequest.id), text: "passwordReset.continue" }
        : { url: "/", text: "error.toAccount" },
    });
  });
}

/**
 * A new e-mail code for `userId` (`sendChannelCode`). An unknown user or one without an address is
 * answered like a sent code: the ID came from a link, and the page tells nothing about accounts.
 */
async function sendEmailCode(
  kit: StepKit,
  instanceId: string,
  userId: string,
  authRequest: AuthRequest,
): Promise<CodeNotice> {
  const outcome = await sendChannelCode(kit.login, instanceId, userId, "email", authRequest);
  return outcome === "none" ? "sent" : outcome;
}
