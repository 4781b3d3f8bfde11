/**
 * GET /ui/login/mfa?authRequest=<id>: the second factor of a sign-in that needs one (`pendingStep`,
 * ../../sessions.ts): the user's factors the login policy allows, each linking to its page (TOTP, a code
 * by e-mail or SMS, a security key or passkey), and "Use a recovery code" when the user has recovery
 * codes. With a single way to answer, straight to its page. Each page checks the factor on the session
 * and returns to /ui/login/complete, which decides again.
 */
import type { FastifyInstance } from "fastify";
import type { FactorType } from "../../../query/user-factors.ts";
import { sendPage } from "../../render.ts";
import type { SignInPolicy } from "../../second-factor.ts";
import { allowedSecondFactors, type LoginSession } from "../../sessions.ts";
import { accountView, type Query, type StepKit, stepUrl } from "../kit.ts";
import { signInAt } from "./sign-in.ts";

const TEMPLATE = "steps/mfa/choose";

/** The page answering each kind of factor, and its label's text key. */
const FACTOR_PAGES: Partial<Record<FactorType, { page: string; label: string }>> = {
  totp: { page: "mfa/totp", label: "mfaChoose.totp" },
  u2f: { page: "mfa/webauthn", label: "mfaChoose.webauthn" },
  passkey: { page: "mfa/webauthn", label: "mfaChoose.webauthn" },
  otp_email: { page: "mfa/otp-email", label: "mfaChoose.otpEmail" },
  otp_sms: { page: "mfa/otp-sms", label: "mfaChoose.otpSms" },
};

/** The ways to answer the second factor: each kind's page once, and the recovery codes' page apart. */
function secondFactorChoice(session: LoginSession, policy: SignInPolicy) {
  const options: Array<{ page: string; label: string }> = [];
  for (const type of allowedSecondFactors(session, policy)) {
    const option = FACTOR_PAGES[type];
    if (option && !options.some((o) => o.page === option.page)) options.push(option);
  }
  const recovery = session.factors?.includes("recovery_codes")
    ? { page: "mfa/recovery", label: "mfaChoose.recovery" }
    : undefined;
  return { options, recovery };
}

/**
 * The page a sign-in needing its second factor goes to: the factor's own page when there is a single way
 * to answer (saving the browser the choice's redirect), else the choice.
 */
export function secondFactorPage(session: LoginSession, policy: SignInPolicy): string {
  const { options, recovery } = secondFactorChoice(session, policy);
  return options.length === 1 && !recovery ? options[0].page : "mfa";
}

export function mfaChooseStep(ui: FastifyInstance, kit: StepKit): void {
  const { login } = kit;
  ui.get<{ Querystring: Query }>("/login/mfa", async (request, reply) => {
    const agent = login.userAgent(request, reply);
    const authRequest = await kit.loadRequest(request, reply, agent, request.query.authRequest);
    if (!authRequest) return reply;
    const state = await signInAt(kit, request, reply, authRequest, "mfa", 302);
    if (!state) return reply;
    const { session, policy } = state;
    const { options, recovery } = secondFactorChoice(session, policy);
    if (options.length === 1 && !recovery)
      return reply.redirect(stepUrl(options[0].page, authRequest.id), 302);
    const context = await kit.pageFor(request, agent, authRequest, session.orgId);
    const { t } = context.translator;
    return sendPage(reply, context, TEMPLATE, {
      title: t("mfaChoose.title"),
      account: accountView(session, context.branding?.hideLoginNameSuffix),
      options: options.map((o) => ({ url: stepUrl(o.page, authRequest.id), label: t(o.label) })),
      recovery: recovery && { url: stepUrl(recovery.page, authRequest.id), label: t(recovery.label) },
      otherAccountUrl: stepUrl("loginname", authRequest.id),
    });
  });
}
