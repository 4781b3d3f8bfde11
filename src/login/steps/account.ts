/**
 * GET /: the account page for browsers (the accounts signed in, sign-out), a JSON pointer for API clients.
 * The one step outside /ui: no form parser, no rate limits, the server's own error pages.
 */
import type { FastifyInstance } from "fastify";
import type { Login } from "../login.ts";
import { sendPage } from "../render.ts";
import { csrfToken } from "../user-agent.ts";
import { accountView, stepUrl } from "./kit.ts";

/** Its template, ../templates/account.eta. */
const PAGE = "account";

export function accountStep(app: FastifyInstance, login: Login): void {
  app.get("/", async (request, reply) => {
    reply.header("vary", "Accept, Cookie");
    const accept = String(request.headers.accept ?? "");
    if (!accept.includes("text/html")) {
      return reply.send({
        message: "Platform identity server. Browsers get the account page here.",
        discovery: "/.well-known/openid-configuration",
        docs: "/docs",
        openapi: "/openapi.json",
      });
    }
    const sessions = await login.sessionsOfUserAgent(request);
    if (sessions.length === 0) return reply.redirect(stepUrl("loginname"), 302);
    const agent = login.userAgent(request, reply);
    const context = await login.pageContext(request, { csrf: csrfToken(agent) });
    const { t, dateTime } = context.translator;
    const [current] = sessions;
    return sendPage(reply, context, PAGE, {
      title: t("account.title"),
      current: { ...accountView(current), email: current.email },
      sessions: sessions.map((s) => ({
        ...accountView(s),
        lastSignIn: s.authTime ? t("account.lastSignIn", { time: dateTime(s.authTime) }) : undefined,
      })),
    });
  });
}
