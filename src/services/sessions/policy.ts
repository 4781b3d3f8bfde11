/**
 * The login policy's word on a session command (docs/factors.md, "The login policy"): a password check
 * when the user's policy does not allow passwords, or a check or challenge of a second factor it does not
 * allow, is FAILED_PRECONDITION before anything is checked or stored. The user's policy is its
 * organization's, or the instance's for an account above its organization's owners
 * (`policyOrgOf`, docs/factors.md "Accounts above their organization").
 */
import type { LoginSettings, SecondFactorType } from "../../domain/settings/login.ts";
import { FailedPreconditionError } from "../../errors.ts";
import { loginPolicyFor, type PolicyUser, policyOrgOf } from "../../query/login-policy.ts";
import type { Queryable } from "../../storage/database.ts";

/** What a create or patch asks for (either message's checks and challenges). */
interface Requested {
  checks?: {
    password?: unknown;
    totp?: unknown;
    otpEmail?: unknown;
    otpSms?: unknown;
    webauthn?: unknown;
  };
  challenges?: { webauthn?: unknown; otpEmail?: unknown; otpSms?: unknown };
}

const allows = (policy: LoginSettings, type: SecondFactorType) => policy.second_factors.includes(type);

/**
 * A WebAuthn assertion is a security key after the password (U2F), a passkey verifying the user
 * (multi-factor), or a passkey sign-in without password: allowed when the policy allows any of them.
 */
const allowsWebAuthn = (policy: LoginSettings) =>
  allows(policy, "SECOND_FACTOR_TYPE_U2F") ||
  policy.multi_factors.includes("MULTI_FACTOR_TYPE_U2F_WITH_VERIFICATION") ||
  policy.passwordless_allowed;

/** Refuses what the login policy of the session's user rules out. */
export async function requireAllowedByLoginPolicy(
  db: Queryable,
  instanceId: string,
  user: PolicyUser,
  requested: Requested | undefined,
): Promise<void> {
  const checks = requested?.checks;
  const challenges = requested?.challenges;
  const asked = [
    checks?.password && "password",
    checks?.totp && "totp",
    (checks?.otpEmail || challenges?.otpEmail) && "otp_email",
    (checks?.otpSms || challenges?.otpSms) && "otp_sms",
    (checks?.webauthn || challenges?.webauthn) && "webauthn",
  ].filter((v): v is string => typeof v === "string");
  if (asked.length === 0) return;
  const orgId = await policyOrgOf(db, instanceId, user);
  const policy = await loginPolicyFor(db, instanceId, orgId);
  const whose = orgId
    ? "the login policy of the user's organization"
    : "the instance's login policy (the user holds roles above its organization)";
  const refused = (what: string) => new FailedPreconditionError(`${whose} does not allow ${what}`);
  if (checks?.password && !policy.allow_username_password) throw refused("signing in with a password");
  if (checks?.totp && !allows(policy, "SECOND_FACTOR_TYPE_TOTP")) throw refused("TOTP (checks.totp)");
  if (asked.includes("otp_email") && !allows(policy, "SECOND_FACTOR_TYPE_OTP_EMAIL"))
    throw refused("codes by e-mail (otp_email)");
  if (asked.includes("otp_sms") && !allows(policy, "SECOND_FACTOR_TYPE_OTP_SMS"))
    throw refused("codes by SMS (otp_sms)");
  if (asked.includes("webauthn") && !allowsWebAuthn(policy))
    throw refused("security keys or passkeys (webauthn)");
}
