import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { Permission } from "../../auth/permissions.ts";
import {
  addCodeEvent,
  type CodeChannel,
  checkCode,
  codeHash,
  MAX_CODES_PER_WINDOW,
  newCode,
  RATE_WINDOW_MS,
} from "../../domain/user/codes.ts";
import { requireHuman, type UserAggregate } from "../../domain/user/commands.ts";
import { UserEvent } from "../../domain/user/events.ts";
import { FailedPreconditionError, InternalError, type InvalidArgumentError } from "../../errors.ts";
import type { CommandTx, NewEvent } from "../../eventstore/types.ts";
import type { Details } from "../../gen/platform/object/v3alpha/object_pb.ts";
import type { PlatformUsers } from "../../gen/platform/resources/user/v3alpha/user_service_pb.ts";
import { activeProvider } from "../../query/notification-providers.ts";
import type { AuthorizedCall } from "../call.ts";
import type { ServiceDeps } from "../deps.ts";
import type { UserRow } from "./read.ts";

type UserCall = (
  ctx: HandlerContext,
  id: string,
  permission: Permission,
  options?: { self?: boolean },
) => Promise<{ call: AuthorizedCall; row: UserRow }>;
type OnUser = (
  call: AuthorizedCall,
  userId: string,
  decide: (user: UserAggregate, tx: CommandTx) => NewEvent[] | Promise<NewEvent[]>,
) => Promise<Details>;

const MESSAGE = { email: "VERIFY_EMAIL", phone: "VERIFY_PHONE" } as const;
const NAME = { email: "e-mail address", phone: "phone number" } as const;
const REASON_MESSAGE = { reset: "PASSWORD_RESET", invite: "INIT" } as const;

/**
 * Verification codes of a user's e-mail address and phone number (docs/notifications.md "Codes and user
 * operations"): SendEmailCode, VerifyEmail, SendPhoneCode, VerifyPhone. Permission user.write, or the user
 * itself; the account-control rule of every account change applies (userCall).
 */
