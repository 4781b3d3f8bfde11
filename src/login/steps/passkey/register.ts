/**
 * The registration of a passkey or security key in the login UI (the account page's "Add a passkey" and
 * "Add a security key", the sign-in's security key enrolment): the page starts a registration (a pending
 * passkey) and asks the browser for the credential; its post verifies the answer and names the key, with
 * the domain functions the users API's CreatePasskey and VerifyPasskey use.
 */
import type { FastifyReply, FastifyRequest } from "fastify";
import type { PasskeyType } from "../../../domain/user/events.ts";
import {
  startPasskeyRegistration,
  verifyPasskeyRegistration,
} from "../../../domain/user/factors/passkeys.ts";
import { InvalidArgumentError, PlatformError } from "../../../errors.ts";
import { newId } from "../../../id.ts";
import { type PageContext, sendPage } from "../../render.ts";
import { loginRelyingParty, onSignedInUser, postedCredential } from "../../webauthn.ts";
import { type accountView, type Body, field, type StepKit } from "../kit.ts";

/** Starts a registration for `userId` and sends the page asking the browser for the credential. */
export async function sendRegistrationPage(
  kit: StepKit,
  request: FastifyRequest,
  reply: FastifyReply,
  context: PageContext,
  page: {
    type: PasskeyType;
    userId: string;
    action: string;
    account?: ReturnType<typeof accountView>;
    /** The account page's session the form acts on. */
    session?: string;
    cancelUrl: string;
    error?: string;
    name?: string;
  },
): Promise<FastifyReply> {
  const { login } = kit;
  const rp = await loginRelyingParty(login, request);
  const passkeyId = newId();
  let options: Record<string, unknown> = {};
  await onSignedInUser(login, request, page.userId, async (user, tx) => {
    const started = await startPasskeyRegistration(tx, login.instanceId(request), user, {
      passkeyId,
      type: page.type,
      authenticator: page.type === "u2f" ? "cross-platform" : "unspecified",
      rp,
      now: new Date(),
    });
    options = started.options;
    return started.events;
  });
  const { t } = context.translator;
  return sendPage(
    reply,
    context,
    "steps/passkey/register",
    {
      title: t(page.type === "u2f" ? "passkeyRegister.titleU2f" : "passkeyRegister.titlePasskey"),
      account: page.account,
      session: page.session,
      action: page.action,
      passkeyId,
      options: JSON.stringify(options),
      cancelUrl: page.cancelUrl,
      error: page.error,
      name: page.name ?? "",
    },
    { scripts: true },
  );
}

/**
 * Verifies a registration page's post for `userId`: an error message key (and the name typed) when the
 * name or the credential is refused, nothing stored then.
 */
export async function finishRegistration(
  kit: StepKit,
  request: FastifyRequest,
  userId: string,
  body: Body,
): Promise<{ error?: string; name: string }> {
  const { login } = kit;
  const name = field(body, "name");
  const passkeyId = field(body, "passkey");
  const response = postedCredential(body);
  if (!name || [...name].length > 200) return { error: "error.passkeyName", name };
  if (!response || !passkeyId) return { error: "error.passkeyRegistration", name };
  try {
    await onSignedInUser(login, request, userId, async (user, tx) => [
      await verifyPasskeyRegistration(tx, login.instanceId(request), user, {
        passkeyId,
        response,
        name,
        now: new Date(),
      }),
    ]);
  } catch (error) {
    if (error instanceof InvalidArgumentError && error.field === "name")
      return { error: "error.passkeyName", name };
    if (error instanceof PlatformError && error.httpStatus < 500)
      return { error: "error.passkeyRegistration", name };
    throw error;
  }
  return { name };
}
