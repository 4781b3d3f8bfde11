export const USER = "user";

export const UserEvent = {
  humanAdded: "user.human.added",
  machineAdded: "user.machine.added",
  /** Profile, email, phone (human) or name, description, access token type (machine): changed fields only. */
  changed: "user.changed",
  usernameChanged: "user.username.changed",
  passwordChanged: "user.password.changed",
  /** A wrong password in a session check (counts towards the lockout policy). */
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
  removed: "user.removed",
} as const;

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
