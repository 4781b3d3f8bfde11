/**
 * GET, POST /ui/login/idp/link?intent=…: links the provider's identity to a local account once the person
 * proved its password: the account auto linking proposes, else (`is_manual_linking_allowed`) the one whose
 * login name the person types. Rate-limited like the password page. The password is the first factor: the
 * link is stored only once the sign-in passed every factor the login policy requires of the user (its
 * second factor), when it completes (./pending-links.ts); a sign-in that stops before stores no link.
 */
import type { FastifyInstance } from "fastify";
import { findUser } from "../../../domain/session/commands.ts";
import { NotFoundError } from "../../../errors.ts";
import { type LinkedUser, proposal } from "../../idp/accounts.ts";
import { checkPasswordForSignIn } from "../../password.ts";
import { initials, sendPage } from "../../render.ts";
import { newUserAgent } from "../../user-agent.ts";
import { continueWithSession } from "../complete.ts";
import { type Body, field, type Query, type StepKit, stepUrl } from "../kit.ts";
import { failPage, intentOf, intentUrl } from "./kit.ts";
import { linkable } from "./pending-links.ts";

/** Its template, ../../templates/idp-link.eta, and the `ui_state.page` of its errors. */
const PAGE = "idp-link";
const TEMPLATE = "steps/idp/link";

export function idpLinkStep(ui: FastifyInstance, kit: StepKit): void {
  const { login } = kit;
  const { db } = login.deps;
  ui.get<{ Querystring: Query }>("/login/idp/link", async (request, reply) => {
    const agent = login.userAgent(request, reply);
    const found = await intentOf(kit, request, reply, agent, request.query);
    if (!found) return reply;
    const { intent, authRequest, idp } = found;
    const proposed = await proposal(db, intent.instanceId, idp, intent);
    if (!proposed && !idp.options.isManualLinkingAllowed)
      return failPage(kit, request, reply, 403, "idp.noAccount", authRequest, idp.name);
    const context = await kit.pageFor(request, agent, authRequest);
    const { t } = context.translator;
    const state = authRequest.uiState.page === PAGE ? authRequest.uiState : {};
    return sendPage(reply, context, TEMPLATE, {
      title: t("idp.linkTitle"),
      intro: t(proposed ? "idp.linkProposal" : "idp.linkIntro", {
        provider: idp.name,
        instance: context.instanceName,
      }),
      error: state.error,
      intentId: intent.id,
      account: proposed
        ? {
            sessionId: "",
            displayName: proposed.displayName,
            loginName: proposed.loginName,
            initials: initials(proposed.displayName || proposed.loginName),
          }
        : undefined,
      loginName: state.values?.loginName ?? "",
      registerUrl: idp.options.isManualCreationAllowed
        ? intentUrl("register", authRequest, intent)
        : undefined,
      cancelUrl: stepUrl("loginname", authRequest.id),
    });
  });

  ui.post("/login/idp/link", async (request, reply) => {
    const agent = await kit.checkForm(request, reply);
    if (!agent) return reply;
    const body = request.body as Body;
    const found = await intentOf(kit, request, reply, agent, {
      authRequest: field(body, "authRequest"),
      intent: field(body, "intent"),
    });
    if (!found) return reply;
    const { intent, authRequest, idp } = found;
    const instanceId = intent.instanceId;
    const proposed = await proposal(db, instanceId, idp, intent);
    if (!proposed && !idp.options.isManualLinkingAllowed)
      return reply.redirect(intentUrl("link", authRequest, intent), 303);
    const loginName = proposed?.loginName ?? field(body, "loginName").slice(0, 400);
    const fail = async (error: string) => {
      await login.authRequests.setUiState(authRequest, { page: PAGE, error, values: { loginName } });
      return reply.redirect(intentUrl("link", authRequest, intent), 303);
    };
    if (!loginName) return fail("error.loginNameRequired");
    const tooMany = await kit.limitPassword(request, reply, authRequest, loginName);
    if (tooMany) return reply;
    const password = field(body, "password", { raw: true });
    if (!password) return fail("error.passwordRequired");

    let user: LinkedUser | undefined;
    if (proposed) user = { id: proposed.userId, orgId: intent.orgId };
    else {
      try {
        user = await findUser(db, instanceId, { loginName });
      } catch (error) {
        if (!(error instanceof NotFoundError)) throw error;
      }
      // only users of the organization the provider signs in to
      if (user && user.orgId !== intent.orgId) user = undefined;
    }
    // the same answer for every failure as on the password page (../password.ts)
    const existing = user
      ? (await kit.sessionsFor(request, authRequest)).find((s) => s.userId === user.id)
      : undefined;
    const fresh = newUserAgent();
    const sessionId = await checkPasswordForSignIn(login, {
      instanceId,
      user,
      password,
      sessionId: existing?.id,
      userAgentHash: fresh.hash,
    });
    if (!user || !sessionId) return fail("error.invalidCredentials");
    // signed in: the browser gets a new cookie (no session fixation)
    await login.adoptUserAgent(request, reply, fresh, authRequest);
    if (!(await linkable(db, intent, user.id))) return fail("idp.alreadyLinked");
    // the password is the first factor only: the link waits for what else the policy requires of the user
    // (its second factor), and is stored when the sign-in completes (./pending-links.ts)
    await kit.idps.intents.holdLink(intent, user.id, sessionId);
    await login.authRequests.setUiState(authRequest, {});
    return continueWithSession(kit, request, reply, authRequest, sessionId);
  });
}
