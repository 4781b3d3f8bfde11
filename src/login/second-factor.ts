/**
 * The second-factor decisions of a sign-in (docs/factors.md, "Sign-in flow"), pure: given the auth
 * request, the session, the clock and the login policy of the sign-in, whether a second factor must be
 * checked or registered. ./sessions.ts `pendingStep` asks after the password.
 */
import { ACR_MFA } from "../domain/session/amr.ts";
import { signsInAsSecondFactor } from "../domain/session/sign-in-changes.ts";
import type { LoginSettings } from "../domain/settings/login.ts";
import type { FactorType } from "../query/user-factors.ts";
import type { AuthRequest } from "./auth-requests.ts";
import type { LoginSession } from "./sessions.ts";

/** The later of optional instants. */
export const latest = (...values: Array<Date | undefined>): Date | undefined => {
  const dates = values.filter((d): d is Date => d !== undefined);
  return dates.length ? new Date(Math.max(...dates.map((d) => d.getTime()))) : undefined;
};

/** The part of the login policy (src/domain/settings/login.ts) the sign-in decisions read. */
export type SignInPolicy = Pick<
  LoginSettings,
  | "force_mfa"
  | "force_mfa_local_only"
  | "second_factors"
  | "multi_factors"
  | "password_check_lifetime"
  | "second_factor_check_lifetime"
  | "multi_factor_check_lifetime"
  | "mfa_init_skip_lifetime"
>;

/**
 * Whether a check at `at` is recent enough for the request: after the request started when it says
 * `prompt=login`, within `max_age` seconds and within `lifetime` seconds (the policy's) — or during this
 * request (else `max_age=0` could never be met: the hand-off comes a few milliseconds after the check).
 */
export function freshEnough(request: AuthRequest, at: Date, now: Date, lifetime?: number): boolean {
  const checkedDuringRequest = at.getTime() >= request.createdAt.getTime();
  if (checkedDuringRequest) return true;
  if (request.prompt.includes("login")) return false;
  const age = now.getTime() - at.getTime();
  if (request.maxAge !== undefined && age > request.maxAge * 1000) return false;
  if (lifetime !== undefined && age > lifetime * 1000) return false;
  return true;
}

/**
 * The user's factors the policy lets them pass as a second factor, in the order the choice page lists
 * them. Recovery codes are not among them: they stand in for a lost factor, they never make the step
 * appear on their own.
 */
export function allowedSecondFactors(session: LoginSession, policy: SignInPolicy): FactorType[] {
  const owned = new Set(session.factors ?? []);
  return (["totp", "u2f", "passkey", "otp_email", "otp_sms"] as const).filter(
    (t) => owned.has(t) && signsInAsSecondFactor(t, policy),
  );
}

/**
 * Whether the session passed a second factor recently enough: a code (TOTP, e-mail, SMS, recovery)
 * within `second_factor_check_lifetime`, a WebAuthn assertion within it too, or within
 * `multi_factor_check_lifetime` when it verified the user (a passkey is then two factors) — each also
 * meeting `prompt=login` and `max_age` as the password does.
 */
export function secondFactorPassed(
  request: AuthRequest,
  session: LoginSession,
  now: Date,
  policy: SignInPolicy,
): boolean {
  const { checks } = session;
  const codes = [checks.totp, checks.otpEmail, checks.otpSms, checks.recoveryCode];
  if (codes.some((at) => at && freshEnough(request, at, now, policy.second_factor_check_lifetime)))
    return true;
  const webauthn = checks.webauthn;
  if (!webauthn) return false;
  if (checks.webauthnUserVerified && freshEnough(request, webauthn, now, policy.multi_factor_check_lifetime))
    return true;
  // a security key after the password (or a provider): the second of two factors
  const other = latest(checks.password, checks.idp);
  return other !== undefined && freshEnough(request, webauthn, now, policy.second_factor_check_lifetime);
}

/**
 * The second-factor step a session needs, if any (docs/factors.md, "Sign-in flow"):
 *
 * - a sign-in through an identity provider needs none when the policy says `force_mfa_local_only`
 *   (unless the request asks for `acr_values=urn:platform:acr:mfa`);
 * - passed recently enough (`secondFactorPassed`): none;
 * - the user has a factor the policy allows: `mfa` (the choice page);
 * - else forced (`force_mfa`, or `acr_values=urn:platform:acr:mfa`): `mfa-setup`, without "Skip";
 * - else `mfa-setup` with "Skip" when the policy has an `mfa_init_skip_lifetime` and the user did not skip
 *   within it; none otherwise.
 */
export function secondFactorStep(
  request: AuthRequest,
  session: LoginSession,
  now: Date,
  policy: SignInPolicy,
): "mfa" | "mfa-setup" | undefined {
  const acrMfa = request.acrValues.includes(ACR_MFA);
  const { checks } = session;
  const throughProvider = checks.idp !== undefined && checks.password === undefined;
  if (throughProvider && policy.force_mfa_local_only && !acrMfa) return undefined;
  if (secondFactorPassed(request, session, now, policy)) return undefined;
  if (allowedSecondFactors(session, policy).length > 0) return "mfa";
  if (policy.force_mfa || acrMfa) return "mfa-setup";
  if (policy.second_factors.length === 0) return undefined;
  const skipLifetime = policy.mfa_init_skip_lifetime;
  if (skipLifetime <= 0) return undefined;
  const skipped = session.mfaInitSkippedAt;
  return skipped && now.getTime() - skipped.getTime() <= skipLifetime * 1000 ? undefined : "mfa-setup";
}

/** Whether the second-factor registration is a must for this request (no "Skip"). */
export function mfaSetupForced(request: AuthRequest, policy: Pick<SignInPolicy, "force_mfa">): boolean {
  return policy.force_mfa || request.acrValues.includes(ACR_MFA);
}
