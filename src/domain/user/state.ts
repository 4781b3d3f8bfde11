/** The state changes of a user: locking, unlocking, deactivating and reactivating. */
import { FailedPreconditionError } from "../../errors.ts";
import type { NewEvent } from "../../eventstore/types.ts";
import { type UserAggregate, userEvent } from "./aggregate.ts";
import { UserEvent, UserState } from "./events.ts";

export type StateAction = "lock" | "unlock" | "deactivate" | "reactivate";

const transitions: Record<StateAction, { from: number; event: string; describe: string }> = {
  lock: { from: UserState.active, event: UserEvent.locked, describe: "only an active user can be locked" },
  unlock: {
    from: UserState.locked,
    event: UserEvent.unlocked,
    describe: "the user is neither locked nor locked out of password or second-factor checks",
  },
  deactivate: {
    from: UserState.active,
    event: UserEvent.deactivated,
    describe: "only an active user can be deactivated",
  },
  reactivate: {
    from: UserState.inactive,
    event: UserEvent.reactivated,
    describe: "the user is not inactive",
  },
};

/**
 * lock: ACTIVE → LOCKED, unlock: LOCKED → ACTIVE, deactivate: ACTIVE → INACTIVE, reactivate: INACTIVE →
 * ACTIVE. Unlock also ends a temporary lockout of the password or of a second factor lasting at `now`
 * (the user is ACTIVE then), and either way resets the counts of wrong passwords and second-factor answers.
 */
export function changeStateEvents(user: UserAggregate, action: StateAction, now = new Date()): NewEvent[] {
  const t = transitions[action];
  const lasting = (until: Date | undefined) => until !== undefined && until.getTime() > now.getTime();
  const lockedOut =
    action === "unlock" &&
    user.state === UserState.active &&
    [user.passwordLockedUntil, ...Object.values(user.factorLockedUntil)].some(lasting);
  if (user.state !== t.from && !lockedOut) throw new FailedPreconditionError(t.describe);
  return [userEvent(user, t.event)];
}
