/**
 * Verification codes of a user's e-mail address and phone number (docs/notifications.md "Codes and user
 * operations"): random, stored as a keyed hash in the code's event, single use, valid for a configured
 * time, invalidated by MAX_FAILURES wrong tries, rate-limited per user.
 */
import { createHmac, randomInt, timingSafeEqual } from "node:crypto";
import { InvalidArgumentError, ResourceExhaustedError } from "../../errors.ts";
import type { NewEvent } from "../../eventstore/types.ts";
import { type OpenCode, type UserAggregate, userEvent } from "./aggregate.ts";
import { type CodeAddedPayload, type PasswordCodeReason, UserEvent } from "./events.ts";

/**
 * What a code proves: the e-mail address, the phone number, or the right to set a password (by e-mail; a
 * reset's or an invitation's, which the code's event records as its `reason`).
 */
export type CodeChannel = "email" | "phone" | "password";

/** Wrong tries that invalidate a code. */
export const MAX_FAILURES = 5;
/** Codes a user may be sent per RATE_WINDOW_MS (all channels together): 429 beyond. */
export const MAX_CODES_PER_WINDOW = 3;
export const RATE_WINDOW_MS = 60_000;

/** E-mail codes: 8 characters without look-alikes (no 0/O, 1/I/L), about 40 bits. */
const EMAIL_ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789";
const EMAIL_LENGTH = 8;
/** SMS codes: 6 digits, typed on a phone's keypad. */
const SMS_LENGTH = 6;

const EVENTS = {
  email: {
    added: UserEvent.emailCodeAdded,
    failed: UserEvent.emailCodeCheckFailed,
    verified: UserEvent.emailVerified,
  },
  phone: {
    added: UserEvent.phoneCodeAdded,
    failed: UserEvent.phoneCodeCheckFailed,
    verified: UserEvent.phoneVerified,
  },
  // a password code is used by the password change it allows (`user.password.changed`); an invitation's
  // also verifies the e-mail address (`provenBy`)
  password: {
    added: UserEvent.passwordCodeAdded,
    failed: UserEvent.passwordCodeCheckFailed,
  },
} as const;

/** A new random code of the channel. */
export function newCode(channel: CodeChannel): string {
  if (channel === "phone") return Array.from({ length: SMS_LENGTH }, () => String(randomInt(10))).join("");
  return Array.from({ length: EMAIL_LENGTH }, () => EMAIL_ALPHABET[randomInt(EMAIL_ALPHABET.length)]).join(
    "",
  );
}

/**
 * The stored form of a code: HMAC-SHA256 under the master key, bound to the instance, the user, the
 * channel and the address, so a code (or its hash) of one user or address never verifies another, and a
 * leaked event log alone cannot be searched for the code (it is short: a plain hash could be).
 */
export function codeHash(
  masterKey: Buffer,
  scope: { instanceId: string; userId: string; channel: CodeChannel; target: string },
  code: string,
): string {
  return createHmac("sha256", masterKey)
    .update(
      ["platform user code v1", scope.instanceId, scope.userId, scope.channel, scope.target, code].join(
        "\u0000",
      ),
    )
    .digest("base64url");
}

/** The event of a new code (RESOURCE_EXHAUSTED when the user was sent MAX_CODES_PER_WINDOW lately). */
export function addCodeEvent(
  user: UserAggregate,
  channel: CodeChannel,
  payload: CodeAddedPayload,
  now = Date.now(),
): NewEvent {
  const recent = user.codeTimes.filter((t) => now - t.getTime() < RATE_WINDOW_MS).length;
  if (recent >= MAX_CODES_PER_WINDOW)
    throw new ResourceExhaustedError(
      `at most ${MAX_CODES_PER_WINDOW} verification codes per minute for a user: try again later`,
    );
  return userEvent(user, EVENTS[channel].added, { ...payload });
}

/**
 * Checks `code` against the user's open code of the channel: `verified` (the events of what the code
 * proves) when it matches; the failed try's event and the error to answer when it does not (the caller
 * appends the event, then throws); the error alone when no code can match (none, expired, used up, another
 * address, or a password code of another `reason` than the one asked for).
 *
 * What a matching code proves: an e-mail or phone code its address (the channel's verified event); an
 * invitation's password code the e-mail address too (it was sent there), so the address becomes verified
 * when it is not yet; a reset's password code nothing beyond the password change it allows.
 */
export function checkCode(
  user: UserAggregate,
  channel: CodeChannel,
  code: string,
  /** The stored form of `code` for the address the open code proves (`codeHash`). */
  hashOf: (code: string, target: string) => string,
  options: {
    /**
     * Password codes: only a code made for this reason matches; one of the other kind is refused as if
     * none were open, without comparing it or counting a wrong try. Absent: either kind.
     */
    reason?: PasswordCodeReason;
    now?: number;
  } = {},
): { verified: NewEvent[] } | { failed?: NewEvent; error: InvalidArgumentError } {
  const now = options.now ?? Date.now();
  const open = user.codes[channel];
  const invalid = new InvalidArgumentError("is wrong or expired", "verification_code");
  const current = channel === "phone" ? user.phone : user.email;
  if (!open || open.failures >= MAX_FAILURES || open.expiresAt.getTime() <= now || open.target !== current)
    return { error: invalid };
  if (channel === "password" && options.reason && (open.reason ?? "reset") !== options.reason)
    return { error: invalid };
  const given = Buffer.from(hashOf(code, open.target));
  const stored = Buffer.from(open.hash);
  // constant time: the comparison takes as long wherever the first differing byte is
  if (given.length === stored.length && timingSafeEqual(given, stored))
    return { verified: provenBy(user, channel, open) };
  return { failed: userEvent(user, EVENTS[channel].failed, {}), error: invalid };
}

/** The verified events of a matching open code (see `checkCode`). */
function provenBy(user: UserAggregate, channel: CodeChannel, open: OpenCode): NewEvent[] {
  if (channel === "password") {
    // an invitation reached the person at the address: as good as an e-mail code (ZITADEL's init does so)
    if (open.reason !== "invite" || user.emailVerified) return [];
    return [userEvent(user, UserEvent.emailVerified, { target: open.target })];
  }
  return [userEvent(user, EVENTS[channel].verified, { target: open.target })];
}
