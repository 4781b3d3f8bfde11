/**
 * GET, POST /ui/login/mfa/totp: the code of the user's authenticator app, checked on the sign-in's session
 * (rate-limited like the password; a wrong code counts towards the same lockout), then on to completion.
 */
import type { FastifyInstance } from "fastify";
import { totpCheck } from "../../../domain/user/factors/totp.ts";
import { sendPage } from "../../render.ts";
import { withCodeCheck } from "../../sessions.ts";
import { accountView, type Body, errorOn, field, type Query, type StepKit, stepUrl } from "../kit.ts";
import { checkOnSession, masterKeyOf, mfaCodeField, mfaPage, mfaPost, mfaUrl, passed, retry } from "./kit.ts";

/** The `ui_state.page` of its errors, and its template beside this module. */
const PAGE = "mfa-totp";
const TEMPLATE = "steps/mfa/totp";

export function mfaTotpStep(ui: FastifyInstance, kit: StepKit): void {
  const { login } = kit;
  ui.get<{ Querystring: Query }>("/login/mfa/totp", async (request, reply) => {
    const page = await mfaPage(kit, request, reply, request.query.authRequest);
    if (!page) return reply;
    const { agent, authRequest, session } = page;
    const context = await kit.pageFor(request, agent, authRequest, session.orgId);
    const { t } = context.translator;
    return sendPage(reply, context, TEMPLATE, {
      title: t("mfaOtp.totpTitle"),
      account: accountView(session, context.branding?.hideLoginNameSuffix),
      error: errorOn(authRequest, PAGE).error,
      codeField: mfaCodeField(t, undefined, "mfaOtp.totpLabel"),
      recoveryUrl: session.factors?.includes("recovery_codes")
        ? mfaUrl("recovery", authRequest.id)
        : undefined,
      otherUrl: stepUrl("mfa", authRequest.id),
    });
  });

  ui.post("/login/mfa/totp", async (request, reply) => {
    const page = await mfaPost(kit, request, reply);
    if (!page) return reply;
    const { authRequest, session, instanceId } = page;
    const tooMany = await kit.limitPassword(request, reply, authRequest, session.loginName);
    if (tooMany) return reply;
    const code = field(request.body as Body, "code");
    if (!code) return retry(kit, reply, authRequest, PAGE, "mfaOtp.codeRequired");
    const outcome = await checkOnSession(login, instanceId, session, {
      factors: [totpCheck(masterKeyOf(login), code)],
    });
    if (!outcome.ok) return retry(kit, reply, authRequest, PAGE, outcome.error);
    return passed(kit, request, reply, authRequest, withCodeCheck(session, "totp", outcome.at));
  });
}
