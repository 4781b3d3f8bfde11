/**
 * Login settings (category `login`), the login policy: what the login UI offers and reveals in a context,
 * and which factors a sign-in needs (docs/factors.md, "The login policy").
 */
export const LOGIN = "login";

/** Second factors the policy may allow (the API's names). */
export const SECOND_FACTOR_TYPES = [
  "SECOND_FACTOR_TYPE_TOTP",
  "SECOND_FACTOR_TYPE_U2F",
  "SECOND_FACTOR_TYPE_OTP_EMAIL",
  "SECOND_FACTOR_TYPE_OTP_SMS",
] as const;
export type SecondFactorType = (typeof SECOND_FACTOR_TYPES)[number];

/** Multi-factors (one credential that is two factors) the policy may allow. */
export const MULTI_FACTOR_TYPES = ["MULTI_FACTOR_TYPE_U2F_WITH_VERIFICATION"] as const;
export type MultiFactorType = (typeof MULTI_FACTOR_TYPES)[number];

export interface LoginSettings {
  /** People may register themselves (`prompt=create`, "Create an account"). */
  allow_register: boolean;
  /** The login UI hides "Forgot password?" (the link comes with the password reset and honours it). */
  hide_password_reset: boolean;
  /**
   * The login UI hides that a login name is unknown: any name leads to the password page, which answers
   * an unknown one like a wrong password. Off: the login-name page says so (ZITADEL's default; ours is on,
   * so that the login does not tell which names exist unless an administrator chooses to).
   */
  ignore_unknown_usernames: boolean;
  /** Users may sign in with their login name and password (else only passkeys and identity providers). */
  allow_username_password: boolean;
  /** Users may sign in through external identity providers. */
  allow_external_idp: boolean;
  /** Every sign-in needs a second factor; a user without one registers one first. */
  force_mfa: boolean;
  /** `force_mfa` applies to sign-ins with the password only, not to those through an identity provider. */
  force_mfa_local_only: boolean;
  /** The login offers "Sign in with a passkey" (no password). */
  passwordless_allowed: boolean;
  /** The second factors users may use and register. */
  second_factors: SecondFactorType[];
  /** The multi-factors users may use (a security key with user verification). */
  multi_factors: MultiFactorType[];
  /** Seconds a password check counts for a sign-in. */
  password_check_lifetime: number;
  /** Seconds a second-factor check counts for a sign-in. */
  second_factor_check_lifetime: number;
  /** Seconds a multi-factor check (a passkey with user verification) counts for a sign-in. */
  multi_factor_check_lifetime: number;
  /** Seconds after "Skip" on the second-factor registration prompt before it is shown again; 0: never shown unless forced. */
  mfa_init_skip_lifetime: number;
}

const HOUR = 3600;

/**
 * The values in force where no context sets one (a new instance): ZITADEL's (cmd/defaults.yaml), except
 * ignore_unknown_usernames (see above), mfa_init_skip_lifetime (ZITADEL: 720h, i.e. every user without
 * a second factor is asked to register one at each sign-in until they skip; ours: 0, the prompt only when
 * an administrator asks for it, by setting a skip lifetime or forcing MFA) and the second factors (ZITADEL:
 * TOTP and U2F; ours: every kind this server implements).
 */
export const loginDefaults: LoginSettings = {
  allow_register: true,
  hide_password_reset: false,
  ignore_unknown_usernames: true,
  allow_username_password: true,
  allow_external_idp: true,
  force_mfa: false,
  force_mfa_local_only: false,
  passwordless_allowed: true,
  second_factors: [...SECOND_FACTOR_TYPES],
  multi_factors: [...MULTI_FACTOR_TYPES],
  password_check_lifetime: 240 * HOUR,
  second_factor_check_lifetime: 18 * HOUR,
  multi_factor_check_lifetime: 12 * HOUR,
  mfa_init_skip_lifetime: 0,
};

/** The boolean login settings, as named in the settings events and the API. */
export const LOGIN_FLAGS = [
  "allow_register",
  "hide_password_reset",
  "ignore_unknown_usernames",
  "allow_username_password",
  "allow_external_idp",
  "force_mfa",
  "force_mfa_local_only",
  "passwordless_allowed",
] as const;
export type LoginFlag = (typeof LOGIN_FLAGS)[number];

/** The lists of factor types. */
export const LOGIN_LISTS = ["second_factors", "multi_factors"] as const;
export type LoginList = (typeof LOGIN_LISTS)[number];

/** The lifetimes, stored as whole seconds. */
export const LOGIN_LIFETIMES = [
  "password_check_lifetime",
  "second_factor_check_lifetime",
  "multi_factor_check_lifetime",
  "mfa_init_skip_lifetime",
] as const;
export type LoginLifetime = (typeof LOGIN_LIFETIMES)[number];

/** The longest lifetime accepted: ten years (a longer one is a mistake, not a policy). */
export const MAX_LIFETIME_SECONDS = 3650 * 24 * HOUR;

/** The values a list may hold. */
export const allowedListValues: Record<LoginList, readonly string[]> = {
  second_factors: SECOND_FACTOR_TYPES,
  multi_factors: MULTI_FACTOR_TYPES,
};

/** The problem with a lifetime in seconds, if any (negative, fractional or beyond MAX_LIFETIME_SECONDS). */
export function lifetimeProblem(seconds: number): string | undefined {
  if (!Number.isFinite(seconds) || seconds < 0) return "must not be negative";
  if (seconds > MAX_LIFETIME_SECONDS) return `must be at most ${MAX_LIFETIME_SECONDS}s (ten years)`;
  if (!Number.isInteger(seconds)) return "must be whole seconds";
  return undefined;
}

/** The problem with a list of factor types, if any: the index and the unknown value. */
export function listProblem(
  name: LoginList,
  values: readonly string[],
): { index: number; value: string } | undefined {
  const allowed = allowedListValues[name];
  const index = values.findIndex((v) => !allowed.includes(v));
  return index < 0 ? undefined : { index, value: values[index] };
}

/** Resolves one setting in a context (src/query/settings.ts `resolveSetting` bound to the context's layers). */
export type LoginSettingReader = <K extends keyof LoginSettings>(name: K) => LoginSettings[K];

/** The whole policy in force in a context. */
export function loginPolicyOf(read: LoginSettingReader): LoginSettings {
  const policy = {} as Record<keyof LoginSettings, unknown>;
  for (const name of Object.keys(loginDefaults) as Array<keyof LoginSettings>) policy[name] = read(name);
  return policy as unknown as LoginSettings;
}
