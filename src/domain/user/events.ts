export const USER = "user";

export const UserEvent = {
  humanAdded: "user.human.added",
  machineAdded: "user.machine.added",
  /** Profile, email, phone (human) or name, description, access token type (machine): changed fields only. */
  changed: "user.changed",
  usernameChanged: "user.username.changed",
  passwordChanged: "user.password.changed",
  /** A wrong password in a session check (counts towards the lockout; may start a temporary one). */
  passwordCheckFailed: "user.password.check.failed",
  /** A right password in a session check (resets the failure count). */
  passwordCheckSucceeded: "user.password.check.succeeded",
  locked: "user.locked",
  unlocked: "user.unlocked",
  deactivated: "user.deactivated",
  reactivated: "user.reactivated",
  metadataSet: "user.metadata.set",
  metadataRemoved: "user.metadata.removed",
  secretSet: "user.machine.secret.set",
  secretRemoved: "user.machine.secret.removed",
  keyAdded: "user.machine.key.added",
  keyRemoved: "user.machine.key.removed",
  patAdded: "user.pat.added",
  patRemoved: "user.pat.removed",
  /** Token exchange: an actor obtained tokens for this user (impersonation). Changes nothing of the user. */
  impersonated: "user.impersonated",
  /** An identity at an external identity provider was linked to the user (sign-in with that provider). */
  idpLinkAdded: "user.idp.link.added",
  /** The link to an external identity was removed. */
  idpLinkRemoved: "user.idp.link.removed",
  /** A verification code for the e-mail address was made (its keyed hash, never the code; docs/notifications.md). */
  emailCodeAdded: "user.human.email.code.added",
  /** A wrong code was given for the e-mail address (5 invalidate the code). */
  emailCodeCheckFailed: "user.human.email.code.check.failed",
  /** The e-mail address was proven with its code. */
  emailVerified: "user.human.email.verified",
  /** A verification code for the phone number was made. */
  phoneCodeAdded: "user.human.phone.code.added",
  /** A wrong code was given for the phone number (5 invalidate the code). */
  phoneCodeCheckFailed: "user.human.phone.code.check.failed",
  /** The phone number was proven with its code. */
  phoneVerified: "user.human.phone.verified",
  /** A code to set a password with was made (a reset, or an invitation; never the code). */
  passwordCodeAdded: "user.human.password.code.added",
  /** A wrong password code was given (5 invalidate the code). */
  passwordCodeCheckFailed: "user.human.password.code.check.failed",
  /** The custom data of a human user: its schema, the schema's revision it matches, the whole document. */
  dataSet: "user.data.set",
  /** The user no longer has a schema nor custom data. */
  dataRemoved: "user.data.removed",
  // Second factors (docs/factors.md). Secrets are sealed with the master key; codes are stored hashed.
  /** A TOTP authenticator was registered (pending until verified; the sealed secret, never the plain one). */
  totpAdded: "user.totp.added",
  /** The TOTP authenticator was activated with a right code. */
  totpVerified: "user.totp.verified",
  /** A TOTP code was accepted (payload `step`: that time step is never accepted again). */
  totpUsed: "user.totp.used",
  totpRemoved: "user.totp.removed",
  /** A passkey or security key registration was started (pending until verified). */
  passkeyAdded: "user.passkey.added",
  /** The registration was verified: the credential, its public key and name. */
  passkeyVerified: "user.passkey.verified",
  /** An assertion of the credential passed (its new signature counter and backup state). */
  passkeyUsed: "user.passkey.used",
  passkeyRemoved: "user.passkey.removed",
  /** One-time codes by e-mail were enabled as a second factor. */
  otpEmailAdded: "user.otp_email.added",
  otpEmailRemoved: "user.otp_email.removed",
  /** One-time codes by SMS were enabled as a second factor. */
  otpSmsAdded: "user.otp_sms.added",
  otpSmsRemoved: "user.otp_sms.removed",
  /** New recovery codes (their hashes) replace any earlier ones. */
  recoveryCodesGenerated: "user.recovery_codes.generated",
  /** One recovery code was used (it is never accepted again). */
  recoveryCodeUsed: "user.recovery_code.used",
  recoveryCodesRemoved: "user.recovery_codes.removed",
  /**
   * A wrong second-factor answer (payload `factor`, and `locked_until` like a wrong password): counts
   * towards the same lockout as wrong passwords.
   */
  factorCheckFailed: "user.factor.check.failed",
  /** A right second-factor answer after failures (resets the count, like a right password). */
  factorCheckSucceeded: "user.factor.check.succeeded",
  /**
   * The user chose "Skip" on the login's prompt to register a second factor: the prompt stays away for
   * the login policy's `mfa_init_skip_lifetime`.
   */
  mfaInitSkipped: "user.mfa.init.skipped",
  removed: "user.removed",
} as const;

