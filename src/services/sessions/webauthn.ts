/**
 * The sessions API's WebAuthn parts (docs/factors.md "Passkeys and security keys"): `checks.webauthn` and
 * `challenges.webauthn` as the session commands' plug-ins, and the `webauthn` challenge's answer.
 */
import { create } from "@bufbuild/protobuf";
import type { ChallengeMaker, FactorCheck } from "../../domain/session/commands.ts";
import {
  type UserVerification,
  webAuthnChallenge,
  webAuthnCheck,
} from "../../domain/user/factors/webauthn.ts";
import {
  type CheckWebAuthn,
  type RequestWebAuthnChallenge,
  UserVerificationRequirement,
  type WebAuthnChallenge,
  WebAuthnChallengeSchema,
} from "../../gen/platform/resources/session/v3alpha/session_pb.ts";
import { relyingPartyOf } from "../../query/relying-party.ts";
import type { AuthorizedCall } from "../call.ts";
import type { ServiceDeps } from "../deps.ts";

const verifications: Record<number, UserVerification> = {
  [UserVerificationRequirement.UNSPECIFIED]: "preferred",
  [UserVerificationRequirement.REQUIRED]: "required",
  [UserVerificationRequirement.PREFERRED]: "preferred",
  [UserVerificationRequirement.DISCOURAGED]: "discouraged",
};

/** The `webauthn` check of a request, if asked for. */
export function webAuthnCheckOf(check: CheckWebAuthn | undefined): FactorCheck[] {
  return check ? [webAuthnCheck(check.credentialAssertionData ?? {})] : [];
}

/** The `webauthn` challenge of a request, if asked for (INVALID_ARGUMENT for a domain not the instance's). */
export async function webAuthnChallengeOf(
  deps: ServiceDeps,
  call: AuthorizedCall,
  instanceId: string,
  request: RequestWebAuthnChallenge | undefined,
  field: string,
): Promise<ChallengeMaker[]> {
  if (!request) return [];
  const instance = await deps.instances.byId(instanceId);
  const rp = await relyingPartyOf(
    deps.db,
    deps.config,
    { instanceId, instanceName: instance?.name ?? "", host: call.scope.host },
    request.domain,
    `${field}.domain`,
  );
  return [
    webAuthnChallenge({ rp, userVerification: verifications[request.userVerification] ?? "preferred" }),
  ];
}

/** The response's `challenges.webauthn`, when one was made. */
export function webAuthnAnswer(answer: unknown): WebAuthnChallenge | undefined {
  if (answer === undefined) return undefined;
  return create(WebAuthnChallengeSchema, {
    publicKeyCredentialRequestOptions: JSON.parse(JSON.stringify(answer)),
  });
}
