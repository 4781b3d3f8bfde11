/**
 * What the login UI's WebAuthn pages share (docs/factors.md "Passkeys and security keys"): the relying
 * party of the request, the credential a form posted, and commands on the signed-in user.
 */
import type { FastifyRequest } from "fastify";
import { foldUser, type UserAggregate } from "../domain/user/aggregate.ts";
import { USER } from "../domain/user/events.ts";
import type { RelyingParty } from "../domain/user/factors/webauthn.ts";
import { NotFoundError } from "../errors.ts";
import type { CommandTx, NewEvent } from "../eventstore/types.ts";
import { relyingPartyOf } from "../query/relying-party.ts";
import type { Login } from "./login.ts";
import { type Body, field } from "./steps/kit.ts";

/** The instance as relying party, with the request's host as RP ID. */
export async function loginRelyingParty(login: Login, request: FastifyRequest): Promise<RelyingParty> {
  const instance = await login.instance(request);
  return relyingPartyOf(login.deps.db, login.deps.config, {
    instanceId: instance.id,
    instanceName: instance.name,
    host: request.scope.host,
  });
}

/** The `credential` field of a WebAuthn form (the script's JSON), undefined when it is not JSON. */
export function postedCredential(body: Body): Record<string, unknown> | undefined {
  const text = field(body, "credential", { raw: true });
  if (!text || text.length > 64 * 1024) return undefined;
  try {
    const value = JSON.parse(text);
    return value && typeof value === "object" && !Array.isArray(value) ? value : undefined;
  } catch {
    return undefined;
  }
}

/** Runs a command on the user `userId` (the signed-in person as creator). */
export async function onSignedInUser(
  login: Login,
  request: FastifyRequest,
  userId: string,
  decide: (user: UserAggregate, tx: CommandTx) => Promise<NewEvent[]>,
): Promise<void> {
  await login.deps.eventStore.push({ instanceId: login.instanceId(request), creator: userId }, async (tx) => {
    const user = foldUser(await tx.load(USER, userId));
    if (!user) throw new NotFoundError("user not found");
    return decide(user, tx);
  });
}