/** The second factors a session can check (docs/factors.md). */
export type SecondFactor = "totp" | "otp_email" | "otp_sms" | "webauthn" | "recovery_code";

/** `user.factor.check.failed`, `user.factor.check.succeeded`. */
export interface FactorCheckPayload {
  factor: SecondFactor;
  /** Failed checks only: the end of the temporary lockout this failure starts. */
  locked_until?: string;
}

/** `user.data.set` (docs/user-schemas.md). */
export interface DataSetPayload {
  schema_id: string;
  schema_revision: number;
  data: Record<string, unknown>;
}

/** `user.human.email.code.added`, `user.human.phone.code.added`. */
export interface CodeAddedPayload {
  /** HMAC-SHA256 of the code under a key derived from the master key (src/domain/user/codes.ts). */
  code_hash: string;
  /** RFC 3339: the code is refused after it. */
  expires_at: string;
  /** The address or number the code proves. */
  target: string;
  /** Whether a message carries the code (false: the caller got it with `return_code`). */
  sent: boolean;
  /**
   * Password codes: what for (`reset`: a forgotten password; `invite`: the first one). Absent in events of
   * codes that had no reason (older ones): a reset.
   */
  reason?: PasswordCodeReason;
}

/** What a password code is for: a forgotten password, or an invitation (the first password). */
export type PasswordCodeReason = "reset" | "invite";

/** `user.human.email.verified`, `user.human.phone.verified`. */
export interface VerifiedPayload {
  /** The address or number proven. */
  target: string;
}

export const UserType = { human: 1, machine: 2 } as const;
export const UserState = { active: 1, inactive: 2, locked: 3 } as const;
export const AccessTokenType = { bearer: 0, jwt: 1 } as const;

export interface HumanAddedPayload {
  username: string;
  profile: {
    given_name: string;
    family_name: string;
    display_name?: string;
    nick_name?: string;
    preferred_language?: string;
  };
  email: { address: string; is_verified: boolean };
  phone?: { number: string; is_verified: boolean };
  /** argon2id hash; the password itself is never stored. */
  password_hash?: string;
  password_change_required?: boolean;
  /** Custom data (docs/user-schemas.md): all three or none. */
  schema_id?: string;
  schema_revision?: number;
  data?: Record<string, unknown>;
}

export interface MachineAddedPayload {
  username: string;
  name: string;
  description?: string;
  access_token_type: number;
}

export interface PatAddedPayload {
  pat_id: string;
  /** SHA-256 of the token, base64url. */
  token_hash: string;
  expiration?: string;
}

/**
 * `user.changed`: only the fields that changed, as read-model columns. `null` removes an optional value
 * (display name, nickname, preferred language, phone, description).
 */
export interface UserChangedPayload {
  given_name?: string;
  family_name?: string;
  display_name?: string | null;
  nick_name?: string | null;
  preferred_language?: string | null;
  email?: string;
  email_verified?: boolean;
  phone?: string | null;
  phone_verified?: boolean;
  /** Machine users. */
  name?: string;
  description?: string | null;
  access_token_type?: number;
}

export interface UsernameChangedPayload {
  username: string;
  old_username: string;
}

export interface PasswordChangedPayload {
  /** argon2id hash; the password itself is never stored. */
  password_hash: string;
  change_required: boolean;
}

/** `user.password.check.succeeded` (appended by session checks after failures). */
export type PasswordCheckPayload = Record<string, never>;

/** `user.password.check.failed` (appended by session checks; null payload before lockouts had an end). */
export interface PasswordCheckFailedPayload {
  /** RFC 3339: this failure started a temporary lockout ending then (password checks refused until). */
  locked_until?: string;
}

