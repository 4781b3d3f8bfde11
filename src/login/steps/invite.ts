/**
 * An invitation (the users API's `_invite`, an INIT e-mail): the account exists without a password; its
 * link sets the first one and signs in.
 *
 *   GET  /ui/login/invite?userID=<id>&code=<code>   the code (filled in), a password with the policy
 *   POST /ui/login/invite                           sets it with the code (rate-limited per IP), then signs
 *                                                   in: the sign-in this browser was in goes on, else the
 *                                                   account page
 *
 * The code is the invitation's password code, checked by the users API's SetPassword decision (a wrong code
 * counts toward its five tries): a password reset's code is refused here, as an invitation's is on the
 * reset's page. Accepting the invitation verifies the e-mail address: the code reached the person there.
 */
import type { FastifyInstance } from "fastify";
import { hashPassword } from "../../crypto/password.ts";
import { createSession, findUser } from "../../domain/session/commands.ts";
import { LOGIN_PATHS } from "../../notifications/messages/links.ts";
import { sendPage } from "../render.ts";
import { newUserAgent } from "../user-agent.ts";
import { codePasswordFields, linkOf, linkUrl, newPasswordOf, requestOfLink } from "./code-kit.ts";
import { type Body, errorOn, type Query, type StepKit, stepUrl } from "./kit.ts";
import { setPasswordWithCode } from "./password-reset.ts";

/** The template it shares with the reset's link (../templates/code-password.eta); its `ui_state.page`. */
const TEMPLATE = "templates/code-password";
const PAGE = "invite";
const PATH = LOGIN_PATHS.invite;

export function inviteStep(ui: FastifyInstance, kit: StepKit): void {
  const { login } = kit;
  const { config, db, eventStore } = login.deps;

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
    const context = await kit.pageFor(request, agent, authRequest);
    const { t } = context.translator;
    const state = errorOn(authRequest, PAGE);
    return sendPage(reply, context, TEMPLATE, {
      title: t("invite.title"),
      intro: t("invite.intro", { instance: context.instanceName }),
      submit: t("invite.submit"),
      action: PATH,
      userId: link.userId,
      error: state.error,
      fields: codePasswordFields(t, state, link.code, config.passwordMinLength),
      backUrl: stepUrl("loginname", authRequest?.clientId ? authRequest.id : undefined),
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
    const link = linkOf(body);
    const { password, errors } = newPasswordOf(body, config.passwordMinLength);
    if (!link.code) errors.code = "field.required";
    const again = async (fieldErrors: Record<string, string>) => {
      await login.authRequests.setUiState(authRequest, {
        page: PAGE,
        error: "error.formInvalid",
        fieldErrors,
      });
      return reply.redirect(linkUrl(PATH, link, authRequest.id), 303);
    };
    if (Object.keys(errors).length) return again(errors);

    const instanceId = authRequest.instanceId;
    const refused = await setPasswordWithCode(
      login,
      instanceId,
      link,
      await hashPassword(password),
      "invite",
    );
    if (refused) return again({ code: "field.codeInvalid" });

    // signed in with the password just set: a session of this browser, as after registration
    const user = await findUser(db, instanceId, { userId: link.userId });
    const fresh = newUserAgent();
    const created = await createSession(
      eventStore,
      { instanceId, creator: user.id },
      { user, password, userAgentHash: fresh.hash },
      login.policy,
    );
    // signed in: the browser gets a new cookie (no session fixation)
    await login.adoptUserAgent(request, reply, fresh, authRequest);
    await login.authRequests.attachSession(authRequest, created.sessionId);
    await login.authRequests.setUiState(authRequest, {});
    return reply.redirect(stepUrl("complete", authRequest.id), 303);
  });
}
