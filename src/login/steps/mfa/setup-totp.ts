/**
 * GET, POST /ui/login/mfa/setup/totp: enrolling an authenticator app during a sign-in (linked from the
 * second-factor setup page). The page shows the QR code (inline SVG) and the secret of a pending
 * registration; a right code activates it and counts as the session's TOTP check, then on to completion.
 * Only a user without a second factor, or a session that passed one, may enrol (`maySignInChange`, ../../sign-in-changes.ts).
 */
import type { FastifyInstance } from "fastify";
import { totpEnrolmentCheck } from "../../../domain/user/factors/totp.ts";
import { sendPage } from "../../render.ts";
import { maySignInChange } from "../../sign-in-changes.ts";
import { accountView, type Body, errorOn, field, type Query, type StepKit, stepUrl } from "../kit.ts";
import {
  checkOnSession,
  groupedSecret,
  masterKeyOf,
  mfaCodeField,
  mfaPage,
  mfaPost,
  mfaUrl,
  passed,
  retry,
  totpEnrolment,
} from "./kit.ts";

const PAGE = "setup-totp";
const TEMPLATE = "steps/mfa/setup-totp";

export function mfaSetupTotpStep(ui: FastifyInstance, kit: StepKit): void {
  const { login } = kit;
  ui.get<{ Querystring: Query }>("/login/mfa/setup/totp", async (request, reply) => {
    const mfa = await mfaPage(kit, request, reply, request.query.authRequest);
    if (!mfa) return reply;
    const { agent, authRequest, session, instanceId } = mfa;
    if (!(await maySignInChange(login, instanceId, session)))
      return reply.redirect(stepUrl("mfa", authRequest.id), 302);
    const enrolment = await totpEnrolment(login, instanceId, session.userId);
    // set up already: check it instead
    if (!enrolment) return reply.redirect(mfaUrl("totp", authRequest.id), 302);
    const context = await kit.pageFor(request, agent, authRequest, session.orgId);
    const { t } = context.translator;
    return sendPage(reply, context, TEMPLATE, {
      title: t("mfaOtp.setupTotpTitle"),
      account: accountView(session, context.branding?.hideLoginNameSuffix),
      error: errorOn(authRequest, PAGE).error,
      qr: enrolment.qr,
      secret: groupedSecret(enrolment.secret),
      codeField: mfaCodeField(t, undefined, "mfaOtp.totpLabel"),
      otherUrl: stepUrl("mfa/setup", authRequest.id),
    });
  });

  ui.post("/login/mfa/setup/totp", async (request, reply) => {
    const mfa = await mfaPost(kit, request, reply);
    if (!mfa) return reply;
    const { authRequest, session, instanceId } = mfa;
    const tooMany = await kit.limitPassword(request, reply, authRequest, session.loginName);
    if (tooMany) return reply;
    if (!(await maySignInChange(login, instanceId, session)))
      return reply.redirect(stepUrl("mfa", authRequest.id), 303);
    const code = field(request.body as Body, "code");
    if (!code) return retry(kit, reply, authRequest, PAGE, "mfaOtp.codeRequired");
    const outcome = await checkOnSession(login, instanceId, session, {
      factors: [totpEnrolmentCheck(masterKeyOf(login), code)],
    });
    if (!outcome.ok) return retry(kit, reply, authRequest, PAGE, outcome.error);
    return passed(kit, request, reply, authRequest);
  });
}
