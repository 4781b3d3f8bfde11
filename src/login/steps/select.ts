/**
 * GET, POST /ui/login/select: the account picker (the browser's sessions of the request's organization,
 * those of the login_hint first); a chosen account signs in again with its password when it must.
 */
import type { FastifyInstance } from "fastify";
import { sendPage } from "../render.ts";
import { needsPassword, nextStep, sessionsNow } from "../sessions.ts";
import { accountView, type Body, field, type Query, type StepKit, stepUrl } from "./kit.ts";

/** Its template, ../templates/select.eta. */
const TEMPLATE = "steps/select";

export function selectStep(ui: FastifyInstance, kit: StepKit): void {
  const { login } = kit;
  const { db } = login.deps;
  ui.get<{ Querystring: Query }>("/login/select", async (request, reply) => {
    const agent = login.userAgent(request, reply);
    const authRequest = await kit.loadRequest(request, reply, agent, request.query.authRequest);
    if (!authRequest) return reply;
    const sessions = await kit.sessionsFor(request, authRequest);
    if (sessions.length === 0) return reply.redirect(stepUrl("loginname", authRequest.id), 302);
    // the login_hint's sessions first
    const step = nextStep({ ...authRequest, prompt: ["select_account"] }, sessions, {
      allowRegister: false,
      now: new Date(),
    });
    const ordered = step.step === "select" ? step.sessions : sessions;
    const context = await kit.pageFor(request, agent, authRequest);
    const { t } = context.translator;
    return sendPage(reply, context, TEMPLATE, {
      title: t("select.title"),
      accounts: ordered.map((s) => accountView(s, context.branding?.hideLoginNameSuffix)),
      otherAccountUrl: stepUrl("loginname", authRequest.id),
    });
  });

  ui.post("/login/select", async (request, reply) => {
    const agent = await kit.checkForm(request, reply);
    if (!agent) return reply;
    const authRequest = await kit.requestOfForm(request, reply, agent);
    if (!authRequest) return reply;
    const sessionId = field(request.body as Body, "sessionId");
    const session = (await kit.sessionsFor(request, authRequest)).find((s) => s.id === sessionId);
    if (!session) return reply.redirect(stepUrl("select", authRequest.id), 303);
    await login.authRequests.attachSession(authRequest, session.id);
    const next = needsPassword(authRequest, session, await sessionsNow(db, [session]))
      ? "password"
      : "complete";
    return reply.redirect(stepUrl(next, authRequest.id), 303);
  });
}
