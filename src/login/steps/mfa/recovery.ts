/**
 * GET, POST /ui/login/mfa/recovery: "Use a recovery code" — one of the user's recovery codes, checked on
 * the sign-in's session (each code once; rate-limited like the password; a wrong code counts towards the
 * lockout), then on to completion.
 */
import type { FastifyInstance } from "fastify";
import { recoveryCodeCheck } from "../../../domain/user/factors/recovery-codes.ts";
import { sendPage } from "../../render.ts";
import { withCodeCheck } from "../../sessions.ts";
import { accountView, type Body, errorOn, field, type Query, type StepKit, stepUrl } from "../kit.ts";
import { checkOnSession, masterKeyOf, mfaCodeField, mfaPage, mfaPost, passed, retry } from "./kit.ts";

const PAGE = "mfa-recovery";
const TEMPLATE = "steps/mfa/recovery";

export function mfaRecoveryStep(ui: FastifyInstance, kit: StepKit): void {
  const { login } = kit;
  ui.get<{ Querystring: Query }>("/login/mfa/recovery", async (request, reply) => {
    const page = await mfaPage(kit, request, reply, request.query.authRequest);
    if (!page) return reply;
    const { agent, authRequest, session } = page;
    const context = await kit.pageFor(request, agent, authRequest, session.orgId);
    const { t } = context.translator;
    return sendPage(reply, context, TEMPLATE, {
      title: t("mfaOtp.recoveryTitle"),
      account: accountView(session, context.branding?.hideLoginNameSuffix),
      error: errorOn(authRequest, PAGE).error,
      codeField: mfaCodeField(t, undefined, "mfaOtp.recoveryLabel"),
      otherUrl: stepUrl("mfa", authRequest.id),
    });
  });

  ui.post("/login/mfa/recovery", async (request, reply) => {
    const page = await mfaPost(kit, request, reply);
    if (!page) return reply;
    const { authRequest, session, instanceId } = page;
    const tooMany = await kit.limitPassword(request, reply, authRequest, session.loginName);
    if (tooMany) return reply;
    const code = field(request.body as Body, "code");
    if (!code) return retry(kit, reply, authRequest, PAGE, "mfaOtp.codeRequired");
    const outcome = await checkOnSession(login, instanceId, session, {
      factors: [recoveryCodeCheck(masterKeyOf(login), code)],
    });
    if (!outcome.ok) return retry(kit, reply, authRequest, PAGE, outcome.error);
    return passed(kit, request, reply, authRequest, withCodeCheck(session, "recoveryCode", outcome.at));
  });
}
