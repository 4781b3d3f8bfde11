import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { SignInFactor } from "../../domain/session/sign-in-changes.ts";
import type { UserAggregate } from "../../domain/user/commands.ts";
import type { OtpChannel } from "../../domain/user/factors/otp.ts";
import { remainingRecoveryCodes } from "../../domain/user/factors/recovery-codes.ts";
import { InternalError } from "../../errors.ts";
import type { CommandTx, NewEvent } from "../../eventstore/types.ts";
import { AuthenticationMethodType } from "../../gen/platform/resources/user/v3alpha/factors_pb.ts";
import type { PlatformUsers } from "../../gen/platform/resources/user/v3alpha/user_service_pb.ts";
import { userFactors } from "../../query/user-factors.ts";
import type { AuthorizedCall } from "../call.ts";
import type { ServiceDeps } from "../deps.ts";
import { UserFactorCommands } from "./factor-commands.ts";
import { requireOwnFactorRemoval, requireOwnSignInChange } from "./own-sign-in-changes.ts";
import type { OnUser, UserCall } from "./user-calls.ts";

/**
 * A user's second factors (docs/factors.md): RegisterTOTP, VerifyTOTPRegistration, RemoveTOTP, AddOTPEmail,
 * RemoveOTPEmail, AddOTPSMS, RemoveOTPSMS, GenerateRecoveryCodes, RemoveRecoveryCodes (permission
 * user.write, or the user itself; the account-control rule applies, userCall) and
 * ListAuthenticationMethodTypes (user.read, or the user itself). The decisions are ./factor-commands.ts's,
 * which the account page shares. A user changing its own factors with a session's token needs a session
 * that passed its second factor, and one at least as strong as a factor it removes (./own-sign-in-changes.ts).
 */
export function factorRpcs(
  deps: ServiceDeps,
  userCall: UserCall,
  onUser: OnUser,
): Partial<ServiceImpl<typeof PlatformUsers>> {
  const factors = new UserFactorCommands(deps);

  const instanceOf = (call: AuthorizedCall) => {
    if (call.context.type === "system") throw new InternalError("users belong to an instance");
    return call.context.instanceId;
  };

  /** One change of the user's factors: the caller's call checked, the decision run in the command. */
  async function change(
    ctx: HandlerContext,
    id: string,
    decide: (instanceId: string, user: UserAggregate, tx: CommandTx) => Promise<NewEvent[]> | NewEvent[],
    /** The factor a removal takes away: the user's own session must be strong enough for it. */
    removes?: SignInFactor,
  ) {
    const { call, row } = await userCall(ctx, id, "user.write", { self: true });
    const instanceId = instanceOf(call);
    const user = { id, orgId: row.org_id };
    if (removes) await requireOwnFactorRemoval(deps, call, user, removes);
    else await requireOwnSignInChange(deps, call, user);
    return { details: await onUser(call, id, (user, tx) => decide(instanceId, user, tx)) };
  }

  const otp = (ctx: HandlerContext, id: string, channel: OtpChannel, add: boolean) =>
    change(
      ctx,
      id,
      (instanceId, user, tx) =>
        add
          ? factors.addOtp(tx, instanceId, user, channel)
          : factors.removeOtp(tx, instanceId, user, channel),
      add ? undefined : channel,
    );

  return {
    async registerTOTP(req, ctx) {
      let secret = "";
      let uri = "";
      const { details } = await change(ctx, req.id, async (instanceId, user, tx) => {
        const made = await factors.registerTotp(tx, instanceId, user);
        secret = made.secret;
        uri = made.uri;
        return made.events;
      });
      return { details, secret, uri };
    },
    verifyTOTPRegistration: (req, ctx) =>
      change(ctx, req.id, (instanceId, user, tx) => factors.verifyTotp(tx, instanceId, user, req.code)),
    removeTOTP: (req, ctx) =>
      change(ctx, req.id, (instanceId, user, tx) => factors.removeTotp(tx, instanceId, user), "totp"),
    addOTPEmail: (req, ctx) => otp(ctx, req.id, "otp_email", true),
    removeOTPEmail: (req, ctx) => otp(ctx, req.id, "otp_email", false),
    addOTPSMS: (req, ctx) => otp(ctx, req.id, "otp_sms", true),
    removeOTPSMS: (req, ctx) => otp(ctx, req.id, "otp_sms", false),
    async generateRecoveryCodes(req, ctx) {
      let codes: string[] = [];
      const { details } = await change(ctx, req.id, (instanceId, user) => {
        const made = factors.recoveryCodes(instanceId, user);
        codes = made.codes;
        return made.events;
      });
      return { details, codes };
    },
    removeRecoveryCodes: (req, ctx) =>
      change(
        ctx,
        req.id,
        (instanceId, user, tx) => factors.removeRecoveryCodes(tx, instanceId, user),
        "recovery_codes",
      ),

    async listAuthenticationMethodTypes(req, ctx) {
      const { call, row } = await userCall(ctx, req.id, "user.read", { self: true });
      const instanceId = instanceOf(call);
      const active = await userFactors(deps.db, instanceId, row.id, { active: true });
      const [links] = await deps.db.query<{ count: string | number }>(
        "SELECT count(*) AS count FROM user_idp_links WHERE instance_id = $1 AND user_id = $2",
        [instanceId, row.id],
      );
      const has = (type: string) => active.some((f) => f.type === type);
      const types: AuthenticationMethodType[] = [];
      if (row.password_set) types.push(AuthenticationMethodType.PASSWORD);
      if (has("passkey")) types.push(AuthenticationMethodType.PASSKEY);
      if (Number(links?.count ?? 0) > 0) types.push(AuthenticationMethodType.IDP);
      if (has("totp")) types.push(AuthenticationMethodType.TOTP);
      if (has("u2f")) types.push(AuthenticationMethodType.U2F);
      if (has("otp_sms")) types.push(AuthenticationMethodType.OTP_SMS);
      if (has("otp_email")) types.push(AuthenticationMethodType.OTP_EMAIL);
      if (remainingRecoveryCodes(active.find((f) => f.type === "recovery_codes")) > 0)
        types.push(AuthenticationMethodType.RECOVERY_CODE);
      return { types };
    },
  };
}
