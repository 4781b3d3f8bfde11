/**
 * Where a sign-in stands, for the choice and the registration prompt (./choose.ts, ./setup.ts): the session
 * an auth request signs in with, the login policy of its sign-in, and what it still needs (`pendingStep`,
 * ../../second-factor.ts).
 */
import type { FastifyReply, FastifyRequest } from "fastify";
import type { LoginSettings } from "../../../domain/settings/login.ts";
import type { AuthRequest } from "../../auth-requests.ts";
import { type LoginSession, type PendingStep, pendingStep, sessionsNow } from "../../sessions.ts";
import { entryUrl, type StepKit, stepUrl } from "../kit.ts";

export interface SignInState {
  session: LoginSession;
  /** The login policy of the sign-in: the user's (`Login.userLoginPolicy`). */
  policy: LoginSettings;
  pending: PendingStep | undefined;
}

/**
 * The auth request's session, its policy and its pending step when that is `page`; else answers the
 * redirect to where the request stands (the entry without a session, the pending step, or completion).
 */
export async function signInAt(
  kit: StepKit,
  request: FastifyRequest,
  reply: FastifyReply,
  authRequest: AuthRequest,
  page: PendingStep,
  status: 302 | 303,
): Promise<SignInState | undefined> {
  const { login } = kit;
  const session = (await kit.sessionsFor(request, authRequest)).find((s) => s.id === authRequest.sessionId);
  if (!session) {
    await reply.redirect(entryUrl(authRequest.id), status);
    return undefined;
  }
  const policy = await login.userLoginPolicy(authRequest.instanceId, session);
  const pending = pendingStep(authRequest, session, await sessionsNow(login.deps.db, [session]), policy);
  if (pending === page) return { session, policy, pending };
  await reply.redirect(stepUrl(pending ?? "complete", authRequest.id), status);
  return undefined;
}
