/**
 * TOTP (RFC 6238) as a second factor: SHA-1, 6 digits, 30-second steps, one step either way accepted (the
 * clocks of phone and server may differ a little). The secret is sealed with the master key in
 * `user.totp.added` and never shown again after the registration. A code is accepted once: the accepted
 * time step is recorded (`user.totp.used`) and codes of that step or an earlier one are refused.
 */
import { generateSecret, generateURI, verify } from "otplib";
import { seal, unseal } from "../../../crypto/masterkey.ts";
import {
  AlreadyExistsError,
  FailedPreconditionError,
  InvalidArgumentError,
  NotFoundError,
} from "../../../errors.ts";
import type { NewEvent } from "../../../eventstore/types.ts";
import type { Queryable } from "../../../storage/database.ts";
import { SessionEvent } from "../../session/events.ts";
import type { FactorCheck } from "../../session/factors.ts";
import { type TotpAddedPayload, type TotpUsedPayload, UserEvent } from "../events.ts";
import { activeFactor, checkedEvent, factorUserEvent, readFactor, type UserFactorRow } from "./common.ts";

/** Seconds of one time step. */
export const TOTP_PERIOD = 30;
/** Steps before and after the current one whose codes are accepted. */
export const TOTP_TOLERANCE_STEPS = 1;

/** The context a secret is sealed under: a sealed secret copied to another user does not open. */
const sealContext = (instanceId: string, userId: string) => `user totp v1\u0000${instanceId}\u0000${userId}`;

const epochOf = (date: Date) => Math.floor(date.getTime() / 1000);

/** A new registration: the secret (base32, 20 bytes) and its sealed form for `user.totp.added`. */
export function newTotpSecret(
  masterKey: Buffer,
  instanceId: string,
  userId: string,
): { secret: string; sealed: string } {
  const secret = generateSecret();
  return { secret, sealed: seal(masterKey, secret, sealContext(instanceId, userId)) };
}

/** The `otpauth://totp/...` URI authenticator apps scan: `issuer` (the instance) and `account` (login name). */
export function totpUri(issuer: string, account: string, secret: string): string {
  return generateURI({ issuer, label: account, secret, algorithm: "sha1", digits: 6, period: TOTP_PERIOD });
}

/**
 * The time step of `code` when it is right at `now` (within TOTP_TOLERANCE_STEPS) and later than
 * `afterStep`; undefined otherwise.
 */
export async function totpStep(
  masterKey: Buffer,
  instanceId: string,
  userId: string,
  factor: UserFactorRow,
  code: string,
  now: Date,
): Promise<number | undefined> {
  const token = code.replace(/\s/g, "");
  if (!/^\d{6}$/.test(token)) return undefined;
  const secret = unseal(masterKey, String(factor.data.secret_sealed), sealContext(instanceId, userId));
  const lastStep = typeof factor.data.last_step === "number" ? factor.data.last_step : undefined;
  const result = await verify({
    secret,
    token,
    epoch: epochOf(now),
    period: TOTP_PERIOD,
    epochTolerance: TOTP_PERIOD * TOTP_TOLERANCE_STEPS,
    ...(lastStep !== undefined ? { afterTimeStep: lastStep } : {}),
  });
  if (!result.valid) return undefined;
  return "timeStep" in result ? result.timeStep : Math.floor(epochOf(now) / TOTP_PERIOD) + result.delta;
}

/**
 * RegisterTOTP: a pending registration, replacing a pending one; ALREADY_EXISTS when the user has an
 * active TOTP (as ZITADEL answers: remove it first).
 */
export function registerTotpEvents(
  userId: string,
  orgId: string,
  current: UserFactorRow | undefined,
  sealed: string,
): NewEvent[] {
  if (current?.active)
    throw new AlreadyExistsError("the user has an active TOTP authenticator: remove it first");
  const payload: TotpAddedPayload = { secret_sealed: sealed };
  return [factorUserEvent(userId, orgId, UserEvent.totpAdded, { ...payload })];
}

/** VerifyTOTPRegistration: the events of activating the pending TOTP with a right code. */
export async function verifyTotpRegistrationEvents(
  masterKey: Buffer,
  instanceId: string,
  userId: string,
  orgId: string,
  current: UserFactorRow | undefined,
  code: string,
  now: Date,
): Promise<NewEvent[]> {
  if (!current) throw new NotFoundError("the user has no TOTP registration");
  if (current.active) throw new AlreadyExistsError("the TOTP authenticator is verified already");
  const step = await totpStep(masterKey, instanceId, userId, current, code, now);
  if (step === undefined) throw new InvalidArgumentError("is wrong", "code");
  const used: TotpUsedPayload = { step };
  return [
    factorUserEvent(userId, orgId, UserEvent.totpVerified),
    factorUserEvent(userId, orgId, UserEvent.totpUsed, { ...used }),
  ];
}

