/**
 * A user changing its own factors through the API with an access token of a browser session (the token's
 * `sid`): the rule for changes to how an account signs in applies as on the account page
 * (src/domain/session/sign-in-changes.ts, docs/factors.md "Changes to how an account signs in"). The session
 * must have passed the account's second factor, and for a removal verified one at least as strong as the
 * factor removed, else 403 PERMISSION_DENIED and nothing is stored. An administrator changing a user's
 * factors with `user.write` (or a token without a session) is not bound by it.
 */
import {
  factorRemovalAllowed,
  type SignInFactor,
  signInChangeAllowed,
} from "../../domain/session/sign-in-changes.ts";
import { PermissionDeniedError } from "../../errors.ts";
import { loginPolicyFor } from "../../query/login-policy.ts";
import { sessionChecks } from "../../query/session-checks.ts";
import { userFactors } from "../../query/user-factors.ts";
import type { AuthorizedCall } from "../call.ts";
import type { ServiceDeps } from "../deps.ts";

export const WEAKER_SESSION =
  "removing this factor needs a session that passed the account's second factor and verified a factor at least as strong as it";
export const SECOND_FACTOR_NEEDED =
  "changing how this account signs in needs a session that passed the account's second factor";

/** The caller's own session, when it acts on its own account with a session's token. */
function ownSession(call: AuthorizedCall, userId: string) {
  const { caller } = call;
  if (caller.kind !== "user" || caller.userId !== userId || !caller.sessionId) return undefined;
  return { instanceId: caller.instanceId, sessionId: caller.sessionId };
}

/** Refuses (403) an addition to the caller's own factors by a session that did not pass its second factor. */
export async function requireOwnSignInChange(
  deps: ServiceDeps,
  call: AuthorizedCall,
  user: { id: string; orgId: string },
): Promise<void> {
  const own = ownSession(call, user.id);
  if (!own) return;
  const factors = await userFactors(deps.db, own.instanceId, user.id, { active: true });
  const session = await sessionChecks(deps.db, own.instanceId, own.sessionId);
  if (!session || session.userId !== user.id) throw new PermissionDeniedError(SECOND_FACTOR_NEEDED);
  const allowed = signInChangeAllowed({
    checks: session.checks,
    factors: factors.map((f) => f.type),
    policy: await loginPolicyFor(deps.db, own.instanceId, user.orgId),
  });
  if (!allowed) throw new PermissionDeniedError(SECOND_FACTOR_NEEDED);
}

/** Refuses (403) a removal of the caller's own factor `removed` by a session too weak for it. */
export async function requireOwnFactorRemoval(
  deps: ServiceDeps,
  call: AuthorizedCall,
  user: { id: string; orgId: string },
  removed: SignInFactor,
): Promise<void> {
  const own = ownSession(call, user.id);
  if (!own) return;
  const { instanceId } = own;
  const factors = await userFactors(deps.db, instanceId, user.id, { active: true });
  // a pending registration (not active) is cancelled without a stronger check
  if (!factors.some((f) => f.type === removed)) return;
  const session = await sessionChecks(deps.db, instanceId, own.sessionId);
  if (!session || session.userId !== user.id) throw new PermissionDeniedError(WEAKER_SESSION);
  const allowed = factorRemovalAllowed({
    checks: session.checks,
    factors: factors.map((f) => f.type),
    policy: await loginPolicyFor(deps.db, instanceId, user.orgId),
    removed,
  });
  if (!allowed) throw new PermissionDeniedError(WEAKER_SESSION);
}
