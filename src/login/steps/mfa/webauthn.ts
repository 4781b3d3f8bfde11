/**
 * GET, POST /ui/login/mfa/webauthn: a security key (or passkey) as the second factor of the auth request's
 * session (a user without one is sent to register one first, ./setup-u2f.ts). The page makes the session's
 * `webauthn` challenge (the user's active credentials, user verification discouraged: presence is enough
 * after the password); a passed assertion checks the session's `webauthn` factor and goes on to complete.
 * Rate-limited per IP.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { checkSession } from "../../../domain/session/commands.ts";
import {
  activeCredentials,
  webAuthnChallenge,
  webAuthnCheck,
} from "../../../domain/user/factors/webauthn.ts";
import { PlatformError } from "../../../errors.ts";
import type { AuthRequest } from "../../auth-requests.ts";
import { sendPage } from "../../render.ts";
import type { LoginSession } from "../../sessions.ts";
import type { UserAgent } from "../../user-agent.ts";
import { loginRelyingParty, postedCredential } from "../../webauthn.ts";
import {
  accountView,
  type Body,
  entryUrl,
  errorOn,
  field,
  type Query,
  type StepKit,
  stepUrl,
} from "../kit.ts";

const PAGE = "mfa/webauthn";
const SETUP_PAGE = "mfa/setup/u2f";

export function mfaWebAuthnStep(ui: FastifyInstance, kit: StepKit): void {
  const { login } = kit;
  const { eventStore } = login.deps;

  ui.get<{ Querystring: Query }>("/login/mfa/webauthn", async (request, reply) => {
    const agent = login.userAgent(request, reply);
    const found = await webAuthnSignIn(kit, request, reply, agent, request.query.authRequest);
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
      "steps/mfa/webauthn",
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
}

/**
 * The auth request of a security-key page (`id`) and its session (the sign-in so far); else the answer
 * sent (no session: back to the entry).
 */
export async function webAuthnSignIn(
  kit: StepKit,
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
