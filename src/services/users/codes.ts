import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { InternalError, type InvalidArgumentError } from "../../errors.ts";
import type { PlatformUsers } from "../../gen/platform/resources/user/v3alpha/user_service_pb.ts";
import type { AuthorizedCall } from "../call.ts";
import type { ServiceDeps } from "../deps.ts";
import { UserCodes } from "./code-commands.ts";
import type { OnUser, UserCall } from "./user-calls.ts";

/**
 * Verification codes of a user's e-mail address and phone number (docs/notifications.md "Codes and user
 * operations"): SendEmailCode, VerifyEmail, SendPhoneCode, VerifyPhone, RequestPasswordReset, InviteUser.
 * Permission user.write, or the user itself; the account-control rule of every account change applies
 * (userCall). The decisions are ./code-commands.ts's, which the login UI's pages share.
 */
export function codeRpcs(
  deps: ServiceDeps,
  userCall: UserCall,
  onUser: OnUser,
): {
  rpcs: Partial<ServiceImpl<typeof PlatformUsers>>;
  codes: UserCodes;
} {
  const codes = new UserCodes(deps);

  const instanceOf = (call: AuthorizedCall) => {
    if (call.context.type === "system") throw new InternalError("users belong to an instance");
    return call.context.instanceId;
  };

  async function sendCode(ctx: HandlerContext, id: string, channel: "email" | "phone", returnCode: boolean) {
    const { call } = await userCall(ctx, id, "user.write", { self: true });
    const instanceId = instanceOf(call);
    let code = "";
    const details = await onUser(call, id, async (user, tx) => {
      const made = await codes.channelCode(tx, instanceId, user, channel, returnCode);
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
    const instanceId = instanceOf(call);
    let code = "";
    const details = await onUser(call, id, async (user, tx) => {
      const made = await codes.passwordCode(tx, instanceId, user, reason, returnCode);
      code = made.code;
      return [made.event];
    });
    return { details, verificationCode: returnCode ? code : undefined };
  }

  async function verify(ctx: HandlerContext, id: string, channel: "email" | "phone", code: string) {
    const { call } = await userCall(ctx, id, "user.write", { self: true });
    const instanceId = instanceOf(call);
    let refused: InvalidArgumentError | undefined;
    const details = await onUser(call, id, (user) => {
      const checked = codes.verifyChannel(instanceId, user, channel, code);
      refused = checked.ok ? undefined : checked.error;
      // the wrong try is counted (committed) before the refusal is answered
      return checked.events;
    });
    if (refused) throw refused;
    return { details };
  }

  const rpcs: Partial<ServiceImpl<typeof PlatformUsers>> = {
    sendEmailCode: (req, ctx) => sendCode(ctx, req.id, "email", req.returnCode),
    verifyEmail: (req, ctx) => verify(ctx, req.id, "email", req.verificationCode),
    sendPhoneCode: (req, ctx) => sendCode(ctx, req.id, "phone", req.returnCode),
    verifyPhone: (req, ctx) => verify(ctx, req.id, "phone", req.verificationCode),
    requestPasswordReset: (req, ctx) => passwordCode(ctx, req.id, "reset", req.returnCode),
    inviteUser: (req, ctx) => passwordCode(ctx, req.id, "invite", req.returnCode),
  };
  return { rpcs, codes };
}
