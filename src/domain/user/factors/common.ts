/**
 * What the second-factor modules of this folder share: the user's factor rows read inside a command (the
 * `user_factors` read model is kept in step in the command's transaction, and the user's version is the
 * command's optimistic lock), and the event helpers.
 */
import { FailedPreconditionError } from "../../../errors.ts";
import type { NewEvent } from "../../../eventstore/types.ts";
import { type UserFactorRow, userFactor } from "../../../query/user-factors.ts";
import type { Queryable } from "../../../storage/database.ts";
import { sessionEvent } from "../../session/commands.ts";
import type { FactorContext } from "../../session/factors.ts";
import { USER } from "../events.ts";

export type { UserFactorRow } from "../../../query/user-factors.ts";

/** An event on the user `userId` of `orgId`. */
export function factorUserEvent(
  userId: string,
  orgId: string,
  type: string,
  payload: Record<string, unknown> | null = null,
): NewEvent {
  return { aggregateType: USER, aggregateId: userId, resourceOwner: orgId, type, payload };
}

/** An event on the session of a factor check. */
export const checkedEvent = (ctx: FactorContext, type: string): NewEvent =>
  sessionEvent(ctx.sessionId, ctx.orgId, type, null);

/** The user's factor `id` (`totp`, `otp_email`, `otp_sms`, `recovery_codes`); undefined when none. */
export function readFactor(
  q: Queryable,
  instanceId: string,
  userId: string,
  id: "totp" | "otp_email" | "otp_sms" | "recovery_codes",
): Promise<UserFactorRow | undefined> {
  return userFactor(q, instanceId, userId, id);
}

/** The active factor `id` of the session's user, FAILED_PRECONDITION when the user has not activated it. */
export async function activeFactor(
  ctx: FactorContext,
  id: "totp" | "otp_email" | "otp_sms" | "recovery_codes",
  name: string,
): Promise<UserFactorRow> {
  const factor = await readFactor(ctx.tx, ctx.instanceId, ctx.userId, id);
  if (!factor?.active) throw new FailedPreconditionError(`the user has no active ${name}`);
  return factor;
}