export function codeRpcs(
  deps: ServiceDeps,
  userCall: UserCall,
  onUser: OnUser,
): {
  rpcs: Partial<ServiceImpl<typeof PlatformUsers>>;
  checkPasswordCode: (
    instanceId: string,
    user: UserAggregate,
    code: string,
  ) => { ok: true } | { ok: false; events: NewEvent[]; error: InvalidArgumentError };
  codesOnChange: (
    tx: CommandTx,
    instanceId: string,
    user: UserAggregate,
    events: NewEvent[],
  ) => Promise<NewEvent[]>;
} {
  const hashOf =
    (instanceId: string, userId: string, channel: CodeChannel) => (code: string, target: string) =>
      codeHash(deps.masterKey, { instanceId, userId, channel, target }, code);

  /** A new code of `channel` for `user` (its event), queued in a `type` message unless `returnCode`. */
  async function makeCode(
    tx: CommandTx,
    instanceId: string,
    user: UserAggregate,
    channel: CodeChannel,
    target: string,
    returnCode: boolean,
    type: "VERIFY_EMAIL" | "VERIFY_PHONE" | "PASSWORD_RESET" | "INIT",
    reason?: "reset" | "invite",
  ): Promise<{ event: NewEvent; code: string }> {
    const messages = deps.messages;
    if (!messages) throw new InternalError("notification delivery is not set up");
    const code = newCode(channel);
    const ttl = deps.config.notification.codeTtlSeconds;
    const event = addCodeEvent(user, channel, {
      code_hash: hashOf(instanceId, user.id, channel)(code, target),
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

  async function sendCode(ctx: HandlerContext, id: string, channel: "email" | "phone", returnCode: boolean) {
    const { call } = await userCall(ctx, id, "user.write", { self: true });
    if (call.context.type === "system") throw new InternalError("users belong to an instance");
    const instanceId = call.context.instanceId;
    let code = "";
    const details = await onUser(call, id, async (user, tx) => {
      requireHuman(user, "verification codes");
      const target = channel === "email" ? user.email : user.phone;
      if (!target) throw new FailedPreconditionError(`the user has no ${NAME[channel]}`);
      const made = await makeCode(tx, instanceId, user, channel, target, returnCode, MESSAGE[channel]);
      code = made.code;
      return [made.event];
    });
    return { details, verificationCode: returnCode ? code : undefined };
  }

  /** A password code by e-mail: a reset (PASSWORD_RESET) or an invitation (INIT, no password yet). */
  async function passwordCode(
    ctx: HandlerContext,
    id: string,
    reason: "reset" | "invite",
    returnCode: boolean,
  ) {
    const { call } = await userCall(ctx, id, "user.write", { self: reason === "reset" });
    if (call.context.type === "system") throw new InternalError("users belong to an instance");
    const instanceId = call.context.instanceId;
    let code = "";
    const details = await onUser(call, id, async (user, tx) => {
      requireHuman(user, "passwords");
      if (!user.email) throw new FailedPreconditionError("the user has no e-mail address");
      if (reason === "invite" && user.passwordHash)
        throw new FailedPreconditionError("the user has a password: request a password reset instead");
      const made = await makeCode(
        tx,
        instanceId,
        user,
        "password",
        user.email,
        returnCode,
        REASON_MESSAGE[reason],
        reason,
      );
      code = made.code;
      return [made.event];
    });
    return { details, verificationCode: returnCode ? code : undefined };
  }

  /**
   * For SetPassword with a `verification_code`: checks the user's password code, in the command, so the
   * check and the change it allows are one decision. When it does not match: the events to append (the
   * counted wrong try) and the error to answer after them.
   */
  function checkPasswordCode(
    instanceId: string,
    user: UserAggregate,
    code: string,
  ): { ok: true } | { ok: false; events: NewEvent[]; error: InvalidArgumentError } {
    const checked = checkCode(user, "password", code, hashOf(instanceId, user.id, "password"));
    if ("verified" in checked) return { ok: true };
    return { ok: false, events: checked.failed ? [checked.failed] : [], error: checked.error };
  }

  async function verify(ctx: HandlerContext, id: string, channel: CodeChannel, code: string) {
    const { call } = await userCall(ctx, id, "user.write", { self: true });
    if (call.context.type === "system") throw new InternalError("users belong to an instance");
    const instanceId = call.context.instanceId;
    let refused: InvalidArgumentError | undefined;
    const details = await onUser(call, id, (user) => {
      requireHuman(user, "verification codes");
      refused = undefined;
      const checked = checkCode(user, channel, code, hashOf(instanceId, id, channel));
      if ("verified" in checked) return checked.verified;
      refused = checked.error;
      // the wrong try is counted (committed) before the refusal is answered
      return checked.failed ? [checked.failed] : [];
    });
    if (refused) throw refused;
    return { details };
  }

  /**
   * The codes a change of the user sends: a changed e-mail address or phone number left unverified gets a
   * code when a provider of its channel is active (not beyond the rate limit: the change itself goes on).
   * `events` are the change's events, `user` the aggregate before them.
   */
  async function codesOnChange(
    tx: CommandTx,
    instanceId: string,
    user: UserAggregate,
    events: NewEvent[],
  ): Promise<NewEvent[]> {
    const changed = events.find((e) => e.type === UserEvent.changed)?.payload as
      | { email?: string; email_verified?: boolean; phone?: string | null; phone_verified?: boolean }
      | undefined;
    if (!changed) return [];
    const recent = user.codeTimes.filter((t) => Date.now() - t.getTime() < RATE_WINDOW_MS).length;
    const out: NewEvent[] = [];
    for (const channel of ["email", "phone"] as const) {
      const target = channel === "email" ? changed.email : changed.phone;
      const verified = channel === "email" ? changed.email_verified : changed.phone_verified;
      if (!target || verified !== false || recent + out.length >= MAX_CODES_PER_WINDOW) continue;
      if (!(await activeProvider(tx, instanceId, channel === "email" ? "smtp" : "sms"))) continue;
      // the code proves the new address: the aggregate as it is after the change
      const after = { ...user, [channel]: target, codeTimes: user.codeTimes };
      out.push((await makeCode(tx, instanceId, after, channel, target, false, MESSAGE[channel])).event);
    }
    return out;
  }

  const rpcs: Partial<ServiceImpl<typeof PlatformUsers>> = {
    sendEmailCode: (req, ctx) => sendCode(ctx, req.id, "email", req.returnCode),
    verifyEmail: (req, ctx) => verify(ctx, req.id, "email", req.verificationCode),
    sendPhoneCode: (req, ctx) => sendCode(ctx, req.id, "phone", req.returnCode),
    verifyPhone: (req, ctx) => verify(ctx, req.id, "phone", req.verificationCode),
    requestPasswordReset: (req, ctx) => passwordCode(ctx, req.id, "reset", req.returnCode),
    inviteUser: (req, ctx) => passwordCode(ctx, req.id, "invite", req.returnCode),
  };
  return { rpcs, codesOnChange, checkPasswordCode };
}
