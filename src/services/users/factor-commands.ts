/**
 * The decisions of the user operations on second factors (docs/factors.md), shared by the users API
 * (./factors.ts) and the account page (src/login/steps/account/security-otp.ts): each runs inside the
 * caller's command on the user aggregate (its version is the optimistic lock) and reads the user's factor
 * rows in the same transaction. Machine users have no second factors (FAILED_PRECONDITION).
 */
import { requireHuman, type UserAggregate } from "../../domain/user/commands.ts";
import { readFactor } from "../../domain/user/factors/common.ts";
import { addOtpEvents, type OtpChannel, removeOtpEvents } from "../../domain/user/factors/otp.ts";
import {
  generateRecoveryCodes,
  removeRecoveryCodesEvents,
} from "../../domain/user/factors/recovery-codes.ts";
import {
  newTotpSecret,
  registerTotpEvents,
  removeTotpEvents,
  totpLabel,
  totpUri,
  verifyTotpRegistrationEvents,
} from "../../domain/user/factors/totp.ts";
import type { NewEvent } from "../../eventstore/types.ts";
import type { Queryable } from "../../storage/database.ts";

export class UserFactorCommands {
  constructor(private readonly deps: { masterKey: Buffer }) {}

  /** RegisterTOTP: a pending registration; the secret and its URI to show once. */
  async registerTotp(
    tx: Queryable,
    instanceId: string,
    user: UserAggregate,
  ): Promise<{ events: NewEvent[]; secret: string; uri: string }> {
    requireHuman(user, "second factors");
    const current = await readFactor(tx, instanceId, user.id, "totp");
    const { secret, sealed } = newTotpSecret(this.deps.masterKey, instanceId, user.id);
    const events = registerTotpEvents(user.id, user.orgId, current, sealed);
    const { issuer, account } = await totpLabel(tx, instanceId, user.id);
    return { events, secret, uri: totpUri(issuer, account, secret) };
  }

  /** VerifyTOTPRegistration: activates the pending registration with a right code. */
  async verifyTotp(
    tx: Queryable,
    instanceId: string,
    user: UserAggregate,
    code: string,
  ): Promise<NewEvent[]> {
    requireHuman(user, "second factors");
    const current = await readFactor(tx, instanceId, user.id, "totp");
    return verifyTotpRegistrationEvents(
      this.deps.masterKey,
      instanceId,
      user.id,
      user.orgId,
      current,
      code,
      new Date(),
    );
  }

  async removeTotp(tx: Queryable, instanceId: string, user: UserAggregate): Promise<NewEvent[]> {
    requireHuman(user, "second factors");
    return removeTotpEvents(user.id, user.orgId, await readFactor(tx, instanceId, user.id, "totp"));
  }

  /** AddOTPEmail / AddOTPSMS: needs the verified address or number (the aggregate's, in this command). */
  async addOtp(
    tx: Queryable,
    instanceId: string,
    user: UserAggregate,
    channel: OtpChannel,
  ): Promise<NewEvent[]> {
    requireHuman(user, "second factors");
    const contact = {
      email: user.email,
      emailVerified: user.emailVerified,
      phone: user.phone,
      phoneVerified: user.phoneVerified,
      language: user.profile.preferred_language,
    };
    return addOtpEvents(
      user.id,
      user.orgId,
      channel,
      contact,
      await readFactor(tx, instanceId, user.id, channel),
    );
  }

  async removeOtp(
    tx: Queryable,
    instanceId: string,
    user: UserAggregate,
    channel: OtpChannel,
  ): Promise<NewEvent[]> {
    requireHuman(user, "second factors");
    return removeOtpEvents(user.id, user.orgId, channel, await readFactor(tx, instanceId, user.id, channel));
  }

  /** GenerateRecoveryCodes: new codes replacing any earlier ones. */
  recoveryCodes(instanceId: string, user: UserAggregate): { events: NewEvent[]; codes: string[] } {
    requireHuman(user, "second factors");
    const made = generateRecoveryCodes(this.deps.masterKey, instanceId, user.id, user.orgId);
    return { events: [made.event], codes: made.codes };
  }

  async removeRecoveryCodes(tx: Queryable, instanceId: string, user: UserAggregate): Promise<NewEvent[]> {
    requireHuman(user, "second factors");
    return removeRecoveryCodesEvents(
      user.id,
      user.orgId,
      await readFactor(tx, instanceId, user.id, "recovery_codes"),
    );
  }
}
