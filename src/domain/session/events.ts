export const SESSION = "session";

export const SessionEvent = {
  /** A session for a checked user; carries the SHA-256 of the session token (never the token). */
  added: "session.added",
  /** The session's user was checked (again). */
  userChecked: "session.user.checked",
  /** The password of the session's user was verified. */
  passwordChecked: "session.password.checked",
  /** The user signed in with a linked identity at an external identity provider (payload: `idp_id`). */
  idpChecked: "session.idp.checked",
  /** A TOTP code of the user's authenticator app was verified (docs/factors.md). */
  totpChecked: "session.totp.checked",
  /** A one-time code sent by e-mail (a challenge of this session) was verified. */
  otpEmailChecked: "session.otp_email.checked",
  /** A one-time code sent by SMS (a challenge of this session) was verified. */
  otpSmsChecked: "session.otp_sms.checked",
  /** One of the user's recovery codes was used. */
  recoveryCodeChecked: "session.recovery_code.checked",
  /** A WebAuthn assertion answered this session's challenge (payload: SessionWebAuthnCheckedPayload). */
  webAuthnChecked: "session.webauthn.checked",
  /**
   * A challenge was made (payload: `type` and what verifying its answer needs, never a plain code): the last
   * one of each type counts; a passed check of its type consumes it.
   */
  challengeAdded: "session.challenge.added",
  /** A wrong answer to a challenge (payload `type`): the fifth invalidates the challenge. */
  challengeCheckFailed: "session.challenge.check.failed",
  /**
   * The browser of a login UI session got a new `platform_ua` cookie at a sign-in (payload:
   * `user_agent_hash`, the SHA-256 of the new value): the session now belongs to that value only.
   */
  userAgentChanged: "session.user_agent.changed",
  /** The session ended (DeleteSession). */
  terminated: "session.terminated",
} as const;

export interface SessionAddedPayload {
  user_id: string;
  /** The organization of the user (also the aggregate's resource owner). */
  org_id: string;
  /** SHA-256 of the session token, base64url. */
  token_hash: string;
  /** SHA-256 of the user-agent cookie of the browser that signed in (login UI sessions only). */
  user_agent_hash?: string;
}

export interface SessionUserCheckedPayload {
  user_id: string;
}

/** The challenge types of the sessions API (`challenges` in create and patch). */
export type ChallengeType = "webauthn" | "otp_email" | "otp_sms";

/** `session.challenge.added`: the type, and the type's own fields (e.g. a code's keyed hash, expiry). */
export interface ChallengeAddedPayload {
  type: ChallengeType;
  [field: string]: unknown;
}

/** `session.webauthn.checked`. */
export interface SessionWebAuthnCheckedPayload {
  /** The passkey (or security key) that signed the assertion. */
  passkey_id: string;
  /** The authenticator verified the user (PIN, biometrics). */
  user_verified: boolean;
  /** RFC 8176 method of the key: `hwk` (bound to a device) or `swk` (synced, a software key). */
  amr: "hwk" | "swk";
}
