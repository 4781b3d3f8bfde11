/**
 * The rule for changes to how an account signs in (docs/factors.md "Changes to how an account signs in"),
 * pure: linking an identity provider, adding or removing a second factor, a passkey or a security key.
 *
 * 1. A change needs a session that passed every factor the login policy requires of the user now: when the
 *    user has a second factor the policy lets them sign in with, the session passed a second factor. A
 *    factor added after the session began is required too (whoever added it), so a session older than a
 *    factor never acts as if the factor did not exist.
 * 2. Removing a factor also needs a session that verified a factor at least as strong as the one removed
 *    (`FACTOR_STRENGTH`), as step-up authentication does in Keycloak and Auth0: a code by e-mail does not
 *    take away an authenticator app, nor an authenticator app a passkey.
 *
 * The login UI (the account page, the enrolment pages, the identity provider's link step) and the users API
 * (a user changing its own factors with a session-bound token) decide with these functions.
 */
import type { LoginSettings, SecondFactorType } from "../settings/login.ts";
import type { SessionChecks } from "./amr.ts";

/** A kind of a user's factor (`user_factors.type`). */
export type SignInFactor = "totp" | "otp_email" | "otp_sms" | "recovery_codes" | "passkey" | "u2f";

/** The part of the login policy the rule reads. */
export type SignInChangePolicy = Pick<LoginSettings, "second_factors" | "multi_factors">;

/**
 * The strength order, weakest first. A first factor alone (password, identity provider) is 0; a code by
 * e-mail or SMS 1 (it travels through a mailbox or a phone network); an authenticator app (TOTP) and a
 * recovery code 2 (a secret held by the person only; a recovery code stands in for a lost factor, so it
 * removes a lost authenticator app); a security key 3 (bound to the origin, cannot be phished); a passkey or
 * key that verified the user 4 (possession and PIN or biometrics in one).
 */
export const FACTOR_STRENGTH = {
  firstFactor: 0,
  codeByMessage: 1,
  authenticatorApp: 2,
  securityKey: 3,
  verifyingKey: 4,
} as const;

/** How strong a session's check must be to remove a factor of this kind. */
export function factorStrength(type: SignInFactor): number {
  switch (type) {
    case "passkey":
      return FACTOR_STRENGTH.verifyingKey;
    case "u2f":
      return FACTOR_STRENGTH.securityKey;
    case "totp":
      return FACTOR_STRENGTH.authenticatorApp;
    // recovery codes are a way back in, not a way to sign in on their own: any second factor removes them
    case "otp_email":
    case "otp_sms":
    case "recovery_codes":
      return FACTOR_STRENGTH.codeByMessage;
  }
}

/** The strongest check the session passed (0 with a first factor only). */
export function sessionStrength(checks: SessionChecks): number {
  let strength: number = FACTOR_STRENGTH.firstFactor;
  const atLeast = (value: number) => {
    strength = Math.max(strength, value);
  };
  if (checks.otpEmail || checks.otpSms) atLeast(FACTOR_STRENGTH.codeByMessage);
  if (checks.totp || checks.recoveryCode) atLeast(FACTOR_STRENGTH.authenticatorApp);
  if (checks.webauthn)
    atLeast(checks.webauthnUserVerified ? FACTOR_STRENGTH.verifyingKey : FACTOR_STRENGTH.securityKey);
  return strength;
}

/** Whether the session passed a second factor (any code or WebAuthn assertion). */
export function passedSecondFactor(checks: SessionChecks): boolean {
  return sessionStrength(checks) > FACTOR_STRENGTH.firstFactor;
}

/** Whether the session passed a first factor at all (a password, a provider, a passkey). */
const authenticated = (checks: SessionChecks) =>
  Boolean(checks.password || checks.idp || checks.webauthn || passedSecondFactor(checks));

/** The policy's second factor of each kind of user factor (passkeys count as security keys). */
const POLICY_TYPE: Partial<Record<SignInFactor, SecondFactorType>> = {
  totp: "SECOND_FACTOR_TYPE_TOTP",
  otp_email: "SECOND_FACTOR_TYPE_OTP_EMAIL",
  otp_sms: "SECOND_FACTOR_TYPE_OTP_SMS",
  u2f: "SECOND_FACTOR_TYPE_U2F",
  passkey: "SECOND_FACTOR_TYPE_U2F",
};

/**
 * Whether the policy lets a user sign in with a factor of this kind as a second factor. Recovery codes are
 * not one: they stand in for a lost factor and never make the second-factor step appear on their own.
 */
export function signsInAsSecondFactor(type: SignInFactor, policy: SignInChangePolicy): boolean {
  const policyType = POLICY_TYPE[type];
  if (!policyType) return false;
  if (policy.second_factors.includes(policyType)) return true;
  // a passkey verifying the user is a multi-factor of its own
  return type === "passkey" && policy.multi_factors.includes("MULTI_FACTOR_TYPE_U2F_WITH_VERIFICATION");
}

/** A session and the user's factors now, for a change of how the account signs in. */
export interface SignInChangeInput {
  /** The checks the session passed. */
  checks: SessionChecks;
  /** The kinds of the user's active factors now (added by any session, or by an administrator). */
  factors: readonly SignInFactor[];
  policy: SignInChangePolicy;
}

/** Whether the user has a second factor the policy lets them sign in with (one the sign-in asks for). */
const secondFactorRequired = (input: SignInChangeInput) =>
  input.factors.some((type) => signsInAsSecondFactor(type, input.policy));

/**
 * Rule 1: whether the session may change how the account signs in. It passed a first factor, and a second
 * one when the user has a second factor the policy lets them sign in with. A user without one (the first
 * factor the policy forces is being registered) needs the first factor only.
 */
export function signInChangeAllowed(input: SignInChangeInput): boolean {
  if (!authenticated(input.checks)) return false;
  return !secondFactorRequired(input) || passedSecondFactor(input.checks);
}

/**
 * Rule 2: whether the session may remove a factor of kind `removed`: rule 1, and a check at least as strong
 * as the factor. A factor the policy does not let the user sign in with takes rule 1 only (it opens no
 * sign-in, and no session could pass it), and so do the recovery codes of a user without a second factor.
 */
export function factorRemovalAllowed(input: SignInChangeInput & { removed: SignInFactor }): boolean {
  if (!signInChangeAllowed(input)) return false;
  const counts =
    input.removed === "recovery_codes"
      ? secondFactorRequired(input)
      : signsInAsSecondFactor(input.removed, input.policy);
  return !counts || sessionStrength(input.checks) >= factorStrength(input.removed);
}
