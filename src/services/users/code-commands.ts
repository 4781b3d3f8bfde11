/**
 * The decisions of the user operations with one-time codes, shared by the users API (./codes.ts) and the
 * login UI's pages (src/login/steps/password-reset.ts, verify-email.ts, invite.ts), so a code made or
 * checked through either is the same command: its event and its outbox row in one transaction, the per-user
 * rate limit and the counted wrong tries decided under the user aggregate's optimistic lock.
 */
import {
  addCodeEvent,
  type CodeChannel,
  checkCode,
  codeHash,
  MAX_CODES_PER_WINDOW,
  newCode,
  RATE_WINDOW_MS,
} from "../../domain/user/codes.ts";
import { requireHuman, setPasswordEvents, type UserAggregate } from "../../domain/user/commands.ts";
import { type PasswordCodeReason, UserEvent } from "../../domain/user/events.ts";
import { FailedPreconditionError, InternalError, type InvalidArgumentError } from "../../errors.ts";
import type { CommandTx, NewEvent } from "../../eventstore/types.ts";
import type { NotificationDelivery } from "../../notifications/delivery.ts";
import { activeProvider } from "../../query/notification-providers.ts";
import type { Queryable } from "../../storage/database.ts";

export interface CodeDeps {
  config: { notification: { codeTtlSeconds: number } };
  masterKey: Buffer;
  messages?: NotificationDelivery;
}

export type CodeMessage = "VERIFY_EMAIL" | "VERIFY_PHONE" | "PASSWORD_RESET" | "INIT";
const MESSAGE = { email: "VERIFY_EMAIL", phone: "VERIFY_PHONE" } as const;
const NAME = { email: "e-mail address", phone: "phone number" } as const;
const REASON_MESSAGE = { reset: "PASSWORD_RESET", invite: "INIT" } as const;
const PROVIDER = { email: "smtp", phone: "sms", password: "smtp" } as const;

/** A made code: its event (to append) and the code in clear (answered only with `returnCode`). */
export interface MadeCode {
  event: NewEvent;
  code: string;
}

export class UserCodes {
  constructor(private readonly deps: CodeDeps) {}

  /** The stored form of a code of `channel` for the user (HMAC under the master key, ../../domain/user/codes.ts). */
  hashOf(instanceId: string, userId: string, channel: CodeChannel) {
    return (code: string, target: string) =>
      codeHash(this.deps.masterKey, { instanceId, userId, channel, target }, code);
  }

  /** Whether a provider of the channel is active now: a message queued without one is recorded FAILED. */
  async providerActive(db: Queryable, instanceId: string, channel: CodeChannel): Promise<boolean> {
    return (await activeProvider(db, instanceId, PROVIDER[channel])) !== undefined;
  }

  /** A new code of `channel` for `user` (its event), queued in a `type` message unless `returnCode`. */
  async makeCode(
    tx: CommandTx,
    instanceId: string,
    user: UserAggregate,
    channel: CodeChannel,
    target: string,
    returnCode: boolean,
    type: CodeMessage,
    reason?: PasswordCodeReason,
  ): Promise<MadeCode> {
    const messages = this.deps.messages;
    if (!messages) throw new InternalError("notification delivery is not set up");
    const code = newCode(channel);
    const ttl = this.deps.config.notification.codeTtlSeconds;
    const event = addCodeEvent(user, channel, {
      code_hash: this.hashOf(instanceId, user.id, channel)(code, target),
      expires_at: new Date(Date.now() + ttl * 1000).toISOString(),
      target,
      sent: !returnCode,
      ...(reason ? { reason } : {}),
    });
    if (!returnCode)
      await messages.queue(tx, {
        instanceId,
        userId: user.id,
        type,
        recipient: target,
        language: user.profile.preferred_language ?? undefined,
        origin: await messages.originOf(tx, instanceId),
        code: { value: code, expiresIn: ttl },
      });
    return { event, code };
  }

  /** SendEmailCode / SendPhoneCode: a code for the user's address of `channel` (FAILED_PRECONDITION without). */
  async channelCode(
    tx: CommandTx,
    instanceId: string,
    user: UserAggregate,
    channel: "email" | "phone",
    returnCode: boolean,
  ): Promise<MadeCode> {
    requireHuman(user, "verification codes");
    const target = channel === "email" ? user.email : user.phone;
    if (!target) throw new FailedPreconditionError(`the user has no ${NAME[channel]}`);
    return this.makeCode(tx, instanceId, user, channel, target, returnCode, MESSAGE[channel]);
  }

  /**
   * RequestPasswordReset / InviteUser: a password code by e-mail, a reset (PASSWORD_RESET) or an
   * invitation (INIT, only for a user without a password). A reset is e-mailed only to a verified address
   * (as ZITADEL and Keycloak do): an address set without proof (the account page's change, a patch) may be
   * anyone's, and the reset would hand them the account. Answered instead (`returnCode`), the code goes to
   * no address. An invitation goes to the unverified address it proves.
   */
  async passwordCode(
    tx: CommandTx,
    instanceId: string,
    user: UserAggregate,
    reason: PasswordCodeReason,
    returnCode: boolean,
  ): Promise<MadeCode> {
    requireHuman(user, "passwords");
    if (!user.email) throw new FailedPreconditionError("the user has no e-mail address");
    if (reason === "invite" && user.passwordHash)
      throw new FailedPreconditionError("the user has a password: request a password reset instead");
    if (reason === "reset" && !returnCode && !user.emailVerified)
      throw new FailedPreconditionError(
        "the user's e-mail address is not verified: a password reset is sent only to a verified address",
      );
    return this.makeCode(
      tx,
      instanceId,
      user,
      "password",
      user.email,
      returnCode,
      REASON_MESSAGE[reason],
      reason,
    );
  }

