/**
 * The password lockout: what wrong passwords in a row do to a user's password checks (pure decisions;
 * ./commands.ts applies them inside the check's command).
 *
 * Counted per user, on the user aggregate: `user.password.check.failed` for a wrong password,
 * `user.password.check.succeeded` for a right one after failures (reset), reset by an unlock and a
 * password change too. From the `maxPasswordAttempts`-th wrong password in a row on:
 * - `temporary` (the default): each wrong password locks the password checks out for a while — the
 *   first lockout `lockoutSeconds`, doubling with every further wrong password, at most
 *   `lockoutMaxSeconds` (like Keycloak's brute-force detection). The end is recorded in the failure event
 *   (`locked_until`). While it lasts, passwords are not verified and not counted, so an attacker without
 *   the password can delay the owner's next password sign-in by at most `lockoutMaxSeconds`, never lock
 *   the account for good; sessions already signed in go on.
 * - `permanent`: the failure that reaches the maximum also appends `user.locked`: the user is LOCKED
 *   (no check of any kind, no sign-in) until an administrator unlocks it.
 */
import { FailedPreconditionError } from "../../errors.ts";
import type { NewEvent } from "../../eventstore/types.ts";
import { type SecondFactor, USER, UserEvent } from "../user/events.ts";

/** The lockout policy (PLATFORM_MAX_PASSWORD_ATTEMPTS, PLATFORM_PASSWORD_LOCKOUT, ..._SECONDS). */
export interface PasswordPolicy {
  /** Wrong passwords in a row from which on the lockout applies; 0 = never. */
  maxPasswordAttempts: number;
  /** Default `temporary`. */
  lockout?: "temporary" | "permanent";
  /** The first temporary lockout (default 60 s). */
  lockoutSeconds?: number;
  /** The longest temporary lockout (default 900 s). */
  lockoutMaxSeconds?: number;
}

/** The policy of the configuration. */
export function passwordPolicyOf(config: {
  maxPasswordAttempts: number;
  passwordLockout: "temporary" | "permanent";
  passwordLockoutSeconds: number;
  passwordLockoutMaxSeconds: number;
}): PasswordPolicy {
  return {
    maxPasswordAttempts: config.maxPasswordAttempts,
    lockout: config.passwordLockout,
    lockoutSeconds: config.passwordLockoutSeconds,
    lockoutMaxSeconds: config.passwordLockoutMaxSeconds,
  };
}

/** What a password check needs to know of the user's lockout. */
export interface LockoutState {
  orgId?: string;
  /** Wrong passwords in a row (since the last right one, unlock or password change). */
  failedAttempts: number;
  /** End of the last temporary lockout started (it may be over). */
  lockedUntil?: Date;
}

/**
 * A password check refused because a temporary lockout lasts (FAILED_PRECONDITION); the login UI answers
 * it exactly like a wrong password.
 */
export class PasswordLockedOutError extends FailedPreconditionError {
  constructor(readonly until: Date) {
    super(`user is locked until ${until.toISOString()} after too many wrong passwords`);
  }
}

/** The end of the temporary lockout lasting at `now`, or undefined. */
export function lockedOutUntil(user: LockoutState, now: Date): Date | undefined {
  return user.lockedUntil && user.lockedUntil.getTime() > now.getTime() ? user.lockedUntil : undefined;
}

/** Seconds of the temporary lockout the `failures`-th wrong password in a row starts (0: none). */
export function lockoutSeconds(policy: PasswordPolicy, failures: number): number {
  const max = policy.maxPasswordAttempts;
  if (max <= 0 || failures < max || policy.lockout === "permanent") return 0;
  const first = policy.lockoutSeconds ?? 60;
  const longest = Math.max(first, policy.lockoutMaxSeconds ?? 900);
  return Math.min(first * 2 ** Math.min(failures - max, 40), longest);
}

/**
 * The user events of a password check at `now` (or, with `factor`, of a second-factor check, which counts
 * towards the same lockout): succeeded (only when it resets failures), or failed — with the end of the
 * temporary lockout it starts, or followed by `user.locked` under a permanent lockout.
 */
export function passwordCheckEvents(
  userId: string,
  user: LockoutState,
  passed: boolean,
  policy: PasswordPolicy,
  now: Date = new Date(),
  factor?: SecondFactor,
): NewEvent[] {
  const base = { aggregateType: USER, aggregateId: userId, resourceOwner: user.orgId ?? "" };
  const failed = factor ? UserEvent.factorCheckFailed : UserEvent.passwordCheckFailed;
  const succeeded = factor ? UserEvent.factorCheckSucceeded : UserEvent.passwordCheckSucceeded;
  const named = factor ? { factor } : {};
  // A right password only needs recording when it resets earlier failures: logins of a user then neither
  // grow the user's history nor contend for its sequence (the session's own events record the check).
  if (passed)
    return user.failedAttempts > 0 ? [{ ...base, type: succeeded, payload: factor ? named : null }] : [];
  const failures = user.failedAttempts + 1;
  const max = policy.maxPasswordAttempts;
  if (policy.lockout === "permanent") {
    const events: NewEvent[] = [{ ...base, type: failed, payload: factor ? named : null }];
    if (max > 0 && failures >= max) events.push({ ...base, type: UserEvent.locked, payload: null });
    return events;
  }
  const seconds = lockoutSeconds(policy, failures);
  const lockedUntil = seconds ? { locked_until: new Date(now.getTime() + seconds * 1000).toISOString() } : {};
  const payload = { ...named, ...lockedUntil };
  return [{ ...base, type: failed, payload: Object.keys(payload).length ? payload : null }];
}
