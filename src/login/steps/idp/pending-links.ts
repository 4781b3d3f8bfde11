/**
 * A link to an external identity provider waits for the sign-in's factors (docs/login.md "Link your
 * account"). The link step (./link.ts) proves the local password and holds the link on the intent
 * (`IdpIntentStore.holdLink`); the sign-in then goes on as any password sign-in (the second factor, its
 * registration, a new password). When it completes (`completeOrContinue`, ../complete.ts), the session has
 * passed every factor the login policy requires of the user, and the link is stored then, under the rule of
 * every change to how an account signs in (`maySignInChange`). A sign-in that never passes the second
 * factor stores no link: the intent expires with it.
 */
import type { FastifyRequest } from "fastify";
import { foldUser } from "../../../domain/user/commands.ts";
import { USER } from "../../../domain/user/events.ts";
import { addIdpLinkEvents } from "../../../domain/user/idp-links.ts";
import { AlreadyExistsError, FailedPreconditionError, NotFoundError } from "../../../errors.ts";
import type { LoginIdp } from "../../../query/idps.ts";
import type { Queryable } from "../../../storage/database.ts";
import type { AuthRequest } from "../../auth-requests.ts";
import { autoUpdate } from "../../idp/accounts.ts";
import type { IdpIntent } from "../../idp/intents.ts";
import type { LoginSession } from "../../sessions.ts";
import { maySignInChange } from "../../sign-in-changes.ts";
import type { StepKit } from "../kit.ts";

/**
 * Whether the intent's identity can be linked to `userId`: not linked to another user of the instance, and
 * the user has no other identity of this provider. Asked before the link is held, so that the person hears
 * it on the link page; the command decides again when the link is stored.
 */
export async function linkable(db: Queryable, intent: IdpIntent, userId: string): Promise<boolean> {
  const rows = await db.query<{ user_id: string; external_user_id: string }>(
    `SELECT user_id, external_user_id FROM user_idp_links
     WHERE instance_id = $1 AND idp_id = $2 AND (external_user_id = $3 OR user_id = $4)`,
    [intent.instanceId, intent.idpId, intent.external!.id, userId],
  );
  return rows.every((row) => row.user_id === userId && row.external_user_id === intent.external!.id);
}

/** Stores the links the auth request's intents hold for `session`, when the session may change the account. */
export async function storePendingLinks(
  kit: StepKit,
  request: FastifyRequest,
  authRequest: AuthRequest,
  session: LoginSession,
): Promise<void> {
  const { login } = kit;
  const intents = await kit.idps.intents.pendingLinks(authRequest.instanceId, authRequest.id, session.id);
  if (intents.length === 0) return;
  const allowed = await maySignInChange(login, login.instanceId(request), session);
  for (const intent of intents) {
    if (!allowed || intent.pendingLink?.userId !== session.userId || !intent.external) continue;
    const idp = await kit.idps.active(intent.instanceId, intent.orgId, intent.idpId);
    // the intent is used up whatever happens: a provider deactivated meanwhile links nothing
    if (idp) await storeLink(kit, intent, idp, session.userId);
    await kit.idps.intents.finish(intent);
  }
}

/** Links the intent's identity to the user (the user as creator); a link made meanwhile elsewhere wins. */
async function storeLink(kit: StepKit, intent: IdpIntent, idp: LoginIdp, userId: string): Promise<void> {
  const { eventStore } = kit.login.deps;
  const external = intent.external!;
  try {
    await eventStore.push({ instanceId: intent.instanceId, creator: userId }, async (tx) => {
      const current = foldUser(await tx.load(USER, userId));
      if (!current) throw new NotFoundError("user not found");
      return addIdpLinkEvents(current, {
        idp_id: idp.id,
        external_user_id: external.id,
        external_username: external.username,
      });
    });
  } catch (error) {
    if (error instanceof AlreadyExistsError || error instanceof FailedPreconditionError) return;
    throw error;
  }
  if (idp.options.isAutoUpdate) await autoUpdate(eventStore, intent.instanceId, userId, external);
}
