/**
 * GET, POST /ui/login/idp/link?intent=…: links the provider's identity to a local account once the person
 * proved its password: the account auto linking proposes, else (`is_manual_linking_allowed`) the one whose
 * login name the person types. Rate-limited like the password page.
 */
import type { FastifyInstance } from "fastify";
import { findUser } from "../../../domain/session/commands.ts";
import { foldUser } from "../../../domain/user/commands.ts";
import { USER } from "../../../domain/user/events.ts";
import { addIdpLinkEvents } from "../../../domain/user/idp-links.ts";
import { AlreadyExistsError, FailedPreconditionError, NotFoundError } from "../../../errors.ts";
import { autoUpdate, type LinkedUser, proposal } from "../../idp/accounts.ts";
import { checkPasswordForSignIn } from "../../password.ts";
import { initials, sendPage } from "../../render.ts";
import { newUserAgent } from "../../user-agent.ts";
import { type Body, field, type Query, type StepKit, stepUrl } from "../kit.ts";
import { failPage, intentOf, intentUrl } from "./kit.ts";

/** Its template, ../../templates/idp-link.eta, and the `ui_state.page` of its errors. */
const PAGE = "idp-link";
const TEMPLATE = "steps/idp/link";

export function idpLinkStep(ui: FastifyInstance, kit: StepKit): void {
  const { login } = kit;
  const { db, eventStore } = login.deps;
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
    if (tooMany) return tooMany;
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
    const actor = { instanceId, creator: user.id };
    const external = intent.external!;
    try {
      await eventStore.push(actor, async (tx) => {
        const current = foldUser(await tx.load(USER, user.id));
        if (!current) throw new NotFoundError("user not found");
        return addIdpLinkEvents(current, {
          idp_id: idp.id,
          external_user_id: external.id,
          external_username: external.username,
        });
      });
    } catch (error) {
      if (error instanceof AlreadyExistsError || error instanceof FailedPreconditionError)
        return fail("idp.alreadyLinked");
      throw error;
    }
    if (idp.options.isAutoUpdate) await autoUpdate(eventStore, instanceId, user.id, external);
    await kit.idps.intents.finish(intent);
    await login.authRequests.attachSession(authRequest, sessionId);
    await login.authRequests.setUiState(authRequest, {});
    return reply.redirect(stepUrl("complete", authRequest.id), 303);
  });
}
