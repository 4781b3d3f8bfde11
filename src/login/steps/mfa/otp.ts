/**
 * One-time codes by e-mail and SMS on the sign-in's session:
 *
 *   GET  /ui/login/mfa/otp-email?authRequest=<id>   sends a code (an `otp_email` challenge of the session)
 *   POST /ui/login/mfa/otp-email                    unless one is open, and asks for it; checks it (rate-
 *   POST /ui/login/mfa/otp-email/resend             limited like the password); "Send a new code" (per IP)
 *   (the same under /ui/login/mfa/otp-sms)
 *
 * The code is the sessions API's challenge: six digits, valid 5 minutes, five wrong codes invalidate it;
 * each wrong code counts towards the factor's lockout. Sends are bounded per user and recipient like the
 * API's (the page then says when a new code may be asked for) and, here, per client IP (a 429 page).
 */
import type { FastifyInstance, FastifyReply } from "fastify";
import { getSessionState } from "../../../domain/session/commands.ts";
import {
  OTP_CODE_TTL_SECONDS,
  type OtpChannel,
  otpChallenge,
  otpCheck,
} from "../../../domain/user/factors/otp.ts";
import { labeledDelivery } from "../../../notifications/delivery.ts";
import type { AuthRequest } from "../../auth-requests.ts";
import { sendPage } from "../../render.ts";
import { withCodeCheck } from "../../sessions.ts";
import { accountView, type Body, errorOn, field, type Query, type StepKit, stepUrl } from "../kit.ts";
import {
  checkOnSession,
  type MfaRequest,
  masterKeyOf,
  mfaCodeField,
  mfaPage,
  mfaPost,
  mfaUrl,
  passed,
} from "./kit.ts";

const TEMPLATE = "steps/mfa/otp";

interface Channel {
  type: OtpChannel;
  /** `/ui/login/mfa/<path>` and the `ui_state.page` `mfa-<path>`. */
  path: "otp-email" | "otp-sms";
  title: string;
  intro: string;
}

const CHANNELS: Record<OtpChannel, Channel> = {
  otp_email: { type: "otp_email", path: "otp-email", title: "mfaOtp.emailTitle", intro: "mfaOtp.emailIntro" },
  otp_sms: { type: "otp_sms", path: "otp-sms", title: "mfaOtp.smsTitle", intro: "mfaOtp.smsIntro" },
};

function otpStep(channel: Channel) {
  const page = `mfa-${channel.path}`;
  const route = `/login/mfa/${channel.path}`;
  return (ui: FastifyInstance, kit: StepKit): void => {
    const { login } = kit;

    /**
     * A new code for the session: sent through the notification outbox, labeled as the sign-in says
     * (`Login.messageLabelOrg`).
     */
    const send = async (mfa: MfaRequest) => {
      const messages = labeledDelivery(login.deps.messages, await login.messageLabelOrg(mfa.authRequest));
      return checkOnSession(login, mfa.instanceId, mfa.session, {
        challenges: [otpChallenge({ masterKey: masterKeyOf(login), messages }, channel.type, false)],
      });
    };

    /** Back to the page with a notice or an error. */
    const back = async (
      reply: FastifyReply,
      authRequest: AuthRequest,
      state: { error?: string; notice?: string; values?: Record<string, string> },
    ) => {
      const values = { ...state.values, ...(state.notice ? { notice: state.notice } : {}) };
      await login.authRequests.setUiState(authRequest, {
        page,
        error: state.error,
        values: Object.keys(values).length ? values : undefined,
      });
      return reply.redirect(mfaUrl(channel.path, authRequest.id), 303);
    };

    ui.get<{ Querystring: Query }>(route, async (request, reply) => {
      const mfa = await mfaPage(kit, request, reply, request.query.authRequest);
      if (!mfa) return reply;
      const { agent, authRequest, session, instanceId } = mfa;
      let state = errorOn(authRequest, page);
      // a code is sent when the page is first shown, not again on every visit while one is open
      const open = (await getSessionState(login.deps.eventStore, instanceId, session.id)).challenges[
        channel.type
      ];
      const expired = !open || open.createdAt.getTime() + OTP_CODE_TTL_SECONDS * 1000 <= Date.now();
      if (expired && !state.error) {
        const tooMany = await kit.limitCodesPerIp(request, reply, authRequest);
        if (tooMany) return reply;
        const sent = await send(mfa);
        state = sent.ok ? { values: { notice: "sent" } } : { error: sent.error, values: sent.values };
      }
      const context = await kit.pageFor(request, agent, authRequest, session.orgId);
      const { t } = context.translator;
      return sendPage(reply, context, TEMPLATE, {
        title: t(channel.title),
        intro: t(channel.intro),
        action: `/ui/login/mfa/${channel.path}`,
        account: accountView(session, context.branding?.hideLoginNameSuffix),
        error: state.error,
        errorValues: state.values?.seconds ? { seconds: Number(state.values.seconds) } : undefined,
        notice: state.values?.notice
          ? t(state.values.notice === "resent" ? "mfaOtp.codeResent" : "mfaOtp.codeSent")
          : undefined,
        codeField: mfaCodeField(t, undefined, "mfaOtp.codeLabel"),
        recoveryUrl: session.factors?.includes("recovery_codes")
          ? mfaUrl("recovery", authRequest.id)
          : undefined,
        otherUrl: stepUrl("mfa", authRequest.id),
      });
    });

    ui.post(route, async (request, reply) => {
      const mfa = await mfaPost(kit, request, reply);
      if (!mfa) return reply;
      const { authRequest, session, instanceId } = mfa;
      const tooMany = await kit.limitPassword(request, reply, authRequest, session.loginName);
      if (tooMany) return reply;
      const code = field(request.body as Body, "code");
      if (!code) return back(reply, authRequest, { error: "mfaOtp.codeRequired" });
      const outcome = await checkOnSession(login, instanceId, session, {
        factors: [otpCheck(masterKeyOf(login), channel.type, code)],
      });
      if (!outcome.ok) return back(reply, authRequest, { error: outcome.error });
      const factor = channel.type === "otp_email" ? "otpEmail" : "otpSms";
      return passed(kit, request, reply, authRequest, withCodeCheck(session, factor, outcome.at));
    });

    ui.post(`${route}/resend`, async (request, reply) => {
      const mfa = await mfaPost(kit, request, reply);
      if (!mfa) return reply;
      const tooMany =
        (await kit.limitPerIp(request, reply, mfa.authRequest)) ||
        (await kit.limitCodesPerIp(request, reply, mfa.authRequest));
      if (tooMany) return reply;
      const sent = await send(mfa);
      return back(
        reply,
        mfa.authRequest,
        sent.ok ? { notice: "resent" } : { error: sent.error, values: sent.values },
      );
    });
  };
}

export const mfaOtpEmailStep = otpStep(CHANNELS.otp_email);
export const mfaOtpSmsStep = otpStep(CHANNELS.otp_sms);
