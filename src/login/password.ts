/**
 * The password check of the login UI's sign-ins (the password page, linking an external identity). Every
 * failure gets one answer: a wrong password, an unknown login name, a machine user, a user without a
 * password, a locked, deactivated or temporarily locked-out account are all "the login name or password
 * is wrong", after the same argon2 work (the password is verified against a dummy hash where there is no
 * hash to verify), so the answer tells neither which names exist nor which accounts are locked.
 */
import { type CheckedUser, checkSession, createSession } from "../domain/session/commands.ts";
import { FailedPreconditionError, InvalidArgumentError, NotFoundError } from "../errors.ts";
import type { Login } from "./login.ts";

/**
 * Checks `password` of `user` (undefined: the login name is unknown) on the browser's session of that
 * user (`sessionId`), or on a new session of the browser. Answers the session's ID, or undefined when
 * the sign-in failed for any reason a person may learn only as "wrong login name or password".
 */
export async function checkPasswordForSignIn(
  login: Login,
  input: {
    instanceId: string;
    user: CheckedUser | undefined;
    password: string;
    /** The browser's session of this user, when it has one. */
    sessionId?: string;
    userAgentHash: string;
  },
): Promise<string | undefined> {
  const { instanceId, user, password } = input;
  if (!user) {
    await login.verifyDummyPassword(password);
    return undefined;
  }
  const actor = { instanceId, creator: user.id };
  try {
    const version = input.sessionId
      ? await checkSession(
          login.deps.eventStore,
          actor,
          // the browser's session of this user (read from the sessions read model)
          { sessionId: input.sessionId, password, of: { userId: user.id, orgId: user.orgId } },
          login.policy,
        )
      : await createSession(
          login.deps.eventStore,
          actor,
          { user, password, userAgentHash: input.userAgentHash },
          login.policy,
        );
    return version.sessionId;
  } catch (error) {
    // the wrong password was verified (and counted) already
    if (error instanceof InvalidArgumentError) return undefined;
    // locked, locked out, deactivated, a machine, no password, removed meanwhile: not verified yet
    if (error instanceof FailedPreconditionError || error instanceof NotFoundError) {
      await login.verifyDummyPassword(password);
      return undefined;
    }
    throw error;
  }
}
