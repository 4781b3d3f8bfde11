/**
 * GET, POST /ui/login/mfa/setup/u2f: registers a security key for the session's user during the sign-in
 * (the enrolment page links here, and ./webauthn.ts for a user without a key), then goes on to complete.
 * As for the authenticator app, only a user without a second factor, or a session that passed one, may
 * enrol (`maySignInChange`, ../../sign-in-changes.ts): else a password alone could register a key of its own and pass the second-factor
 * step with it. The registration answered a fresh challenge with the new key, so it counts as the
 * session's `webauthn` check (presence only: `hwk`).
 */
import type { FastifyInstance } from "fastify";
import { checkSession, type FactorCheck, sessionEvent } from "../../../domain/session/commands.ts";
import { SessionEvent, type SessionWebAuthnCheckedPayload } from "../../../domain/session/events.ts";
import { maySignInChange } from "../../sign-in-changes.ts";
import { accountView, type Body, errorOn, field, type Query, type StepKit, stepUrl } from "../kit.ts";
import { finishRegistration, sendRegistrationPage } from "../passkey/register.ts";
import { webAuthnSignIn } from "./webauthn.ts";

const SETUP_PAGE = "mfa/setup/u2f";

export function mfaSetupU2fStep(ui: FastifyInstance, kit: StepKit): void {
  const { login } = kit;
  const { eventStore } = login.deps;

  ui.get<{ Querystring: Query }>("/login/mfa/setup/u2f", async (request, reply) => {
    const agent = login.userAgent(request, reply);
    const found = await webAuthnSignIn(kit, request, reply, agent, request.query.authRequest);
    if (!found) return reply;
    const { authRequest, session } = found;
    if (!(await maySignInChange(login, authRequest.instanceId, session)))
      return reply.redirect(stepUrl("mfa", authRequest.id), 302);
    const context = await kit.pageFor(request, agent, authRequest, session.orgId);
    return sendRegistrationPage(kit, request, reply, context, {
      type: "u2f",
      userId: session.userId,
      action: `/ui/login/${SETUP_PAGE}`,
      account: accountView(session, context.branding?.hideLoginNameSuffix),
      cancelUrl: stepUrl("complete", authRequest.id),
      error: errorOn(authRequest, SETUP_PAGE).error,
      name: errorOn(authRequest, SETUP_PAGE).values?.name,
    });
  });

  ui.post("/login/mfa/setup/u2f", async (request, reply) => {
    const agent = await kit.checkForm(request, reply);
    if (!agent) return reply;
    const found = await webAuthnSignIn(
      kit,
      request,
      reply,
      agent,
      field(request.body as Body, "authRequest"),
    );
    if (!found) return reply;
    const { authRequest, session } = found;
    const tooMany = await kit.limitPerIp(request, reply, authRequest);
    if (tooMany) return reply;
    if (!(await maySignInChange(login, authRequest.instanceId, session)))
      return reply.redirect(stepUrl("mfa", authRequest.id), 303);
    const outcome = await finishRegistration(kit, request, session.userId, request.body as Body);
    if (outcome.error) {
      await login.authRequests.setUiState(authRequest, {
        page: SETUP_PAGE,
        error: outcome.error,
        values: { name: outcome.name },
      });
      return reply.redirect(stepUrl(SETUP_PAGE, authRequest.id), 303);
    }
    await checkSession(
      eventStore,
      { instanceId: authRequest.instanceId, creator: session.userId },
      { sessionId: session.id, factors: [registeredKey(field(request.body as Body, "passkey"))] },
      login.policy,
    );
    await login.authRequests.setUiState(authRequest, {});
    return reply.redirect(stepUrl("complete", authRequest.id), 303);
  });
}

/** The security key just registered, as the session's `webauthn` check. */
function registeredKey(passkeyId: string): FactorCheck {
  return {
    factor: "webauthn",
    async check(ctx) {
      const payload: SessionWebAuthnCheckedPayload = {
        passkey_id: passkeyId,
        user_verified: false,
        amr: "hwk",
      };
      return {
        passed: true,
        events: [sessionEvent(ctx.sessionId, ctx.orgId, SessionEvent.webAuthnChecked, { ...payload })],
      };
    },
  };
}
