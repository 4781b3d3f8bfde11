/**
 * What the session commands know of a user: finding the user a user check names (`findUser`), and the
 * facts a check decides from (`UserForCheck`), folded from the user's events (`foldUser`, pure) or read
 * from the users read model with the database's clock (`userForCheck`). ./commands.ts runs the checks.
 */
import { FailedPreconditionError, NotFoundError } from "../../errors.ts";
import { lastSequenceSql } from "../../eventstore/eventstore.ts";
import type { StoredEvent } from "../../eventstore/types.ts";
import type { Queryable } from "../../storage/database.ts";
import { type SecondFactor, USER, UserEvent, UserState, UserType } from "../user/events.ts";
import { usernameKey } from "../user/username.ts";
import {
  type FactorLockoutState,
  type FactorLockouts,
  type LockoutState,
  lockedOutUntil,
} from "./lockout.ts";

/** How a user check names the user. */
export type UserCheck = { userId: string } | { loginName: string };

/** A user found by a user check. */
export interface CheckedUser {
  id: string;
  orgId: string;
  /**
   * The user's check facts as `findUser` read them with the user (outside any transaction): a password
   * check verifies against these first instead of reading them again (the transaction re-reads and decides).
   */
  read?: UserForCheck & { now: Date };
}

/** What the session checks need to know about a user, folded from its events. */
export interface UserForCheck extends LockoutState, FactorLockoutState {
  exists: boolean;
  type?: number;
  state: number;
  orgId?: string;
  passwordHash?: string;
  /** The password was set with `change_required` (the login UI asks for a new one first). */
  passwordChangeRequired?: boolean;
}

export function foldUser(events: readonly StoredEvent[]): UserForCheck {
  const user: UserForCheck = { exists: false, state: UserState.active, failedAttempts: 0 };
  const resetFailures = () => {
    user.failedAttempts = 0;
    user.lockedUntil = undefined;
  };
  const lockedUntilOf = (e: StoredEvent) => {
    const until = e.payload?.locked_until;
    return typeof until === "string" ? new Date(until) : undefined;
  };
  for (const e of events) {
    switch (e.type) {
      case UserEvent.humanAdded:
      case UserEvent.machineAdded:
        user.exists = true;
        user.type = e.type === UserEvent.humanAdded ? UserType.human : UserType.machine;
        user.state = UserState.active;
        user.orgId = e.resourceOwner;
        user.passwordHash = (e.payload?.password_hash as string | undefined) ?? undefined;
        user.passwordChangeRequired = e.payload?.password_change_required === true;
        resetFailures();
        user.factorLockouts = {};
        break;
      case UserEvent.passwordChanged:
        user.passwordHash = (e.payload?.password_hash as string | undefined) ?? undefined;
        user.passwordChangeRequired = e.payload?.change_required === true;
        resetFailures();
        break;
      case UserEvent.passwordCheckFailed:
        user.failedAttempts++;
        user.lockedUntil = lockedUntilOf(e);
        break;
      case UserEvent.passwordCheckSucceeded:
        resetFailures();
        break;
      // each second factor counts on its own, reset only by a right answer of it (and an unlock)
      case UserEvent.factorCheckFailed: {
        const factor = e.payload?.factor as SecondFactor;
        const failedAttempts = (user.factorLockouts?.[factor]?.failedAttempts ?? 0) + 1;
        user.factorLockouts = {
          ...user.factorLockouts,
          [factor]: { failedAttempts, lockedUntil: lockedUntilOf(e) },
        };
        break;
      }
      case UserEvent.factorCheckSucceeded: {
        const { [e.payload?.factor as SecondFactor]: _reset, ...others } = user.factorLockouts ?? {};
        user.factorLockouts = others;
        break;
      }
      case UserEvent.locked:
        user.state = UserState.locked;
        break;
      case UserEvent.unlocked:
        user.state = UserState.active;
        resetFailures();
        user.factorLockouts = {};
        break;
      case UserEvent.deactivated:
        user.state = UserState.inactive;
        break;
      case UserEvent.reactivated:
        user.state = UserState.active;
        break;
      case UserEvent.removed:
        user.exists = false;
        break;
    }
  }
  return user;
}

/** Throws unless the user exists and may pass checks (active). */
export function assertCheckable(user: UserForCheck): void {
  if (!user.exists) throw new NotFoundError("user not found");
  if (user.state === UserState.locked) throw new FailedPreconditionError("user is locked");
  if (user.state === UserState.inactive) throw new FailedPreconditionError("user is inactive");
}

/** The hash a password check verifies against (FAILED_PRECONDITION for machines and users without one). */
export function passwordHashOf(user: UserForCheck): string {
  if (user.type === UserType.machine) throw new FailedPreconditionError("machine users have no password");
  if (!user.passwordHash) throw new FailedPreconditionError("the user has no password");
  return user.passwordHash;
}

/**
 * Finds the user a user check names, in the read model: by ID, or by login name (`username`, or
 * `username@<primary domain of the user's org>`), compared by `usernameKey` (normalized, case folded).
 * A whole username wins over username@domain; among users whose names share a key (possible only for
 * names created before the key existed) the exact spelling typed wins, then the oldest. NOT_FOUND
 * "user not found" otherwise.
 */
