/**
 * GET, POST /ui/login/loginname: the login name (also without auth request: the sign-in to the account
 * page), with "Create an account" when registration is allowed and the "Continue with" links of the
 * organization's identity providers. Whether an unknown name is told here is the login setting
 * `ignore_unknown_usernames`: on (the default) any name leads to the password page, which answers an
 * unknown name like a wrong password; off (ZITADEL's default) the page says the user was not found.
 * The login policy decides the ways in: the login-name form (`allow_username_password`), the providers'
 * links (`allow_external_idp`) and "Sign in with a passkey" (`passwordless_allowed`).
 */

import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { findUser } from "../../domain/session/commands.ts";
import { NotFoundError } from "../../errors.ts";
import type { AuthRequest } from "../auth-requests.ts";
import { sendPage } from "../render.ts";
import type { UserAgent } from "../user-agent.ts";
import { type Body, errorOn, field, type Query, type StepKit, stepUrl } from "./kit.ts";
import { passkeySignInOptions } from "./passkey/sign-in.ts";

/** Its template, ./loginname.eta, and the `ui_state.page` of its errors. */
const PAGE = "loginname";
const TEMPLATE = "steps/loginname";

/**
 * The login-name page for `authRequest` (none: the sign-in to the account page). The entry shows it too,
 * without a redirect, when the login name is the sign-in's next step (./entry.ts).
 */
export async function sendLoginNamePage(
  kit: StepKit,
  request: FastifyRequest,
  reply: FastifyReply,
  agent: UserAgent,
  authRequest: AuthRequest | undefined,
): Promise<FastifyReply> {
  const { login } = kit;
  const context = await kit.pageFor(request, agent, authRequest);
  const { t } = context.translator;
  const state = errorOn(authRequest, PAGE);
  const allowRegister = await login.allowRegister(login.instanceId(request), authRequest?.orgId);
  // the login policy of the sign-in's organization (else the instance's): which ways in the page offers
  const policy = await login.loginPolicy(login.instanceId(request), authRequest?.orgId);
  const idpButtons = policy.allow_external_idp ? await kit.idps.buttons(request, authRequest) : [];
  const passwordlessAllowed = policy.passwordless_allowed;
  return sendPage(
    reply,
    context,
    TEMPLATE,
    {
      title: t("loginname.title"),
      error: state.error,
      loginName: state.values?.loginName ?? authRequest?.loginName ?? authRequest?.loginHint ?? "",
      allowUsernamePassword: policy.allow_username_password,
      passwordlessAllowed,
      registerUrl: allowRegister ? stepUrl("register", authRequest?.id) : undefined,
      idps: idpButtons.map((b) => ({ url: b.url, label: t("idp.continueWith", { provider: b.name }) })),
      passkeyUrl: passwordlessAllowed ? stepUrl("passkey", authRequest?.id) : undefined,
      // the browser offers the passkeys in the login name's autofill (conditional mediation): only once
      // someone in the instance has a passkey, since each offer stores its challenge on the auth request
      passkeyOptions:
        passwordlessAllowed &&
        policy.allow_username_password &&
        authRequest &&
        (await kit.passkeys.has(authRequest.instanceId))
          ? await passkeySignInOptions(kit, request, authRequest)
          : undefined,
    },
    { scripts: passwordlessAllowed && authRequest !== undefined },
  );
}

export function loginNameStep(ui: FastifyInstance, kit: StepKit): void {
  const { login } = kit;
  const { db } = login.deps;
  ui.get<{ Querystring: Query }>("/login/loginname", async (request, reply) => {
    const agent = login.userAgent(request, reply);
    let authRequest: AuthRequest | undefined;
    if (request.query.authRequest) {
      authRequest = await kit.loadRequest(request, reply, agent, request.query.authRequest);
      if (!authRequest) return reply;
    }
    return sendLoginNamePage(kit, request, reply, agent, authRequest);
  });

  /**
   * Whether the page must say that `loginName` is unknown: `ignore_unknown_usernames` is off for the
   * organization of the sign-in, and no user of that organization (of the instance, without one) has it.
   */
  async function unknownName(request: FastifyRequest, orgId: string | undefined, loginName: string) {
    const instanceId = login.instanceId(request);
    if (await login.loginFlag(instanceId, orgId, "ignore_unknown_usernames")) return false;
    try {
      const user = await findUser(db, instanceId, { loginName });
      return orgId !== undefined && user.orgId !== orgId;
    } catch (error) {
      if (error instanceof NotFoundError) return true;
      throw error;
    }
  }

  async function notFound(reply: FastifyReply, authRequest: AuthRequest, loginName: string) {
    await login.authRequests.setUiState(authRequest, {
      page: PAGE,
      error: "error.userNotFound",
      values: { loginName },
    });
    return reply.redirect(stepUrl("loginname", authRequest.id), 303);
  }

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
      if (stored) {
        if (await unknownName(request, stored.orgId, loginName)) {
          const authRequest = await login.authRequests.find(login.instanceId(request), stored.id);
          if (authRequest) return notFound(reply, authRequest, loginName);
        }
        return reply.redirect(stepUrl("password", stored.id), 303);
      }
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
    if (await unknownName(request, authRequest.orgId, loginName))
      return notFound(reply, authRequest, loginName);
    await login.authRequests.setLoginName(authRequest, loginName);
    await login.authRequests.setUiState(authRequest, {});
    return reply.redirect(stepUrl("password", authRequest.id), 303);
  });
}
