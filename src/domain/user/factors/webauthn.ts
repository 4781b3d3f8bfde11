/**
 * WebAuthn assertions (docs/factors.md "Passkeys and security keys"): the `webauthn` challenge of a session
 * and the `webauthn` check that answers it, as the session commands' plug-ins (../../session/factors.ts),
 * and the verification the passwordless sign-in shares. An assertion passes when its origin is one of the
 * relying party's, its RP ID hash, challenge and signature are right, the credential is an active passkey
 * or security key of the user, the signature counter did not go back (when either counter is non-zero),
 * and the user was verified if the challenge required it.
 */
import {
  type AuthenticationResponseJSON,
  generateAuthenticationOptions,
  verifyAuthenticationResponse,
} from "@simplewebauthn/server";
import { FailedPreconditionError, InvalidArgumentError } from "../../../errors.ts";
import type { NewEvent } from "../../../eventstore/types.ts";
import { type UserFactorRow, userFactors } from "../../../query/user-factors.ts";
import type { Queryable } from "../../../storage/database.ts";
import { sessionEvent } from "../../session/commands.ts";
import {
  type ChallengeAddedPayload,
  SessionEvent,
  type SessionWebAuthnCheckedPayload,
} from "../../session/events.ts";
import type { ChallengeMaker, FactorCheck, FactorContext, FactorOutcome } from "../../session/factors.ts";
import { type PasskeyUsedPayload, USER, UserEvent } from "../events.ts";

/** The relying party of a registration or assertion: the instance, under one of its domains. */
export interface RelyingParty {
  /** The RP ID: a domain of the instance. */
  id: string;
  /** The instance's name (shown by some authenticators). */
  name: string;
  /** The origins the login serves under this RP ID (`https://<domain>[:port]`, http without TLS). */
  origins: string[];
}

export type UserVerification = "required" | "preferred" | "discouraged";

/** How long a challenge (of a registration or an assertion) may be answered. */
export const WEBAUTHN_TIMEOUT_MS = 5 * 60_000;

/** The challenge an assertion must answer. */
export interface ExpectedAssertion {
  challenge: string;
  rpId: string;
  origins: string[];
  userVerification: UserVerification;
}

/** What a passed assertion tells. */
export interface VerifiedAssertion {
  factor: UserFactorRow;
  userVerified: boolean;
  /** `swk`: a synced passkey (multi-device or backed up); `hwk`: bound to one device. */
  amr: "hwk" | "swk";
  /** `user.passkey.used` (on the credential's user). */
  used: NewEvent;
}

/** The user's active passkeys and security keys. */
export function activeCredentials(db: Queryable, instanceId: string, userId: string) {
  return userFactors(db, instanceId, userId, { active: true, types: ["passkey", "u2f"] });
}

/** The credential ID an assertion (or registration) names, "" when it is not one. */
export function credentialIdOf(response: unknown): string {
  const id = (response as { id?: unknown } | null)?.id;
  return typeof id === "string" ? id : "";
}

const invalid = (reason: string) =>
  new InvalidArgumentError(`the WebAuthn assertion is invalid: ${reason}`, "credential_assertion_data");

/**
 * Verifies `response` against `expected` with `factor` (a credential of `userId` and `orgId`): the
 * outcome, never throwing for a wrong assertion.
 */
export async function verifyAssertion(
  expected: ExpectedAssertion,
  credential: { factor: UserFactorRow | undefined; userId: string; orgId: string },
  response: unknown,
): Promise<{ ok: true; verified: VerifiedAssertion } | { ok: false; error: InvalidArgumentError }> {
  const { factor } = credential;
  if (!factor?.active) return { ok: false, error: invalid("not a passkey of the user") };
  const data = factor.data as {
    credential_id: string;
    public_key: string;
    counter?: number;
    transports?: string[];
    backed_up?: boolean;
    device_type?: string;
  };
  const userHandle = (response as { response?: { userHandle?: unknown } }).response?.userHandle;
  // a discoverable credential names its user: it must be the credential's
  if (typeof userHandle === "string" && userHandle !== "" && userHandle !== toBase64Url(credential.userId))
    return { ok: false, error: invalid("not a passkey of the user") };
  try {
    const result = await verifyAuthenticationResponse({
      response: response as AuthenticationResponseJSON,
      expectedChallenge: expected.challenge,
      expectedOrigin: expected.origins,
      expectedRPID: expected.rpId,
      credential: {
        id: data.credential_id,
        publicKey: Buffer.from(data.public_key, "base64url"),
        counter: data.counter ?? 0,
        transports: data.transports as never,
      },
      requireUserVerification: expected.userVerification === "required",
    });
    if (!result.verified) return { ok: false, error: invalid("the signature is wrong") };
    const info = result.authenticationInfo;
    const synced = info.credentialDeviceType === "multiDevice" || info.credentialBackedUp;
    const used: PasskeyUsedPayload = {
      passkey_id: factor.id,
      counter: info.newCounter,
      backed_up: info.credentialBackedUp,
    };
    return {
      ok: true,
      verified: {
        factor,
        userVerified: info.userVerified,
        amr: synced ? "swk" : "hwk",
        used: {
          aggregateType: USER,
          aggregateId: credential.userId,
          resourceOwner: credential.orgId,
          type: UserEvent.passkeyUsed,
          payload: { ...used },
        },
      },
    };
  } catch (error) {
    return { ok: false, error: invalid(String((error as Error).message ?? error)) };
  }
}