  /**
   * VerifyEmail / VerifyPhone: the verified event when `code` matches; else the counted wrong try (to append
   * before the refusal is answered) and the error.
   */
  verifyChannel(
    instanceId: string,
    user: UserAggregate,
    channel: "email" | "phone",
    code: string,
  ): { ok: true; events: NewEvent[] } | { ok: false; events: NewEvent[]; error: InvalidArgumentError } {
    requireHuman(user, "verification codes");
    const checked = checkCode(user, channel, code, this.hashOf(instanceId, user.id, channel));
    if ("verified" in checked) return { ok: true, events: checked.verified };
    return { ok: false, events: checked.failed ? [checked.failed] : [], error: checked.error };
  }

  /**
   * For SetPassword with a `verification_code`: checks the user's password code, in the command, so the
   * check and the change it allows are one decision. `reason`: only a code of that kind (the login UI's
   * reset and invitation pages); absent, either (the users API). When it matches: the events of what it
   * proves besides (an invitation's verifies the e-mail address), to append with the change. When it does
   * not: the events to append (the counted wrong try) and the error to answer after them.
   */
  checkPasswordCode(
    instanceId: string,
    user: UserAggregate,
    code: string,
    reason?: PasswordCodeReason,
  ): { ok: true; events: NewEvent[] } | { ok: false; events: NewEvent[]; error: InvalidArgumentError } {
    const checked = checkCode(user, "password", code, this.hashOf(instanceId, user.id, "password"), {
      reason,
    });
    if ("verified" in checked) return { ok: true, events: checked.verified };
    return { ok: false, events: checked.failed ? [checked.failed] : [], error: checked.error };
  }

  /**
   * SetPassword with a code (of `reason`, or either kind): the change when the code matches (it uses the
   * code up), with what the code proves besides; else the wrong try.
   */
  setPasswordWithCode(
    instanceId: string,
    user: UserAggregate,
    code: string,
    passwordHash: string,
    options: { reason?: PasswordCodeReason; changeRequired?: boolean } = {},
  ): { ok: true; events: NewEvent[] } | { ok: false; events: NewEvent[]; error: InvalidArgumentError } {
    const checked = this.checkPasswordCode(instanceId, user, code, options.reason);
    if (!checked.ok) return checked;
    return {
      ok: true,
      events: [...checked.events, ...setPasswordEvents(user, passwordHash, options.changeRequired ?? false)],
    };
  }

  /**
   * The codes a change of the user sends: a changed e-mail address or phone number left unverified gets a
   * code when a provider of its channel is active (not beyond the rate limit: the change itself goes on).
   * `events` are the change's events, `user` the aggregate before them.
   */
  async codesOnChange(
    tx: CommandTx,
    instanceId: string,
    user: UserAggregate,
    events: NewEvent[],
  ): Promise<NewEvent[]> {
    const changed = events.find((e) => e.type === UserEvent.changed)?.payload as
      | { email?: string; email_verified?: boolean; phone?: string | null; phone_verified?: boolean }
      | undefined;
    if (!changed) return [];
    // unverified after the change: the event names only what differs, so an address replacing an
    // unverified one (or a first phone number) carries no `*_verified` member
    const emailVerified = changed.email_verified ?? user.emailVerified;
    const phoneVerified = changed.phone_verified ?? user.phoneVerified;
    return this.codesForUnverified(tx, instanceId, user, {
      email: changed.email !== undefined && !emailVerified ? changed.email : undefined,
      phone: changed.phone && !phoneVerified ? changed.phone : undefined,
    });
  }

  /**
   * A code for each unverified address given (the user's new e-mail address or phone number), sent when a
   * provider of its channel is active, within the rate limit. `user` is the aggregate before the change.
   */
  async codesForUnverified(
    tx: CommandTx,
    instanceId: string,
    user: UserAggregate,
    unverified: { email?: string; phone?: string },
  ): Promise<NewEvent[]> {
    const recent = user.codeTimes.filter((t) => Date.now() - t.getTime() < RATE_WINDOW_MS).length;
    const out: NewEvent[] = [];
    for (const channel of ["email", "phone"] as const) {
      const target = unverified[channel];
      if (!target || recent + out.length >= MAX_CODES_PER_WINDOW) continue;
      if (!(await this.providerActive(tx, instanceId, channel))) continue;
      // the code proves the new address: the aggregate as it is after the change
      const after = { ...user, [channel]: target, codeTimes: user.codeTimes };
      out.push((await this.makeCode(tx, instanceId, after, channel, target, false, MESSAGE[channel])).event);
    }
    return out;
  }
}
