/**
 * The authentication methods of a session as RFC 8176 `amr` values (docs/factors.md), for ID tokens,
 * introspection and the login's decisions:
 *
 * - `pwd`: the password was verified;
 * - `fed`: the user signed in through an external identity provider;
 * - `otp`: a one-time password: a TOTP code, a code sent by e-mail or SMS, or a recovery code;
 * - `hwk` / `swk`: a WebAuthn assertion by a key bound to a device (security key, platform authenticator)
 *   or by a synced passkey (a key that leaves the device: software);
 * - `user`: the WebAuthn authenticator verified the user (PIN, biometrics), not only their presence;
 * - `mfa`: at least two of the above, i.e. two independent factors (a passkey with user verification is
 *   two: the key and the PIN or biometrics).
 */

/** When each check of a session last passed (undefined: never), as the sessions read model has them. */
export interface SessionChecks {
  password?: Date;
  idp?: Date;
  totp?: Date;
  otpEmail?: Date;
  otpSms?: Date;
  recoveryCode?: Date;
  webauthn?: Date;
  webauthnUserVerified?: boolean;
  webauthnAmr?: "hwk" | "swk";
}

/** The `amr` values of a session's checks, in a stable order. */
export function amrOf(checks: SessionChecks): string[] {
  const methods: string[] = [];
  if (checks.password) methods.push("pwd");
  if (checks.totp || checks.otpEmail || checks.otpSms || checks.recoveryCode) methods.push("otp");
  if (checks.webauthn) {
    methods.push(checks.webauthnAmr ?? "hwk");
    if (checks.webauthnUserVerified) methods.push("user");
  }
  if (checks.idp) methods.push("fed");
  if (methods.length >= 2) methods.push("mfa");
  return methods;
}

/** Whether the checks amount to multi-factor authentication (`mfa` among `amrOf`). */
export function isMultiFactor(checks: SessionChecks): boolean {
  return amrOf(checks).includes("mfa");
}

/** The second-factor checks (not the password nor an identity provider), latest first. */
export function secondFactorTimes(checks: SessionChecks): Date[] {
  return [checks.totp, checks.otpEmail, checks.otpSms, checks.recoveryCode, checks.webauthn]
    .filter((d): d is Date => d !== undefined)
    .sort((a, b) => b.getTime() - a.getTime());
}

/**
 * Authentication context classes (OIDC `acr`, `acr_values`): `urn:platform:acr:mfa` for two factors (`mfa`
 * among the amr values), `urn:platform:acr:pwd` for one (a password, an identity provider or a passkey
 * alone). An authorization request with `acr_values=urn:platform:acr:mfa` needs a second factor.
 */
export const ACR_MFA = "urn:platform:acr:mfa";
export const ACR_SINGLE_FACTOR = "urn:platform:acr:pwd";
export const ACR_VALUES_SUPPORTED = [ACR_SINGLE_FACTOR, ACR_MFA] as const;

/** The `acr` a sign-in with these amr values achieved; undefined without any. */
export function acrOf(amr: readonly string[] | null | undefined): string | undefined {
  if (!amr?.length) return undefined;
  return amr.includes("mfa") ? ACR_MFA : ACR_SINGLE_FACTOR;
}

/** The supported values of an `acr_values` parameter, in its order (others are ignored, as OIDC allows). */
export function supportedAcrValues(raw: string | undefined): string[] {
  const given = (raw ?? "").split(" ").filter(Boolean);
  return [...new Set(given.filter((v) => (ACR_VALUES_SUPPORTED as readonly string[]).includes(v)))];
}
