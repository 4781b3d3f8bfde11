/**
 * One-time codes by e-mail and SMS as a second factor. Enabling one needs the user's verified e-mail
 * address or phone number. A session asks for a code with a challenge (`otp_email`, `otp_sms`): a random
 * 6-digit code, stored in `session.challenge.added` only as a keyed hash (HMAC-SHA256 under the master key,
 * bound to the instance, the session, the channel and the address), valid OTP_CODE_TTL_SECONDS, sent
 * through the notification outbox (OTP_EMAIL, OTP_SMS) or returned to the caller. Sends are bounded per
 * user and per recipient (./otp-sends.ts). Five wrong codes remove the challenge (the session commands
 * count them).
 */
import { createHmac, randomInt, timingSafeEqual } from "node:crypto";
import {
  AlreadyExistsError,
  FailedPreconditionError,
  InternalError,
  InvalidArgumentError,
  NotFoundError,
} from "../../../errors.ts";
import type { NewEvent } from "../../../eventstore/types.ts";
import type { NotificationDelivery } from "../../../notifications/delivery.ts";
import type { Queryable } from "../../../storage/database.ts";
import { sessionEvent } from "../../session/commands.ts";
import { SessionEvent } from "../../session/events.ts";
import type { ChallengeMaker, FactorCheck } from "../../session/factors.ts";
import { UserEvent } from "../events.ts";
import { activeFactor, checkedEvent, factorUserEvent, type UserFactorRow } from "./common.ts";
import { boundOtpSends } from "./otp-sends.ts";

export type OtpChannel = "otp_email" | "otp_sms";

/** How long a challenge's code is valid. */
export const OTP_CODE_TTL_SECONDS = 300;
const CODE_DIGITS = 6;

const CHANNEL = {
  otp_email: {
    added: UserEvent.otpEmailAdded,
    removed: UserEvent.otpEmailRemoved,
    checked: SessionEvent.otpEmailChecked,
    message: "OTP_EMAIL",
    what: "verified e-mail address",
    name: "e-mail code second factor",
  },
  otp_sms: {
    added: UserEvent.otpSmsAdded,
    removed: UserEvent.otpSmsRemoved,
    checked: SessionEvent.otpSmsChecked,
    message: "OTP_SMS",
    what: "verified phone number",
    name: "SMS code second factor",
  },
} as const;

/** The user's contact as the read model has it (what the channels need). */
export interface OtpContact {
  email: string | null;
  emailVerified: boolean;
  phone: string | null;
  phoneVerified: boolean;
  language: string | null;
}

/** The user's e-mail address and phone number with their verification (users read model). */
export async function readContact(q: Queryable, instanceId: string, userId: string): Promise<OtpContact> {
  const [row] = await q.query<{
    email: string | null;
    email_verified: boolean | null;
    phone: string | null;
    phone_verified: boolean | null;
    preferred_language: string | null;
  }>(
    `SELECT email, email_verified, phone, phone_verified, preferred_language FROM users
     WHERE instance_id = $1 AND id = $2`,
    [instanceId, userId],
  );
  return {
    email: row?.email || null,
    emailVerified: row?.email_verified === true,
    phone: row?.phone || null,
    phoneVerified: row?.phone_verified === true,
    language: row?.preferred_language ?? null,
  };
}

/** The verified address or number of the channel; undefined when there is none. */
function verifiedTarget(contact: OtpContact, channel: OtpChannel): string | undefined {
  if (channel === "otp_email") return contact.emailVerified && contact.email ? contact.email : undefined;
  return contact.phoneVerified && contact.phone ? contact.phone : undefined;
}

/**
 * AddOTPEmail / AddOTPSMS: FAILED_PRECONDITION without a verified address (number), ALREADY_EXISTS when
 * enabled already (as ZITADEL answers).
 */
export function addOtpEvents(
  userId: string,
  orgId: string,
  channel: OtpChannel,
  contact: OtpContact,
  current: UserFactorRow | undefined,
): NewEvent[] {
  if (!verifiedTarget(contact, channel))
    throw new FailedPreconditionError(`the user has no ${CHANNEL[channel].what}`);
  if (current) throw new AlreadyExistsError(`the ${CHANNEL[channel].name} is enabled already`);
  return [factorUserEvent(userId, orgId, CHANNEL[channel].added, {})];
}

/** RemoveOTPEmail / RemoveOTPSMS: NOT_FOUND when not enabled. */
export function removeOtpEvents(
  userId: string,
  orgId: string,
  channel: OtpChannel,
  current: UserFactorRow | undefined,
): NewEvent[] {
  if (!current) throw new NotFoundError(`the ${CHANNEL[channel].name} is not enabled`);
  return [factorUserEvent(userId, orgId, CHANNEL[channel].removed)];
}