export async function findUser(db: Queryable, instanceId: string, check: UserCheck): Promise<CheckedUser> {
  let rows: Array<{ id: string; org_id: string } & Partial<CheckRow>>;
  if ("userId" in check) {
    rows = await db.query("SELECT id, org_id FROM users WHERE instance_id = $1 AND id = $2", [
      instanceId,
      check.userId,
    ]);
  } else {
    const name = check.loginName;
    // fullwidth ＠ is an @ too
    const normalized = name.normalize("NFKC");
    const at = normalized.lastIndexOf("@");
    rows = await db.query(
      `SELECT u.id, u.org_id, ${CHECK_COLUMNS} FROM users u JOIN orgs o ON o.instance_id = u.instance_id AND o.id = u.org_id
       WHERE u.instance_id = $1
         AND (u.username_key = $2
              OR (u.username_key = $3 AND o.primary_domain <> '' AND lower(o.primary_domain) = $4))
       ORDER BY (u.username_key = $2) DESC, (u.username IN ($5, $6)) DESC, u.created_at, u.id LIMIT 1`,
      [
        instanceId,
        usernameKey(name),
        at > 0 ? usernameKey(normalized.slice(0, at)) : null,
        at > 0 ? normalized.slice(at + 1).toLowerCase() : null,
        name,
        at > 0 ? normalized.slice(0, at) : name,
      ],
    );
  }
  if (rows.length === 0) throw new NotFoundError("user not found");
  const row = rows[0];
  return {
    id: row.id,
    orgId: row.org_id,
    read: row.now === undefined ? undefined : toUserForCheck(row as CheckRow),
  };
}

/** The users read model's columns of a check (`u`), with the database's clock. */
const CHECK_COLUMNS = `u.type, u.state, u.org_id AS check_org_id, u.password_hash, u.password_change_required,
  u.password_failed_attempts, u.password_locked_until, u.factor_lockouts, now() AS now`;

type CheckRow = {
  type: number | null;
  state: number | null;
  check_org_id: string | null;
  password_hash: string | null;
  password_change_required: boolean | null;
  password_failed_attempts: number | null;
  password_locked_until: Date | string | null;
  /** factor → {failed_attempts, locked_until} (migration 0161). */
  factor_lockouts: Record<string, { failed_attempts?: number; locked_until?: string | null }> | string | null;
  now: Date | string;
};

/** The read model's `factor_lockouts` as the checks count them. */
function factorLockoutsOf(column: CheckRow["factor_lockouts"]): FactorLockouts {
  const raw = typeof column === "string" ? JSON.parse(column) : (column ?? {});
  const out: FactorLockouts = {};
  for (const [factor, count] of Object.entries(raw as Exclude<CheckRow["factor_lockouts"], string | null>))
    out[factor as SecondFactor] = {
      failedAttempts: Number(count.failed_attempts ?? 0),
      lockedUntil: count.locked_until ? new Date(count.locked_until) : undefined,
    };
  return out;
}

function toUserForCheck(row: CheckRow): UserForCheck & { now: Date } {
  const now = new Date(row.now);
  if (row.type === null) return { exists: false, state: UserState.active, failedAttempts: 0, now };
  return {
    exists: true,
    type: row.type,
    state: row.state ?? UserState.active,
    orgId: row.check_org_id ?? undefined,
    passwordHash: row.password_hash ?? undefined,
    passwordChangeRequired: row.password_change_required === true,
    failedAttempts: row.password_failed_attempts ?? 0,
    lockedUntil: row.password_locked_until ? new Date(row.password_locked_until) : undefined,
    factorLockouts: factorLockoutsOf(row.factor_lockouts),
    now,
  };
}

/** The same facts as `foldUser`, from the users read model, with the database's clock (`now`). */
export async function userForCheck(
  q: Queryable,
  instanceId: string,
  userId: string,
  options: { sequence?: boolean } = {},
): Promise<UserForCheck & { now: Date; sequence?: number }> {
  const rows = await q.query<CheckRow & { sequence?: number | string | null }>(
    `SELECT ${CHECK_COLUMNS}${
      // the user aggregate's last sequence, from the same snapshot (the command's optimistic lock)
      options.sequence ? `, (${lastSequenceSql("$1", "$3", "$2")}) AS sequence` : ""
    }
     FROM (SELECT 1) AS one LEFT JOIN users u ON u.instance_id = $1 AND u.id = $2`,
    options.sequence ? [instanceId, userId, USER] : [instanceId, userId],
  );
  const row = rows[0];
  const sequence = options.sequence ? Number(row.sequence ?? 0) : undefined;
  return { ...toUserForCheck(row), sequence };
}

/** Whether a password check would verify the password now (and not refuse before). */
export function passwordCheckable(
  user: UserForCheck,
  now: Date,
): user is UserForCheck & { passwordHash: string } {
  return (
    user.exists &&
    user.state === UserState.active &&
    user.type === UserType.human &&
    user.passwordHash !== undefined &&
    lockedOutUntil(user, now) === undefined
  );
}