/** The `session.webauthn.checked` of a passed assertion. */
export function webAuthnCheckedEvent(
  sessionId: string,
  orgId: string,
  verified: VerifiedAssertion,
): NewEvent {
  const payload: SessionWebAuthnCheckedPayload = {
    passkey_id: verified.factor.id,
    user_verified: verified.userVerified,
    amr: verified.amr,
  };
  return sessionEvent(sessionId, orgId, SessionEvent.webAuthnChecked, { ...payload });
}

/** The `webauthn` challenge's payload of `session.challenge.added`. */
interface WebAuthnChallengePayload {
  challenge: string;
  rp_id: string;
  origins: string[];
  user_verification: UserVerification;
}

/**
 * The `webauthn` challenge: request options naming the user's active credentials (allowCredentials), with
 * the requested user verification, kept in `session.challenge.added` until answered.
 */
export function webAuthnChallenge(input: {
  rp: RelyingParty;
  userVerification: UserVerification;
}): ChallengeMaker {
  return {
    type: "webauthn",
    async make(ctx: FactorContext) {
      const credentials = await activeCredentials(ctx.tx, ctx.instanceId, ctx.userId);
      const options = await generateAuthenticationOptions({
        rpID: input.rp.id,
        allowCredentials: credentials.map((c) => ({
          id: String(c.data.credential_id),
          transports: (c.data.transports as string[] | undefined) ?? undefined,
        })),
        userVerification: input.userVerification,
        timeout: WEBAUTHN_TIMEOUT_MS,
      });
      const payload: ChallengeAddedPayload & WebAuthnChallengePayload = {
        type: "webauthn",
        challenge: options.challenge,
        rp_id: input.rp.id,
        origins: input.rp.origins,
        user_verification: input.userVerification,
      };
      return {
        events: [sessionEvent(ctx.sessionId, ctx.orgId, SessionEvent.challengeAdded, { ...payload })],
        answer: options,
      };
    },
  };
}

/**
 * The `webauthn` check: verifies an assertion answering the session's last `webauthn` challenge, or
 * `expected` (the passwordless sign-in, whose session is created by the check). A session without an open
 * (unexpired) challenge is FAILED_PRECONDITION, not counted; a wrong assertion counts as a failure.
 */
export function webAuthnCheck(response: unknown, expected?: ExpectedAssertion): FactorCheck {
  return {
    factor: "webauthn",
    async check(ctx: FactorContext): Promise<FactorOutcome> {
      const challenge = ctx.challenges.webauthn;
      let want = expected;
      if (!want) {
        if (!challenge || ctx.now.getTime() - challenge.createdAt.getTime() > WEBAUTHN_TIMEOUT_MS)
          throw new FailedPreconditionError("the session has no open webauthn challenge");
        const p = challenge.payload as unknown as WebAuthnChallengePayload;
        want = {
          challenge: p.challenge,
          rpId: p.rp_id,
          origins: p.origins,
          userVerification: p.user_verification,
        };
      }
      const id = credentialIdOf(response);
      const factor = (await activeCredentials(ctx.tx, ctx.instanceId, ctx.userId)).find(
        (c) => c.data.credential_id === id,
      );
      const outcome = await verifyAssertion(want, { factor, userId: ctx.userId, orgId: ctx.orgId }, response);
      if (!outcome.ok) {
        const failed = expected
          ? []
          : [sessionEvent(ctx.sessionId, ctx.orgId, SessionEvent.challengeCheckFailed, { type: "webauthn" })];
        return { passed: false, events: failed, error: outcome.error };
      }
      return {
        passed: true,
        events: [outcome.verified.used, webAuthnCheckedEvent(ctx.sessionId, ctx.orgId, outcome.verified)],
      };
    },
  };
}

/** The user handle of a user's credentials: the user ID's UTF-8 bytes (base64url in JSON). */
export function userHandleOf(userId: string): Uint8Array<ArrayBuffer> {
  return new Uint8Array(Buffer.from(userId, "utf8"));
}

function toBase64Url(userId: string): string {
  return Buffer.from(userId, "utf8").toString("base64url");
}
