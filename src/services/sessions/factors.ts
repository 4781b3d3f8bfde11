/**
 * The second factors of the sessions API's requests: the request's checks as the session commands'
 * `FactorCheck`s, its challenges as `ChallengeMaker`s (src/domain/session/factors.ts; the WebAuthn
 * challenge, which needs the request's relying party, in ./webauthn.ts), and the answers of the challenges
 * made for the response. One entry per factor; a new factor adds its own lines here.
 */
import { create } from "@bufbuild/protobuf";
import type { ChallengeMaker, FactorCheck } from "../../domain/session/commands.ts";
import type { ChallengeType } from "../../domain/session/events.ts";
import { otpChallenge, otpCheck } from "../../domain/user/factors/otp.ts";
import { recoveryCodeCheck } from "../../domain/user/factors/recovery-codes.ts";
import { totpCheck } from "../../domain/user/factors/totp.ts";
import {
  type Challenges,
  ChallengesSchema,
  type CreateSessionChecks,
  type RequestChallenges,
  type SessionChecks,
} from "../../gen/platform/resources/session/v3alpha/session_pb.ts";
import type { ServiceDeps } from "../deps.ts";
import { webAuthnAnswer, webAuthnCheckOf } from "./webauthn.ts";

type FactorDeps = Pick<ServiceDeps, "masterKey" | "messages">;

/** The second-factor checks of a create's or patch's `checks`, in the order they run. */
export function factorChecksOf(
  deps: FactorDeps,
  checks: CreateSessionChecks | SessionChecks | undefined,
): FactorCheck[] {
  if (!checks) return [];
  const out: FactorCheck[] = [];
  if (checks.totp) out.push(totpCheck(deps.masterKey, checks.totp.code));
  if ("otpEmail" in checks && checks.otpEmail)
    out.push(otpCheck(deps.masterKey, "otp_email", checks.otpEmail.code));
  if ("otpSms" in checks && checks.otpSms) out.push(otpCheck(deps.masterKey, "otp_sms", checks.otpSms.code));
  if ("webauthn" in checks && checks.webauthn) out.push(...webAuthnCheckOf(checks.webauthn));
  if (checks.recoveryCode) out.push(recoveryCodeCheck(deps.masterKey, checks.recoveryCode.code));
  return out;
}

/** The challenges a create or patch asks for. */
export function challengesOf(deps: FactorDeps, challenges: RequestChallenges | undefined): ChallengeMaker[] {
  if (!challenges) return [];
  const out: ChallengeMaker[] = [];
  if (challenges.otpEmail) out.push(otpChallenge(deps, "otp_email", challenges.otpEmail.returnCode));
  if (challenges.otpSms) out.push(otpChallenge(deps, "otp_sms", challenges.otpSms.returnCode));
  return out;
}

/** The response's `challenges`; undefined when none was asked for. */
export function challengesAnswer(answers: Partial<Record<ChallengeType, unknown>>): Challenges | undefined {
  if (Object.keys(answers).length === 0) return undefined;
  return create(ChallengesSchema, {
    otpEmail: typeof answers.otp_email === "string" ? answers.otp_email : "",
    otpSms: typeof answers.otp_sms === "string" ? answers.otp_sms : "",
    webauthn: webAuthnAnswer(answers.webauthn),
  });
}
