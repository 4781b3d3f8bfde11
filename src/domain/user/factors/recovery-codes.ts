/**
 * Recovery codes: ten random codes shown once when made, stored only as keyed hashes (HMAC-SHA256 under
 * the master key, bound to the instance and the user), each accepted once. New codes replace all earlier
 * ones. A code is typed as shown (`XXXXX-XXXXX`); dashes, spaces and case do not matter.
 */
import { createHmac, randomInt, timingSafeEqual } from "node:crypto";
import { InvalidArgumentError, NotFoundError } from "../../../errors.ts";
import type { NewEvent } from "../../../eventstore/types.ts";
import { SessionEvent } from "../../session/events.ts";
import type { FactorCheck } from "../../session/factors.ts";
import { type RecoveryCodesGeneratedPayload, type RecoveryCodeUsedPayload, UserEvent } from "../events.ts";
import { activeFactor, checkedEvent, factorUserEvent, type UserFactorRow } from "./common.ts";

/** Codes made at once. */
export const RECOVERY_CODE_COUNT = 10;
/** Without look-alikes (no 0/O, 1/I/L): 10 characters of 31, about 50 bits. */
const ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789";
const HALF = 5;

/** The form a code is compared in: upper case, without dashes and spaces. */
const normalize = (code: string) => code.replace(/[\s-]/g, "").toUpperCase();

function recoveryHash(masterKey: Buffer, instanceId: string, userId: string, code: string): string {
  return createHmac("sha256", masterKey)
    .update(["platform recovery code v1", instanceId, userId, normalize(code)].join("\u0000"))
    .digest("base64url");
}

/** GenerateRecoveryCodes: RECOVERY_CODE_COUNT new codes (to show once) and the event of their hashes. */
export function generateRecoveryCodes(
  masterKey: Buffer,
  instanceId: string,
  userId: string,
  orgId: string,
): { codes: string[]; event: NewEvent } {
  const codes = Array.from({ length: RECOVERY_CODE_COUNT }, () => {
    const chars = Array.from({ length: 2 * HALF }, () => ALPHABET[randomInt(ALPHABET.length)]).join("");
    return `${chars.slice(0, HALF)}-${chars.slice(HALF)}`;
  });
  const payload: RecoveryCodesGeneratedPayload = {
    hashes: codes.map((code) => recoveryHash(masterKey, instanceId, userId, code)),
  };
  return { codes, event: factorUserEvent(userId, orgId, UserEvent.recoveryCodesGenerated, { ...payload }) };
}

/** RemoveRecoveryCodes: NOT_FOUND when the user has none. */
export function removeRecoveryCodesEvents(userId: string, orgId: string, current: UserFactorRow | undefined) {
  if (!current) throw new NotFoundError("the user has no recovery codes");
  return [factorUserEvent(userId, orgId, UserEvent.recoveryCodesRemoved)];
}

/** The codes not used yet of a user's recovery codes row. */
export function remainingRecoveryCodes(factor: UserFactorRow | undefined): number {
  if (!factor) return 0;
  const hashes = Array.isArray(factor.data.hashes) ? factor.data.hashes.length : 0;
  const used = Array.isArray(factor.data.used) ? factor.data.used.length : 0;
  return Math.max(0, hashes - used);
}

/** `checks.recovery_code`: a code of the user's current ones, not used before. */
export function recoveryCodeCheck(masterKey: Buffer, code: string): FactorCheck {
  return {
    factor: "recovery_code",
    async check(ctx) {
      const factor = await activeFactor(ctx, "recovery_codes", "recovery codes");
      const hashes = (factor.data.hashes as string[] | undefined) ?? [];
      const used = new Set((factor.data.used as number[] | undefined) ?? []);
      const given = Buffer.from(recoveryHash(masterKey, ctx.instanceId, ctx.userId, code));
      // every code is compared (constant time each), so the time taken does not tell which one matched
      let index = -1;
      hashes.forEach((hash, i) => {
        const stored = Buffer.from(hash);
        if (stored.length === given.length && timingSafeEqual(stored, given) && !used.has(i)) index = i;
      });
      if (index < 0)
        return {
          passed: false,
          events: [],
          error: new InvalidArgumentError("is wrong or used", "checks.recovery_code.code"),
        };
      const payload: RecoveryCodeUsedPayload = { index };
      return {
        passed: true,
        events: [
          factorUserEvent(ctx.userId, ctx.orgId, UserEvent.recoveryCodeUsed, { ...payload }),
          checkedEvent(ctx, SessionEvent.recoveryCodeChecked),
        ],
      };
    },
  };
}
