/**
 * GET /ui/login/complete: hands the authenticated auth request to the completer, once the password was
 * checked again or changed when the request requires it, and the second factor passed (or registered,
 * or its prompt skipped) when the login policy or the request's acr_values need it (`pendingStep`,
 * ../sessions.ts). No sign-in completes anywhere else without this check.
 */
import type { FastifyInstance } from "fastify";
import { pendingStep, sessionsNow } from "../sessions.ts";
import { entryUrl, type Query, type StepKit, stepUrl } from "./kit.ts";
import { secondFactorPage } from "./mfa/choose.ts";

export function completeStep(ui: FastifyInstance, kit: StepKit): void {
  const { login } = kit;
  const { db } = login.deps;
  ui.get<{ Querystring: Query }>("/login/complete", async (request, reply) => {
    const agent = login.userAgent(request, reply);
    const authRequest = await kit.loadRequest(request, reply, agent, request.query.authRequest);
    if (!authRequest) return reply;
    const session = (await kit.sessionsFor(request, authRequest)).find((s) => s.id === authRequest.sessionId);
    // no authenticated session for it (yet): decide again
    if (!session) return reply.redirect(entryUrl(authRequest.id), 302);
    // the password again, or a new one, before any sign-in completes
    const policy = await login.loginPolicy(authRequest.instanceId, authRequest.orgId ?? session.orgId);
    const pending = pendingStep(authRequest, session, await sessionsNow(db, [session]), policy);
    if (pending === "mfa")
      return reply.redirect(stepUrl(secondFactorPage(session, policy), authRequest.id), 302);
    if (pending) return reply.redirect(stepUrl(pending, authRequest.id), 302);
    return kit.complete(request, reply, authRequest, session);
  });
}