export interface MetadataSetPayload {
  key: string;
  /** The value, base64. */
  value: string;
}

export interface MetadataRemovedPayload {
  key: string;
}

export interface SecretSetPayload {
  /** SHA-256 of the client secret, base64url. */
  secret_hash: string;
}

export interface KeyAddedPayload {
  key_id: string;
  /** PEM (SPKI) public key; the private key is never stored. */
  public_key: string;
  /** RFC 3339; absent: never expires. */
  expiration?: string;
}

export interface KeyRemovedPayload {
  key_id: string;
}

export interface PatRemovedPayload {
  pat_id: string;
}

/**
 * `user.impersonated` (on the impersonated user, created by the actor): who obtained which token for the
 * user through which client. The token's ID only, never the token.
 */
export interface ImpersonatedPayload {
  actor_user_id: string;
  /** The `act` claim of the token (the actor, and earlier actors when an impersonation token was exchanged). */
  act: { sub: string; act?: unknown };
  client_id: string;
  /** The issued token's ID (`jti`). */
  token_id: string;
  /** RFC 8693 `issued_token_type`. */
  issued_token_type: string;
}

/**
 * `user.idp.link.added`: the user signs in with the identity `external_user_id` (the provider's `sub` or
 * ID attribute) at the identity provider `idp_id`. One identity links to one user per instance; a user
 * has at most one link per provider.
 */
export interface IdpLinkAddedPayload {
  idp_id: string;
  external_user_id: string;
  /** The identity's username at the provider when it was linked (display only). */
  external_username: string;
}

/** `user.idp.link.removed`. */
export interface IdpLinkRemovedPayload {
  idp_id: string;
  external_user_id: string;
}

export interface UserRemovedPayload {
  username: string;
}

// ---------------------------------------------------------------------------------------------------------
// Second factors (docs/factors.md)

/** `user.totp.added`: a pending TOTP authenticator. */
export interface TotpAddedPayload {
  /** The base32 secret sealed with the master key (src/crypto); never the plain secret. */
  secret_sealed: string;
}

/** `user.totp.used`: the RFC 6238 time step of the accepted code (codes of it or earlier are refused). */
export interface TotpUsedPayload {
  step: number;
}

/** What a passkey or security key is registered as: `passkey` (discoverable, user verified) or `u2f`. */
export type PasskeyType = "passkey" | "u2f";

/** `user.passkey.added`: a registration started (what verifying its answer needs). */
export interface PasskeyAddedPayload {
  passkey_id: string;
  type: PasskeyType;
  /** The registration challenge (base64url; random, not a secret once used). */
  challenge: string;
  /** The relying-party ID the options named. */
  rp_id: string;
  /** The origins the answer may come from (those the login serves under `rp_id`). */
  origins: string[];
  /** required | preferred | discouraged */
  user_verification: string;
  /** platform | cross-platform | unspecified */
  authenticator: string;
}

/** `user.passkey.verified`: the credential of a verified registration. */
export interface PasskeyVerifiedPayload {
  passkey_id: string;
  name: string;
  /** base64url credential ID. */
  credential_id: string;
  /** base64url COSE public key. */
  public_key: string;
  counter: number;
  transports?: string[];
  /** singleDevice | multiDevice (synced) */
  device_type: string;
  backed_up: boolean;
  aaguid?: string;
  rp_id: string;
}

/** `user.passkey.used`: the signature counter and backup state of an assertion that passed. */
export interface PasskeyUsedPayload {
  passkey_id: string;
  counter: number;
  backed_up: boolean;
}

/** `user.passkey.removed`. */
export interface PasskeyRemovedPayload {
  passkey_id: string;
}

/** `user.otp_email.added`, `user.otp_sms.added`: nothing needed (the verified address or number is used). */
export type OtpFactorPayload = Record<string, never>;

/** `user.recovery_codes.generated`: the codes' hashes (HMAC under a key from the master key), in order. */
export interface RecoveryCodesGeneratedPayload {
  hashes: string[];
}

/** `user.recovery_code.used`: the index of the code in the generated list. */
export interface RecoveryCodeUsedPayload {
  index: number;
}
