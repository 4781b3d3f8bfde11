/**
 * GET, POST /ui/login/mfa/setup/otp-email and /ui/login/mfa/setup/otp-sms: enabling codes by e-mail or SMS
 * during a sign-in (linked from the second-factor setup page). The page names the verified address or
 * number; enabling goes on to the code page (./otp.ts), whose code then counts as the session's check.
 * Only a user without a second factor, or a session that passed one, may enrol (`maySignInChange`, ../../sign-in-changes.ts).
 */
import type { FastifyInstance } from "fastify";
import { foldUser } from "../../../domain/user/commands.ts";
import { USER } from "../../../domain/user/events.ts";
import { type OtpChannel, readContact } from "../../../domain/user/factors/otp.ts";
import { AlreadyExistsError, FailedPreconditionError, NotFoundError } from "../../../errors.ts";
import { UserFactorCommands } from "../../../services/users/factor-commands.ts";
import { sendPage } from "../../render.ts";
import { maySignInChange } from "../../sign-in-changes.ts";
import { accountView, errorOn, type Query, type StepKit, stepUrl } from "../kit.ts";
import { masterKeyOf, mfaPage, mfaPost, mfaUrl, retry } from "./kit.ts";

const TEMPLATE = "steps/mfa/setup-otp";

function setupOtpStep(type: OtpChannel, path: "otp-email" | "otp-sms") {
  const page = `setup-${path}`;
  const email = type === "otp_email";
  return (ui: FastifyInstance, kit: StepKit): void => {
    const { login } = kit;
    ui.get<{ Querystring: Query }>(`/login/mfa/setup/${path}`, async (request, reply) => {
      const mfa = await mfaPage(kit, request, reply, request.query.authRequest);
      if (!mfa) return reply;
      const { agent, authRequest, session, instanceId } = mfa;
      if (!(await maySignInChange(login, instanceId, session)))
        return reply.redirect(stepUrl("mfa", authRequest.id), 302);
      const contact = await readContact(login.deps.db, instanceId, session.userId);
      const target = email ? contact.emailVerified && contact.email : contact.phoneVerified && contact.phone;
      const context = await kit.pageFor(request, agent, authRequest, session.orgId);
      const { t } = context.translator;
      return sendPage(reply, context, TEMPLATE, {
        title: t(email ? "mfaOtp.setupEmailTitle" : "mfaOtp.setupSmsTitle"),
        account: accountView(session, context.branding?.hideLoginNameSuffix),
        action: `/ui/login/mfa/setup/${path}`,
        intro: target
          ? t(email ? "mfaOtp.setupEmailIntro" : "mfaOtp.setupSmsIntro", { target })
          : t(email ? "mfaOtp.noVerifiedEmail" : "mfaOtp.noVerifiedPhone"),
        canEnable: Boolean(target),
        error: errorOn(authRequest, page).error,
        otherUrl: stepUrl("mfa/setup", authRequest.id),
      });
    });

    ui.post(`/login/mfa/setup/${path}`, async (request, reply) => {
      const mfa = await mfaPost(kit, request, reply);
      if (!mfa) return reply;
      const { authRequest, session, instanceId } = mfa;
      const tooMany = await kit.limitPerIp(request, reply, authRequest);
      if (tooMany) return reply;
      if (!(await maySignInChange(login, instanceId, session)))
        return reply.redirect(stepUrl("mfa", authRequest.id), 303);
      const factors = new UserFactorCommands({ masterKey: masterKeyOf(login) });
      try {
        await login.deps.eventStore.push({ instanceId, creator: session.userId }, async (tx) => {
          const user = foldUser(await tx.load(USER, session.userId));
          if (!user) throw new NotFoundError("user not found");
          return factors.addOtp(tx, instanceId, user, type);
        });
      } catch (error) {
        // enabled already: the code page follows all the same
        if (error instanceof FailedPreconditionError)
          return retry(
            kit,
            reply,
            authRequest,
            page,
            email ? "mfaOtp.noVerifiedEmail" : "mfaOtp.noVerifiedPhone",
          );
        if (!(error instanceof AlreadyExistsError)) throw error;
      }
      await login.authRequests.setUiState(authRequest, {});
      return reply.redirect(mfaUrl(path, authRequest.id), 303);
    });
  };
}

export const mfaSetupOtpEmailStep = setupOtpStep("otp_email", "otp-email");
export const mfaSetupOtpSmsStep = setupOtpStep("otp_sms", "otp-sms");
