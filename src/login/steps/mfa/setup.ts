/**
 * GET /ui/login/mfa/setup?authRequest=<id>: the prompt to register a second factor (`pendingStep`,
 * ../../sessions.ts): the kinds the login policy allows, each linking to its registration page. When the
 * policy forces MFA (or the request asks for `acr_values=urn:platform:acr:mfa`) there is no way around it;
 * otherwise "Skip" (POST /ui/login/mfa/setup/skip) records `user.mfa.init.skipped` and the prompt stays
 * away for the policy's `mfa_init_skip_lifetime`.
 */
import type { FastifyInstance } from "fastify";
import type { SecondFactorType } from "../../../domain/settings/login.ts";
import { foldUser, skipMfaInitEvent } from "../../../domain/user/commands.ts";
import { USER } from "../../../domain/user/events.ts";
import { NotFoundError } from "../../../errors.ts";
import { sendPage } from "../../render.ts";
import { mfaSetupForced } from "../../sessions.ts";
import { accountView, type Query, type StepKit, stepUrl } from "../kit.ts";
import { signInAt } from "./sign-in.ts";

const TEMPLATE = "steps/mfa/setup";

/** The registration page of each kind the policy may allow, and its label's text key. */
const SETUP_PAGES: Record<SecondFactorType, { page: string; label: string }> = {
  SECOND_FACTOR_TYPE_TOTP: { page: "mfa/setup/totp", label: "mfaSetup.totp" },
  SECOND_FACTOR_TYPE_U2F: { page: "mfa/setup/u2f", label: "mfaSetup.u2f" },
  SECOND_FACTOR_TYPE_OTP_EMAIL: { page: "mfa/setup/otp-email", label: "mfaSetup.otpEmail" },
  SECOND_FACTOR_TYPE_OTP_SMS: { page: "mfa/setup/otp-sms", label: "mfaSetup.otpSms" },
};

export function mfaSetupStep(ui: FastifyInstance, kit: StepKit): void {
  const { login } = kit;
  ui.get<{ Querystring: Query }>("/login/mfa/setup", async (request, reply) => {
    const agent = login.userAgent(request, reply);
    const authRequest = await kit.loadRequest(request, reply, agent, request.query.authRequest);
    if (!authRequest) return reply;
    const state = await signInAt(kit, request, reply, authRequest, "mfa-setup", 302);
    if (!state) return reply;
    const { session, policy } = state;
    const forced = mfaSetupForced(authRequest, policy);
    const context = await kit.pageFor(request, agent, authRequest, session.orgId);
    const { t } = context.translator;
    return sendPage(reply, context, TEMPLATE, {
      title: t("mfaSetup.title"),
      intro: t(forced ? "mfaSetup.introForced" : "mfaSetup.intro"),
      account: accountView(session, context.branding?.hideLoginNameSuffix),
      options: policy.second_factors.map((type) => ({
        url: stepUrl(SETUP_PAGES[type].page, authRequest.id),
        label: t(SETUP_PAGES[type].label),
      })),
      skip: !forced,
      otherAccountUrl: stepUrl("loginname", authRequest.id),
    });
  });

  ui.post("/login/mfa/setup/skip", async (request, reply) => {
    const agent = await kit.checkForm(request, reply);
    if (!agent) return reply;
    const authRequest = await kit.requestOfForm(request, reply, agent);
    if (!authRequest) return reply;
    const state = await signInAt(kit, request, reply, authRequest, "mfa-setup", 303);
    if (!state) return reply;
    // forced: no way around the registration
    if (mfaSetupForced(authRequest, state.policy))
      return reply.redirect(stepUrl("mfa/setup", authRequest.id), 303);
    const { userId } = state.session;
    await login.deps.eventStore.push({ instanceId: authRequest.instanceId, creator: userId }, async (tx) => {
      const user = foldUser(await tx.load(USER, userId));
      if (!user) throw new NotFoundError("user not found");
      return [skipMfaInitEvent(user)];
    });
    return reply.redirect(stepUrl("complete", authRequest.id), 303);
  });
}