/** RemoveTOTP: NOT_FOUND when the user has none (pending or active). */
export function removeTotpEvents(userId: string, orgId: string, current: UserFactorRow | undefined) {
  if (!current) throw new NotFoundError("the user has no TOTP authenticator");
  return [factorUserEvent(userId, orgId, UserEvent.totpRemoved)];
}

/** `checks.totp`: a right code not used before; INVALID_ARGUMENT "is wrong" otherwise. */
export function totpCheck(masterKey: Buffer, code: string): FactorCheck {
  return {
    factor: "totp",
    async check(ctx) {
      const factor = await activeFactor(ctx, "totp", "TOTP authenticator");
      const step = await totpStep(masterKey, ctx.instanceId, ctx.userId, factor, code, ctx.now);
      if (step === undefined)
        return { passed: false, events: [], error: new InvalidArgumentError("is wrong", "checks.totp.code") };
      const used: TotpUsedPayload = { step };
      return {
        passed: true,
        events: [
          factorUserEvent(ctx.userId, ctx.orgId, UserEvent.totpUsed, { ...used }),
          checkedEvent(ctx, SessionEvent.totpChecked),
        ],
      };
    },
  };
}

/**
 * The names in a TOTP URI: the issuer is the instance's name (its primary domain when it has none), the
 * account the user's login name (`username@<primary domain of the organization>`, or the username).
 */
export async function totpLabel(
  q: Queryable,
  instanceId: string,
  userId: string,
): Promise<{ issuer: string; account: string }> {
  const [row] = await q.query<{
    name: string | null;
    instance_domain: string | null;
    username: string | null;
    org_domain: string | null;
  }>(
    `SELECT i.name,
            (SELECT d.domain FROM instance_domains d WHERE d.instance_id = i.id AND d.is_primary) AS instance_domain,
            u.username, o.primary_domain AS org_domain
       FROM instances i
       LEFT JOIN users u ON u.instance_id = i.id AND u.id = $2
       LEFT JOIN orgs o ON o.instance_id = u.instance_id AND o.id = u.org_id
      WHERE i.id = $1`,
    [instanceId, userId],
  );
  const username = row?.username ?? userId;
  return {
    issuer: row?.name || row?.instance_domain || "Platform",
    account: row?.org_domain ? `${username}@${row.org_domain}` : username,
  };
}

/**
 * A TOTP check that activates the user's pending registration (enrolment during a sign-in): a right code
 * verifies the registration and counts as the session's TOTP check; a wrong one counts like any wrong
 * code. FAILED_PRECONDITION without a pending registration.
 */
export function totpEnrolmentCheck(masterKey: Buffer, code: string): FactorCheck {
  return {
    factor: "totp",
    async check(ctx) {
      const factor = await readFactor(ctx.tx, ctx.instanceId, ctx.userId, "totp");
      if (!factor || factor.active)
        throw new FailedPreconditionError("the user has no TOTP registration to verify");
      const step = await totpStep(masterKey, ctx.instanceId, ctx.userId, factor, code, ctx.now);
      if (step === undefined)
        return { passed: false, events: [], error: new InvalidArgumentError("is wrong", "code") };
      const used: TotpUsedPayload = { step };
      return {
        passed: true,
        events: [
          factorUserEvent(ctx.userId, ctx.orgId, UserEvent.totpVerified),
          factorUserEvent(ctx.userId, ctx.orgId, UserEvent.totpUsed, { ...used }),
          checkedEvent(ctx, SessionEvent.totpChecked),
        ],
      };
    },
  };
}

/** How long the setup pages show a pending registration's secret again (then they register anew). */
export const PENDING_TOTP_REUSE_MS = 10 * 60_000;

/**
 * The secret of a pending registration made in the last PENDING_TOTP_REUSE_MS, for the login UI's setup
 * pages to show the same QR code again after a wrong code; undefined otherwise (an active TOTP's secret is
 * never opened for showing).
 */
export function pendingTotpSecret(
  masterKey: Buffer,
  instanceId: string,
  userId: string,
  factor: UserFactorRow | undefined,
  now = Date.now(),
): string | undefined {
  if (!factor || factor.active || now - factor.createdAt.getTime() > PENDING_TOTP_REUSE_MS) return undefined;
  return unseal(masterKey, String(factor.data.secret_sealed), sealContext(instanceId, userId));
}
