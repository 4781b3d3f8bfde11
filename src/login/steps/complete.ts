/**
 * GET /ui/login/complete: hands the authenticated auth request to the completer, once the password was
 * checked again or changed when the request requires it, and the second factor passed (or registered,
 * or its prompt skipped) when the login policy or the request's acr_values need it (`pendingStep`,
 * ../sessions.ts). No sign-in completes anywhere else without this check (`completeOrContinue`, which the
 * second-factor pages also call after a passed check, saving the browser this page's redirect).
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { AuthRequest } from "../auth-requests.ts";
import { pendingStep, sessionsNow } from "../sessions.ts";
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
): Promise<FastifyReply> {
  const { login } = kit;
  const status = request.method === "POST" ? 303 : 302;
  const session = (await kit.sessionsFor(request, authRequest)).find((s) => s.id === authRequest.sessionId);
  // no authenticated session for it (yet): decide again
  if (!session) return reply.redirect(entryUrl(authRequest.id), status);
  const policy = await login.loginPolicy(authRequest.instanceId, authRequest.orgId ?? session.orgId);
  const pending = pendingStep(authRequest, session, await sessionsNow(login.deps.db, [session]), policy);
  if (pending === "mfa")
    return reply.redirect(stepUrl(secondFactorPage(session, policy), authRequest.id), status);
  if (pending) return reply.redirect(stepUrl(pending, authRequest.id), status);
  return kit.complete(request, reply, authRequest, session);
}
