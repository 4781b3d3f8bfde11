/**
 * Registering and removing passkeys and security keys (docs/factors.md "Passkeys and security keys"). A
 * registration starts pending (`user.passkey.added` with its challenge, RP ID and origins) and becomes
 * active when the authenticator's answer verifies (`user.passkey.verified` with the credential). A passkey is
 * a discoverable credential that verifies the user (it signs in alone); a security key (`u2f`) is a second
 * factor after the password, user presence being enough. Attestation is not asked for ("none").
 */
import {
  generateRegistrationOptions,
  type RegistrationResponseJSON,
  verifyRegistrationResponse,
} from "@simplewebauthn/server";
import {
  AlreadyExistsError,
  FailedPreconditionError,
  InvalidArgumentError,
  NotFoundError,
} from "../../../errors.ts";
import type { NewEvent } from "../../../eventstore/types.ts";
import { factorByCredentialId, userFactor, userFactors } from "../../../query/user-factors.ts";
import type { Queryable } from "../../../storage/database.ts";
import { requireHuman, type UserAggregate, userEvent } from "../aggregate.ts";
import {
  type PasskeyAddedPayload,
  type PasskeyType,
  type PasskeyVerifiedPayload,
  UserEvent,
} from "../events.ts";
import {
  activeCredentials,
  type RelyingParty,
  type UserVerification,
  userHandleOf,
  WEBAUTHN_TIMEOUT_MS,
} from "./webauthn.ts";

export type AuthenticatorAttachment = "platform" | "cross-platform" | "unspecified";

/** A passkey's name: 1 to 200 characters. */
export const MAX_PASSKEY_NAME = 200;

/** The user verification a registration of `type` asks for. */
export function registrationUserVerification(type: PasskeyType): UserVerification {
  return type === "passkey" ? "required" : "discouraged";
}

/**
 * Starts a registration: the options for `navigator.credentials.create` (the instance as relying party,
 * the user's credentials excluded) and the `user.passkey.added` of the pending passkey, after the
 * `user.passkey.removed` of the user's registrations that expired unanswered (they can no longer verify).
 */
export async function startPasskeyRegistration(
  db: Queryable,
  instanceId: string,
  user: UserAggregate,
  input: {
    passkeyId: string;
    type: PasskeyType;
    authenticator: AuthenticatorAttachment;
    rp: RelyingParty;
    now: Date;
  },
): Promise<{ events: NewEvent[]; options: Record<string, unknown> }> {
  requireHuman(user, "passkeys");
  const expired = (await userFactors(db, instanceId, user.id, { types: ["passkey", "u2f"] })).filter(
    (f) => !f.active && input.now.getTime() - f.createdAt.getTime() > WEBAUTHN_TIMEOUT_MS,
  );
  const existing = await activeCredentials(db, instanceId, user.id);
  const userVerification = registrationUserVerification(input.type);
  const options = await generateRegistrationOptions({
    rpName: input.rp.name,
    rpID: input.rp.id,
    userName: user.username,
    userID: userHandleOf(user.id),
    userDisplayName:
      user.profile.display_name ??
      [user.profile.given_name, user.profile.family_name].filter(Boolean).join(" "),
    timeout: WEBAUTHN_TIMEOUT_MS,
    attestationType: "none",
    excludeCredentials: existing.map((c) => ({
      id: String(c.data.credential_id),
      transports: (c.data.transports as string[] | undefined) ?? undefined,
    })),
    authenticatorSelection: {
      residentKey: input.type === "passkey" ? "required" : "discouraged",
      requireResidentKey: input.type === "passkey",
      userVerification,
      ...(input.authenticator === "unspecified" ? {} : { authenticatorAttachment: input.authenticator }),
    },
  });
  const payload: PasskeyAddedPayload = {
    passkey_id: input.passkeyId,
    type: input.type,
    challenge: options.challenge,
    rp_id: input.rp.id,
    origins: input.rp.origins,
    user_verification: userVerification,
    authenticator: input.authenticator,
  };
  return {
    events: [
      ...expired.map((f) => userEvent(user, UserEvent.passkeyRemoved, { passkey_id: f.id })),
      userEvent(user, UserEvent.passkeyAdded, { ...payload }),
    ],
    options: options as unknown as Record<string, unknown>,
  };
}

/**
 * Verifies the authenticator's answer to the pending registration `passkeyId` and names the key: the
 * `user.passkey.verified` of the credential. INVALID_ARGUMENT for a wrong answer or name (nothing stored),
 * NOT_FOUND for an unknown passkey, FAILED_PRECONDITION for one verified already or a registration older
 * than its timeout, ALREADY_EXISTS for a credential registered already.
 */
export async function verifyPasskeyRegistration(
  db: Queryable,
  instanceId: string,
  user: UserAggregate,
  input: { passkeyId: string; response: unknown; name: string; now: Date },
): Promise<NewEvent> {
  const name = input.name.trim();
  if (name.length < 1 || [...name].length > MAX_PASSKEY_NAME)
    throw new InvalidArgumentError(`must be 1 to ${MAX_PASSKEY_NAME} characters`, "name");
  const factor = await userFactor(db, instanceId, user.id, input.passkeyId);
  if (!factor || (factor.type !== "passkey" && factor.type !== "u2f"))
    throw new NotFoundError("passkey not found");
  if (factor.active) throw new FailedPreconditionError("the passkey is verified already");
  if (input.now.getTime() - factor.createdAt.getTime() > WEBAUTHN_TIMEOUT_MS)
    throw new FailedPreconditionError("the registration expired: start a new one");
  const registration = factor.data as {
    challenge: string;
    rp_id: string;
    origins: string[];
    user_verification: string;
  };
  let result: Awaited<ReturnType<typeof verifyRegistrationResponse>>;
  try {
    result = await verifyRegistrationResponse({
      response: input.response as RegistrationResponseJSON,
      expectedChallenge: registration.challenge,
      expectedOrigin: registration.origins,
      expectedRPID: registration.rp_id,
      requireUserVerification: registration.user_verification === "required",
    });
  } catch (error) {
    throw new InvalidArgumentError(
      `the registration is invalid: ${(error as Error).message}`,
      "public_key_credential",
    );
  }
  if (!result.verified)
    throw new InvalidArgumentError("the registration is invalid", "public_key_credential");
  const info = result.registrationInfo;
  if (await factorByCredentialId(db, instanceId, info.credential.id))
    throw new AlreadyExistsError("the credential is registered already");
  const payload: PasskeyVerifiedPayload = {
    passkey_id: factor.id,
    name,
    credential_id: info.credential.id,
    public_key: Buffer.from(info.credential.publicKey).toString("base64url"),
    counter: info.credential.counter,
    transports: info.credential.transports,
    device_type: info.credentialDeviceType,
    backed_up: info.credentialBackedUp,
    aaguid: info.aaguid,
    rp_id: registration.rp_id,
  };
  return userEvent(user, UserEvent.passkeyVerified, { ...payload });
}

/** `user.passkey.removed` of a passkey or security key of the user (pending or active). */
export async function removePasskeyEvent(
  db: Queryable,
  instanceId: string,
  user: UserAggregate,
  passkeyId: string,
): Promise<NewEvent> {
  const factor = await userFactor(db, instanceId, user.id, passkeyId);
  if (!factor || (factor.type !== "passkey" && factor.type !== "u2f"))
    throw new NotFoundError("passkey not found");
  return userEvent(user, UserEvent.passkeyRemoved, { passkey_id: passkeyId });
}
