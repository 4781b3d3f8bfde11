/**
 * The one-time-password pages of the second-factor step (TOTP, codes by e-mail and SMS, recovery codes),
 * registered together by ../index.ts:
 *
 *   GET|POST /ui/login/mfa/totp              the authenticator app's code (./totp.ts)
 *   GET|POST /ui/login/mfa/otp-email         a code by e-mail, sent on GET; /resend: a new one (./otp.ts)
 *   GET|POST /ui/login/mfa/otp-sms           a code by SMS, the same
 *   GET|POST /ui/login/mfa/recovery          "Use a recovery code" (./recovery.ts)
 *   GET|POST /ui/login/mfa/setup/totp        enrol an authenticator app: QR code, secret, code (./setup-totp.ts)
 *   GET|POST /ui/login/mfa/setup/otp-email   enable codes by e-mail, then the code page (./setup-otp.ts)
 *   GET|POST /ui/login/mfa/setup/otp-sms     enable codes by SMS, the same
 *
 * Each takes `?authRequest=` (the form its hidden field), acts on the sign-in's session and answers a
 * passed check with 303 to /ui/login/complete.
 */
import type { FastifyInstance } from "fastify";
import type { StepKit } from "../kit.ts";
import { mfaOtpEmailStep, mfaOtpSmsStep } from "./otp.ts";
import { mfaRecoveryStep } from "./recovery.ts";
import { mfaSetupOtpEmailStep, mfaSetupOtpSmsStep } from "./setup-otp.ts";
import { mfaSetupTotpStep } from "./setup-totp.ts";
import { mfaTotpStep } from "./totp.ts";

export const OTP_STEPS: ReadonlyArray<(ui: FastifyInstance, kit: StepKit) => void> = [
  mfaTotpStep,
  mfaOtpEmailStep,
  mfaOtpSmsStep,
  mfaRecoveryStep,
  mfaSetupTotpStep,
  mfaSetupOtpEmailStep,
  mfaSetupOtpSmsStep,
];
