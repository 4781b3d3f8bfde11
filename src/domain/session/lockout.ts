/**
 * The lockouts of a user's checks: what wrong passwords, and wrong answers of each second factor, in a row
 * do to the checks (pure decisions; ./commands.ts applies them inside the check's command).
 *
 * Counted per user, on the user aggregate, each count on its own:
 * - the password: `user.password.check.failed` for a wrong password, `user.password.check.succeeded` for a
 *   right one after failures (reset), reset by an unlock and a password change too;
 * - each second factor (`totp`, `otp_email`, `otp_sms`, `recovery_code`, `webauthn`):
 *   `user.factor.check.failed` / `.succeeded` naming the factor, reset only by a right answer of that same
 *   factor and by an unlock — never by a right password, so whoever has the password cannot go on
 *   guessing a code by signing in again between guesses.
 *
 * From the `maxPasswordAttempts`-th failure in a row of one count on:
 * - `temporary` (the default): each failure locks that check out for a while — the first lockout
 *   `lockoutSeconds`, doubling with every further failure, at most `lockoutMaxSeconds` (like Keycloak's
 *   brute-force detection). The end is recorded in the failure event (`locked_until`). While it lasts,
 *   answers of that check are not verified and not counted (even a right one is refused), so an attacker
 *   can delay the owner's next check by at most `lockoutMaxSeconds`, never lock the account for good;
 *   sessions already signed in go on.
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

/** The count of one second factor (absent: no failure since its last reset). */
export type FactorLockouts = Partial<Record<SecondFactor, LockoutState>>;

/** What a second-factor check needs to know of the user's lockouts. */
export interface FactorLockoutState {
  orgId?: string;
  factorLockouts?: FactorLockouts;
}

/** The count of `factor` (none: zero failures). */
export function factorCount(user: FactorLockoutState, factor: SecondFactor): LockoutState {
  return { orgId: user.orgId, failedAttempts: 0, ...user.factorLockouts?.[factor] };
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

/**
 * A second-factor check refused because a temporary lockout of that factor lasts (FAILED_PRECONDITION):
 * the answer is not verified, not even a right one. The login UI says "Too many wrong attempts".
 */
export class FactorLockedOutError extends FailedPreconditionError {
  constructor(
    readonly factor: SecondFactor,
    readonly until: Date,
  ) {
    super(`${factor} checks are locked until ${until.toISOString()} after too many wrong answers`);
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

/** The events of one check counted under the policy (a password's, or one second factor's). */
function countedCheckEvents(
  base: Pick<NewEvent, "aggregateType" | "aggregateId" | "resourceOwner">,
  counted: LockoutState,
  passed: boolean,
  policy: PasswordPolicy,
  now: Date,
  kind: { failed: string; succeeded: string; payload: Record<string, unknown> },
): NewEvent[] {
  const named = Object.keys(kind.payload).length ? kind.payload : null;
  // A right answer only needs recording when it resets earlier failures: logins of a user then neither
  // grow the user's history nor contend for its sequence (the session's own events record the check).
  if (passed) return counted.failedAttempts > 0 ? [{ ...base, type: kind.succeeded, payload: named }] : [];
  const failures = counted.failedAttempts + 1;
  const max = policy.maxPasswordAttempts;
  if (policy.lockout === "permanent") {
    const events: NewEvent[] = [{ ...base, type: kind.failed, payload: named }];
    if (max > 0 && failures >= max) events.push({ ...base, type: UserEvent.locked, payload: null });
    return events;
  }
  const seconds = lockoutSeconds(policy, failures);
  const lockedUntil = seconds ? { locked_until: new Date(now.getTime() + seconds * 1000).toISOString() } : {};
  const payload = { ...kind.payload, ...lockedUntil };
  return [{ ...base, type: kind.failed, payload: Object.keys(payload).length ? payload : null }];
}

/**
 * The user events of a password check at `now`: succeeded (only when it resets failures), or failed —
 * with the end of the temporary lockout it starts, or followed by `user.locked` under a permanent lockout.
 */
export function passwordCheckEvents(
  userId: string,
  user: LockoutState,
  passed: boolean,
  policy: PasswordPolicy,
  now: Date = new Date(),
): NewEvent[] {
  const base = { aggregateType: USER, aggregateId: userId, resourceOwner: user.orgId ?? "" };
  return countedCheckEvents(base, user, passed, policy, now, {
    failed: UserEvent.passwordCheckFailed,
    succeeded: UserEvent.passwordCheckSucceeded,
    payload: {},
  });
}

/**
 * The user events of a check of the second factor `factor` at `now`, counted on that factor alone
 * (`user.factor.check.failed` / `.succeeded` with `factor`), by the same rule as a password check.
 */
export function factorCheckEvents(
  userId: string,
  user: FactorLockoutState,
  factor: SecondFactor,
  passed: boolean,
  policy: PasswordPolicy,
  now: Date = new Date(),
): NewEvent[] {
  const base = { aggregateType: USER, aggregateId: userId, resourceOwner: user.orgId ?? "" };
  return countedCheckEvents(base, factorCount(user, factor), passed, policy, now, {
    failed: UserEvent.factorCheckFailed,
    succeeded: UserEvent.factorCheckSucceeded,
    payload: { factor },
  });
}
