/**
 * POST /ui/login/signout: the account page's sign-out, ending every session of the browser.
 * GET /ui/login/signedout: "You are signed out" (or, when other accounts stay, that they do), where
 * end_session sends the browser too (`SIGNED_OUT_URL`). The confirmation an application's sign-out may
 * need is the protocol side's page (../logout.ts).
 */
import type { FastifyInstance } from "fastify";
import { SIGNED_OUT_URL } from "../login.ts";
import type { StepKit } from "./kit.ts";

export function signOutStep(ui: FastifyInstance, kit: StepKit): void {
  const { login } = kit;
  ui.post("/login/signout", async (request, reply) => {
    const agent = await kit.checkForm(request, reply);
    if (!agent) return reply;
    await login.endBrowserSessions(request, reply);
    return reply.redirect(SIGNED_OUT_URL, 303);
  });

  ui.get("/login/signedout", async (request, reply) => {
    // end_session with an id_token_hint ends one person's sessions: the others stay
    const others = (await login.sessionsOfUserAgent(request)).length > 0;
    return kit.sendMessage(request, reply, {
      status: 200,
      title: "signedout.title",
      message: others ? "signedout.others" : "signedout.text",
      alert: false,
      link: others
        ? { url: "/", text: "signedout.toAccount" }
        : { url: "/ui/login/loginname", text: "signedout.signIn" },
    });
  });
}
