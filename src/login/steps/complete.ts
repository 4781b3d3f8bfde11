/**
 * GET /ui/login/complete: hands the authenticated auth request to the completer, once the password was
 * checked again or changed when the request requires it, and the second factor passed (or registered,
 * or its prompt skipped) when the login policy or the request's acr_values need it (`pendingStep`,
 * ../sessions.ts). No sign-in completes anywhere else without this check (`completeOrContinue`, which the
 * second-factor pages also call after a passed check, saving the browser this page's redirect).
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { AuthRequest } from "../auth-requests.ts";
import { type LoginSession, pendingStep, sessionsNow } from "../sessions.ts";
import { storePendingLinks } from "./idp/pending-links.ts";
import { entryUrl, type Query, type StepKit, stepUrl } from "./kit.ts";
import { secondFactorPage } from "./mfa/choose.ts";

export function completeStep(ui: FastifyInstance, kit: StepKit): void {
  const { login } = kit;
  ui.get<{ Querystring: Query }>("/login/complete", async (request, reply) => {
    const agent = login.userAgent(request, reply);
    const authRequest = await kit.loadRequest(request, reply, agent, request.query.authRequest);
    if (!authRequest) return reply;
    return completeOrContinue(kit, request, reply, authRequest);
  });
}

/**
 * Completes `authRequest` when its session needs nothing more; else redirects to what it needs: the
 * entry without an authenticated session, the password again or a new one, the second factor (its own
 * page when the user has a single way to answer) or its registration.
 */
export async function completeOrContinue(
  kit: StepKit,
  request: FastifyRequest,
  reply: FastifyReply,
  authRequest: AuthRequest,
  options: { attach?: string; session?: LoginSession } = {},
): Promise<FastifyReply> {
  const { login } = kit;
  const status = request.method === "POST" ? 303 : 302;
  if (options.attach) authRequest.sessionId = options.attach;
  // `session`: the request's session as the caller just changed it (a passed check), not read again
  const session =
    options.session?.id === authRequest.sessionId
      ? options.session
      : (await kit.sessionsFor(request, authRequest)).find((s) => s.id === authRequest.sessionId);
  // the session goes on the request (and the page's error off it) unless completing does both
  const attach = async () => {
    if (options.attach)
      await login.authRequests.attachSession(authRequest, options.attach, { clearUiState: true });
  };
  // no authenticated session for it (yet): decide again
  if (!session) {
    await attach();
    return reply.redirect(entryUrl(authRequest.id), status);
  }
  const policy = await login.userLoginPolicy(authRequest.instanceId, session);
  const pending = pendingStep(authRequest, session, await sessionsNow(login.deps.db, [session]), policy);
  if (pending) {
    await attach();
    const page = pending === "mfa" ? secondFactorPage(session, policy) : pending;
    return reply.redirect(stepUrl(page, authRequest.id), status);
  }
  // a link to an identity provider the sign-in proved the password for is stored now, with every factor passed
  await storePendingLinks(kit, request, authRequest, session);
  return kit.complete(request, reply, authRequest, session);
}

/**
 * After a post that created or checked `sessionId` for the sign-in (the password, a passkey): the sign-in
 * goes on with it, completed at once when it needs nothing more, else straight to what it needs (the
 * second factor's page, a new password), without the completion page's redirect in between.
 */
export function continueWithSession(
  kit: StepKit,
  request: FastifyRequest,
  reply: FastifyReply,
  authRequest: AuthRequest,
  sessionId: string,
): Promise<FastifyReply> {
  return completeOrContinue(kit, request, reply, authRequest, { attach: sessionId });
}
