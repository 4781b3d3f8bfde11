/**
 * GET, POST /ui/login/loginname: the login name (also without auth request: the sign-in to the account
 * page), with "Create an account" when registration is allowed and the "Continue with" links of the
 * organization's identity providers. The name is not checked here: the password page does not tell
 * whether it exists either.
 */
import type { FastifyInstance } from "fastify";
import type { AuthRequest } from "../auth-requests.ts";
import { sendPage } from "../render.ts";
import { type Body, errorOn, field, type Query, type StepKit, stepUrl } from "./kit.ts";

/** Its template, ../templates/loginname.eta, and the `ui_state.page` of its errors. */
const PAGE = "loginname";

export function loginNameStep(ui: FastifyInstance, kit: StepKit): void {
  const { login } = kit;
  ui.get<{ Querystring: Query }>("/login/loginname", async (request, reply) => {
    const agent = login.userAgent(request, reply);
    let authRequest: AuthRequest | undefined;
    if (request.query.authRequest) {
      authRequest = await kit.loadRequest(request, reply, agent, request.query.authRequest);
      if (!authRequest) return reply;
    }
    const context = await kit.pageFor(request, agent, authRequest);
    const { t } = context.translator;
    const state = errorOn(authRequest, PAGE);
    const allowRegister = await login.allowRegister(login.instanceId(request), authRequest?.orgId);
    const idpButtons = await kit.idps.buttons(request, authRequest);
    return sendPage(reply, context, PAGE, {
      title: t("loginname.title"),
      error: state.error,
      loginName: state.values?.loginName ?? authRequest?.loginName ?? authRequest?.loginHint ?? "",
      registerUrl: allowRegister ? stepUrl("register", authRequest?.id) : undefined,
      idps: idpButtons.map((b) => ({ url: b.url, label: t("idp.continueWith", { provider: b.name }) })),
    });
  });

  ui.post("/login/loginname", async (request, reply) => {
    const agent = await kit.checkForm(request, reply);
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
    const authRequest = await kit.requestOfForm(request, reply, agent);
    if (!authRequest) return reply;
    if (!loginName) {
      await login.authRequests.setUiState(authRequest, {
        page: PAGE,
        error: "error.loginNameRequired",
      });
      return reply.redirect(stepUrl("loginname", authRequest.id), 303);
    }
    await login.authRequests.setLoginName(authRequest, loginName);
    await login.authRequests.setUiState(authRequest, {});
    return reply.redirect(stepUrl("password", authRequest.id), 303);
  });
}