function otpHash(
  masterKey: Buffer,
  scope: { instanceId: string; sessionId: string; channel: OtpChannel; target: string },
  code: string,
): string {
  return createHmac("sha256", masterKey)
    .update(
      ["platform session otp v1", scope.instanceId, scope.sessionId, scope.channel, scope.target, code].join(
        "\u0000",
      ),
    )
    .digest("base64url");
}

/** What the session's challenge of a channel carries (`session.challenge.added`). */
interface OtpChallengePayload {
  code_hash: string;
  target: string;
  expires_at: string;
}

export interface OtpChallengeDeps {
  masterKey: Buffer;
  messages?: NotificationDelivery;
}

/**
 * `challenges.otp_email` / `challenges.otp_sms`: a new code for the session (it replaces an open one),
 * returned with `returnCode`, else queued in an OTP_EMAIL / OTP_SMS message to the verified address —
 * within the bound of sends (RESOURCE_EXHAUSTED beyond it, nothing queued).
 */
export function otpChallenge(
  deps: OtpChallengeDeps,
  channel: OtpChannel,
  returnCode: boolean,
): ChallengeMaker {
  return {
    type: channel,
    async make(ctx) {
      await activeFactor(ctx, channel, CHANNEL[channel].name);
      const contact = await readContact(ctx.tx, ctx.instanceId, ctx.userId);
      const target = verifiedTarget(contact, channel);
      if (!target) throw new FailedPreconditionError(`the user has no ${CHANNEL[channel].what}`);
      const code = Array.from({ length: CODE_DIGITS }, () => String(randomInt(10))).join("");
      const payload: OtpChallengePayload = {
        code_hash: otpHash(
          deps.masterKey,
          { instanceId: ctx.instanceId, sessionId: ctx.sessionId, channel, target },
          code,
        ),
        target,
        expires_at: new Date(ctx.now.getTime() + OTP_CODE_TTL_SECONDS * 1000).toISOString(),
      };
      if (!returnCode) {
        const messages = deps.messages;
        if (!messages) throw new InternalError("notification delivery is not set up");
        const type = CHANNEL[channel].message;
        await boundOtpSends(ctx.tx, {
          instanceId: ctx.instanceId,
          userId: ctx.userId,
          type,
          recipient: target,
        });
        await messages.queue(ctx.tx, {
          instanceId: ctx.instanceId,
          userId: ctx.userId,
          type,
          recipient: target,
          language: contact.language ?? undefined,
          origin: await messages.originOf(ctx.tx, ctx.instanceId),
          code: { value: code, expiresIn: OTP_CODE_TTL_SECONDS },
        });
      }
      return {
        events: [
          sessionEvent(ctx.sessionId, ctx.orgId, SessionEvent.challengeAdded, { type: channel, ...payload }),
        ],
        answer: returnCode ? code : "",
      };
    },
  };
}

/**
 * `checks.otp_email` / `checks.otp_sms`: the code of the session's open challenge of the channel. No open
 * challenge (never asked for, used, expired, or removed by five wrong codes) or a changed address:
 * FAILED_PRECONDITION, not counted. A wrong code: INVALID_ARGUMENT, counted on the challenge and towards the
 * lockout.
 */
export function otpCheck(masterKey: Buffer, channel: OtpChannel, code: string): FactorCheck {
  return {
    factor: channel,
    async check(ctx) {
      await activeFactor(ctx, channel, CHANNEL[channel].name);
      const challenge = ctx.challenges[channel];
      const open = challenge?.payload as OtpChallengePayload | undefined;
      if (!open || new Date(open.expires_at).getTime() <= ctx.now.getTime())
        throw new FailedPreconditionError(`no open ${channel} challenge: ask for a new code`);
      const contact = await readContact(ctx.tx, ctx.instanceId, ctx.userId);
      if (verifiedTarget(contact, channel) !== open.target)
        throw new FailedPreconditionError(`no open ${channel} challenge: ask for a new code`);
      const given = Buffer.from(
        otpHash(
          masterKey,
          { instanceId: ctx.instanceId, sessionId: ctx.sessionId, channel, target: open.target },
          code.trim(),
        ),
      );
      const stored = Buffer.from(open.code_hash);
      if (given.length === stored.length && timingSafeEqual(given, stored))
        return { passed: true, events: [checkedEvent(ctx, CHANNEL[channel].checked)] };
      return {
        passed: false,
        events: [
          sessionEvent(ctx.sessionId, ctx.orgId, SessionEvent.challengeCheckFailed, { type: channel }),
        ],
        error: new InvalidArgumentError("is wrong or expired", `checks.${channel}.code`),
      };
    },
  };
}
