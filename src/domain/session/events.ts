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
