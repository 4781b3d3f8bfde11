/**
 * The rule for changes to how an account signs in (src/domain/session/sign-in-changes.ts) applied to a
 * session of the login UI: the user's factors as the session was read with them, and the login policy of
 * the user's organization. Every page that links an identity provider or adds or removes a factor (the
 * account page, the enrolment pages of a sign-in, the link step) asks here.
 */
import {
  factorRemovalAllowed,
  type SignInFactor,
  signInChangeAllowed,
} from "../domain/session/sign-in-changes.ts";
import type { Login } from "./login.ts";
import type { LoginSession } from "./sessions.ts";

async function changeInput(login: Login, instanceId: string, session: LoginSession) {
  return {
    checks: session.checks,
    factors: session.factors ?? [],
    policy: await login.loginPolicy(instanceId, session.orgId),
  };
}

/** Whether `session` may change how its account signs in (link a provider, add a factor or a passkey). */
export async function maySignInChange(
  login: Login,
  instanceId: string,
  session: LoginSession,
): Promise<boolean> {
  return signInChangeAllowed(await changeInput(login, instanceId, session));
}

/** Whether `session` may remove its user's factor of kind `removed` (a check at least as strong). */
export async function mayRemoveFactor(
  login: Login,
  instanceId: string,
  session: LoginSession,
  removed: SignInFactor,
): Promise<boolean> {
  return factorRemovalAllowed({ ...(await changeInput(login, instanceId, session)), removed });
}
