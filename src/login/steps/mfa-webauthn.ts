/**
 * GET, POST /ui/login/mfa/webauthn: a security key (or passkey) as the second factor of the auth request's
 * session (a user without one is sent to register one first). The page makes the session's `webauthn` challenge (the user's active credentials, user
 * verification discouraged: presence is enough after the password); a passed assertion checks the session's
 * `webauthn` factor and goes on to complete. Rate-limited per IP.
 *
 * GET, POST /ui/login/mfa/setup/u2f: registers a security key for the session's user during the sign-in
 * (the enrolment page links here), then goes on to complete. As for the authenticator app, only a user
 * without a second factor, or a session that passed one, may enrol (`mayEnrol`): else a password alone
 * could register a key of its own and pass the second-factor step with it. The registration answered a
 * fresh challenge with the new key, so it counts as the session's `webauthn` check (presence only: `hwk`).
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { checkSession, type FactorCheck, sessionEvent } from "../../domain/session/commands.ts";
import { SessionEvent, type SessionWebAuthnCheckedPayload } from "../../domain/session/events.ts";
import { activeCredentials, webAuthnChallenge, webAuthnCheck } from "../../domain/user/factors/webauthn.ts";
import { PlatformError } from "../../errors.ts";
import type { AuthRequest } from "../auth-requests.ts";
import { sendPage } from "../render.ts";
import type { LoginSession } from "../sessions.ts";
import type { UserAgent } from "../user-agent.ts";
import { loginRelyingParty, postedCredential } from "../webauthn.ts";
import {
  accountView,
  type Body,
  entryUrl,
  errorOn,
  field,
  type Query,
  type StepKit,
  stepUrl,
} from "./kit.ts";
import { mayEnrol } from "./mfa/kit.ts";
import { finishRegistration, sendRegistrationPage } from "./passkey-register.ts";

const PAGE = "mfa/webauthn";
const SETUP_PAGE = "mfa/setup/u2f";

export function mfaWebAuthnStep(ui: FastifyInstance, kit: StepKit): void {
  const { login } = kit;
  const { eventStore } = login.deps;

  /** The auth request of the page and its session (the sign-in so far); else the answer sent. */
  async function signIn(
    request: FastifyRequest,
    reply: FastifyReply,
    agent: UserAgent,
    id: string | undefined,
  ): Promise<{ authRequest: AuthRequest; session: LoginSession } | undefined> {
    const authRequest = await kit.loadRequest(request, reply, agent, id);
    if (!authRequest) return undefined;
    const session = authRequest.sessionId
      ? (await kit.sessionsFor(request, authRequest)).find((s) => s.id === authRequest.sessionId)
      : undefined;
    if (!session) {
      reply.redirect(entryUrl(authRequest.id), request.method === "POST" ? 303 : 302);
      return undefined;
    }
    return { authRequest, session };
  }

  ui.get<{ Querystring: Query }>("/login/mfa/webauthn", async (request, reply) => {
    const agent = login.userAgent(request, reply);
    const found = await signIn(request, reply, agent, request.query.authRequest);
    if (!found) return reply;
    const { authRequest, session } = found;
    // no key yet: register one first
    if ((await activeCredentials(login.deps.db, authRequest.instanceId, session.userId)).length === 0)
      return reply.redirect(stepUrl(SETUP_PAGE, authRequest.id), 302);
    const rp = await loginRelyingParty(login, request);
    const made = await checkSession(
      eventStore,
      { instanceId: authRequest.instanceId, creator: session.userId },
      { sessionId: session.id, challenges: [webAuthnChallenge({ rp, userVerification: "discouraged" })] },
      login.policy,
    );
    const context = await kit.pageFor(request, agent, authRequest, session.orgId);
    const { t } = context.translator;
    return sendPage(
      reply,
      context,
      "steps/mfa-webauthn",
      {
        title: t("mfaWebauthn.title"),
        account: accountView(session, context.branding?.hideLoginNameSuffix),
        error: errorOn(authRequest, PAGE).error,
        options: JSON.stringify(made.challenges.webauthn),
      },
      { scripts: true },
    );
  });

  ui.post("/login/mfa/webauthn", async (request, reply) => {
    const agent = await kit.checkForm(request, reply);
    if (!agent) return reply;
    const found = await signIn(request, reply, agent, field(request.body as Body, "authRequest"));
    if (!found) return reply;
    const { authRequest, session } = found;
    const tooMany = await kit.limitPerIp(request, reply, authRequest);
    if (tooMany) return tooMany;
    const fail = async () => {
      await login.authRequests.setUiState(authRequest, { page: PAGE, error: "error.securityKeyFailed" });
      return reply.redirect(stepUrl(PAGE, authRequest.id), 303);
    };
    const response = postedCredential(request.body as Body);
    if (!response) return fail();
    try {
      await checkSession(
        eventStore,
        { instanceId: authRequest.instanceId, creator: session.userId },
        { sessionId: session.id, factors: [webAuthnCheck(response)] },
        login.policy,
      );
    } catch (error) {
      if (error instanceof PlatformError && error.httpStatus < 500) return fail();
      throw error;
    }
    await login.authRequests.setUiState(authRequest, {});
    return reply.redirect(stepUrl("complete", authRequest.id), 303);
  });

  ui.get<{ Querystring: Query }>("/login/mfa/setup/u2f", async (request, reply) => {
    const agent = login.userAgent(request, reply);
    const found = await signIn(request, reply, agent, request.query.authRequest);
    if (!found) return reply;
    const { authRequest, session } = found;
    if (!(await mayEnrol(login, authRequest.instanceId, session)))
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
    const found = await signIn(request, reply, agent, field(request.body as Body, "authRequest"));
    if (!found) return reply;
    const { authRequest, session } = found;
    const tooMany = await kit.limitPerIp(request, reply, authRequest);
    if (tooMany) return tooMany;
    if (!(await mayEnrol(login, authRequest.instanceId, session)))
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
