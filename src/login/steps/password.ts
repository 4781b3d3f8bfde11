/**
 * GET, POST /ui/login/password: the password of the login name or of the chosen session, rate-limited per
 * IP and per login name. One answer for every failure (../password.ts).
 */
import type { FastifyInstance } from "fastify";
import { type CheckedUser, findUser } from "../../domain/session/commands.ts";
import { NotFoundError } from "../../errors.ts";
import { checkPasswordForSignIn } from "../password.ts";
import { initials, sendPage } from "../render.ts";
import { newUserAgent } from "../user-agent.ts";
import { continueWithSession } from "./complete.ts";
import { accountView, type Body, errorOn, field, type Query, type StepKit, stepUrl } from "./kit.ts";

/** Its template, ../templates/password.eta, and the `ui_state.page` of its errors. */
const PAGE = "password";
const TEMPLATE = "steps/password";

export function passwordStep(ui: FastifyInstance, kit: StepKit): void {
  const { login } = kit;
  const { db } = login.deps;
  ui.get<{ Querystring: Query }>("/login/password", async (request, reply) => {
    const agent = login.userAgent(request, reply);
    const authRequest = await kit.loadRequest(request, reply, agent, request.query.authRequest);
    if (!authRequest) return reply;
    let account: ReturnType<typeof accountView> | undefined;
    let reauth = false;
    const session = authRequest.sessionId
      ? (await kit.sessionsFor(request, authRequest)).find((s) => s.id === authRequest.sessionId)
      : undefined;
    // the user's organization is known from a chosen session only (a typed name is not looked up here)
    const context = await kit.pageFor(request, agent, authRequest, session?.orgId);
    if (session) {
      account = accountView(session, context.branding?.hideLoginNameSuffix);
      reauth = session.authTime !== undefined;
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
    const { t } = context.translator;
    const hideReset = await login.loginFlag(authRequest.instanceId, authRequest.orgId, "hide_password_reset");
    return sendPage(reply, context, TEMPLATE, {
      title: t("password.title"),
      account,
      reauth,
      // "Forgot password?" unless the login setting hides it for the sign-in's organization (or instance)
      resetUrl: hideReset ? undefined : stepUrl("password-reset", authRequest.id),
      error: errorOn(authRequest, PAGE).error,
      otherAccountUrl: stepUrl("loginname", authRequest.id),
    });
  });

  ui.post("/login/password", async (request, reply) => {
    const agent = await kit.checkForm(request, reply);
    if (!agent) return reply;
    const authRequest = await kit.requestOfForm(request, reply, agent);
    if (!authRequest) return reply;
    const instanceId = login.instanceId(request);
    const again = () => reply.redirect(stepUrl("password", authRequest.id), 303);
    const fail = async (error: string) => {
      await login.authRequests.setUiState(authRequest, { page: PAGE, error });
      return again();
    };

    const sessions = await kit.sessionsFor(request, authRequest);
    const chosen = authRequest.sessionId ? sessions.find((s) => s.id === authRequest.sessionId) : undefined;
    const loginName = chosen?.loginName ?? authRequest.loginName;
    if (!loginName) return reply.redirect(stepUrl("loginname", authRequest.id), 303);

    const tooMany = await kit.limitPassword(request, reply, authRequest, loginName);
    if (tooMany) return reply;

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
    // the login policy of the sign-in (the user's, else the requested organization's) may rule passwords out
    const policy = user
      ? await login.userLoginPolicy(instanceId, { userId: user.id, orgId: user.orgId })
      : await login.loginPolicy(instanceId, authRequest.orgId);
    if (!policy.allow_username_password) return fail("error.passwordNotAllowed");
    // one answer for every failure: wrong password, unknown name, locked, locked out, deactivated
    const fresh = newUserAgent();
    const sessionId = await checkPasswordForSignIn(login, {
      instanceId,
      user,
      password,
      sessionId: user && (chosen ?? sessions.find((s) => s.userId === user.id))?.id,
      userAgentHash: fresh.hash,
    });
    if (!sessionId) return fail("error.invalidCredentials");
    // signed in: the browser gets a new cookie (no session fixation)
    await login.adoptUserAgent(request, reply, fresh, authRequest);
    return continueWithSession(kit, request, reply, authRequest, sessionId);
  });
}
