/**
 * GET /ui/login?authRequest=<id>: the entry from the authorization endpoint; decides the next step from the
 * browser's sessions (`nextStep`, ../sessions.ts): prompt=none completes or fails at once, a scope
 * `urn:platform:iam:org:idp:id:<id>` goes straight to that provider unless a session can be used as it is.
 * The login-name page, the next step of every browser without a session, is shown here (no redirect).
 */
import type { FastifyInstance } from "fastify";
import { requestedIdpOf, startUrl } from "../idp/login-idps.ts";
import { nextStep, sessionsNow } from "../sessions.ts";
import { type Query, type StepKit, stepUrl } from "./kit.ts";
import { sendLoginNamePage } from "./loginname.ts";

export function entryStep(ui: FastifyInstance, kit: StepKit): void {
  const { login } = kit;
  const { db } = login.deps;
  ui.get<{ Querystring: Query }>("/login", async (request, reply) => {
    const id = request.query.authRequest;
    if (!id) return reply.redirect(stepUrl("loginname"), 302);
    const agent = login.userAgent(request, reply);
    const authRequest = await kit.loadRequest(request, reply, agent, id);
    if (!authRequest) return reply;
    const sessions = await login.sessionsOfUserAgent(request);
    const instanceId = login.instanceId(request);
    if (authRequest.prompt.includes("none")) {
      const selection = await login.selectSessionFor(request, authRequest);
      if (selection.result === "session") return kit.complete(request, reply, authRequest, selection.session);
      const response = await login.completer.fail({ authRequest, error: selection.result, request });
      return login.sendClientResponse(request, reply, response, authRequest);
    }
    const step = nextStep(authRequest, sessions, {
      allowRegister: await login.allowRegister(instanceId, authRequest.orgId),
      now: sessions.length ? await sessionsNow(db, sessions) : new Date(),
      policyOf: await login.policiesFor(instanceId, sessions),
    });
    // urn:platform:iam:org:idp:id:<id>: straight to that provider unless a session can be used as it is
    const requestedIdp = requestedIdpOf(authRequest.scope);
    if (requestedIdp && step.step !== "complete" && step.step !== "register")
      return reply.redirect(startUrl(requestedIdp, authRequest.id), 302);
    switch (step.step) {
      case "complete":
        return kit.complete(request, reply, authRequest, step.session);
      case "password":
      case "password-change":
      case "mfa":
      case "mfa-setup":
        await login.authRequests.attachSession(authRequest, step.session.id);
        return reply.redirect(stepUrl(step.step, authRequest.id), 302);
      case "loginname":
        // the page itself, saving the browser a redirect (its form posts to /ui/login/loginname)
        return sendLoginNamePage(kit, request, reply, agent, authRequest);
      default:
        return reply.redirect(stepUrl(step.step, authRequest.id), 302);
    }
  });
}
