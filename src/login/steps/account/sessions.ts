/**
 * POST /ui/login/account/signout: signs one account of the browser out (rate-limited per IP), ending its
 * session through the sessions domain (`endBrowserSessions`, the session's user as creator; its tokens end
 * with it). Only a session of this browser's cookie can be named. The account page's "Sign out everywhere
 * on this browser" is ../signout.ts. After the last session the browser goes to "You are signed out".
 */
import type { FastifyInstance } from "fastify";
import { SIGNED_OUT_URL } from "../../login.ts";
import { field, type StepKit } from "../kit.ts";
import { accountPost, redirectWithOutcome } from "./kit.ts";

export function accountSessionsStep(ui: FastifyInstance, kit: StepKit): void {
  const { login } = kit;
  ui.post("/login/account/signout", async (request, reply) => {
    const post = await accountPost(kit, request, reply);
    if (!post) return reply;
    const tooMany = await kit.limitPerIp(request, reply, undefined);
    if (tooMany) return reply;
    const target = field(post.body, "target");
    const ended = await login.endBrowserSessions(request, reply, { sessionIds: [target] });
    const left = await login.accountSessionsOfUserAgent(request);
    if (left.length === 0) return reply.redirect(SIGNED_OUT_URL, 303);
    // the page stays on the chosen account, unless that is the one signed out
    const stay = left.find((s) => s.id === post.account.id) ?? left[0];
    return redirectWithOutcome(kit, request, reply, {
      session: stay.id,
      form: "sessions",
      ...(ended.length ? { notice: "account.sessionSignedOut" } : { error: "account.sessionUnknown" }),
    });
  });
}
