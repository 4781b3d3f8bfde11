/**
 * Which user an identity of an external provider is (docs/identity-providers.md): the user it is linked to,
 * the account auto linking proposes, the update of a linked user from the provider (`is_auto_update`), and
 * a new user created with its link. The steps of ../steps/idp/ decide which applies.
 */
import type { FastifyRequest } from "fastify";
import { holdOrg } from "../../domain/org/locks.ts";
import { addHumanEvent, changeUserEvents, foldUser } from "../../domain/user/commands.ts";
import { USER, type UserChangedPayload } from "../../domain/user/events.ts";
import { idpLinkAddedEvent } from "../../domain/user/idp-links.ts";
import { usernameKey } from "../../domain/user/username.ts";
import { NotFoundError } from "../../errors.ts";
import type { EventStore } from "../../eventstore/eventstore.ts";
import { newId } from "../../id.ts";
import type { LoginIdp } from "../../query/idps.ts";
import type { Queryable } from "../../storage/database.ts";
import type { AuthRequest } from "../auth-requests.ts";
import type { Login } from "../login.ts";
import type { IdpIntent } from "./intents.ts";
import type { ExternalIdentity } from "./provider.ts";

export interface LinkedUser {
  id: string;
  orgId: string;
  /** A user just created whose e-mail address the provider did not assert as verified: that address. */
  unverifiedEmail?: string;
}

/** The user an identity is linked to (any organization of the instance). */
export async function linkedUser(
  db: Queryable,
  instanceId: string,
  idpId: string,
  externalId: string,
): Promise<LinkedUser | undefined> {
  const rows = await db.query<{ user_id: string; org_id: string }>(
    "SELECT user_id, org_id FROM user_idp_links WHERE instance_id = $1 AND idp_id = $2 AND external_user_id = $3",
    [instanceId, idpId, externalId],
  );
  return rows[0] ? { id: rows[0].user_id, orgId: rows[0].org_id } : undefined;
}

/**
 * The account auto linking proposes: the one human user of the organization with the identity's
 * username, or (EMAIL) with the identity's e-mail address verified on both sides. None when several match.
 */
export async function proposal(db: Queryable, instanceId: string, idp: LoginIdp, intent: IdpIntent) {
  const external = intent.external!;
  const mode = idp.options.autoLinking;
  let rows: { id: string; username: string; display_name: string | null; primary_domain: string | null }[];
  const select = `SELECT u.id, u.username, u.display_name, o.primary_domain FROM users u
    LEFT JOIN orgs o ON o.instance_id = u.instance_id AND o.id = u.org_id
    WHERE u.instance_id = $1 AND u.org_id = $2 AND u.type = 1`;
  if (mode === "username" && external.username) {
    rows = await db.query(`${select} AND u.username_key = $3 LIMIT 2`, [
      instanceId,
      intent.orgId,
      usernameKey(external.username),
    ]);
  } else if (mode === "email" && external.email && external.emailVerified) {
    rows = await db.query(`${select} AND lower(u.email) = lower($3) AND u.email_verified LIMIT 2`, [
      instanceId,
      intent.orgId,
      external.email,
    ]);
  } else return undefined;
  if (rows.length !== 1) return undefined;
  const row = rows[0];
  const loginName = row.primary_domain ? `${row.username}@${row.primary_domain}` : row.username;
  return { userId: row.id, loginName, displayName: row.display_name ?? "" };
}

/** Names and e-mail from the provider, applied to the user when they differ (`is_auto_update`). */
export async function autoUpdate(
  eventStore: EventStore,
  instanceId: string,
  userId: string,
  external: ExternalIdentity,
): Promise<void> {
  const change: UserChangedPayload = {};
  if (external.givenName) change.given_name = external.givenName;
  if (external.familyName) change.family_name = external.familyName;
  if (external.displayName) change.display_name = external.displayName;
  if (external.email) {
    change.email = external.email;
    change.email_verified = external.emailVerified;
  }
  await eventStore.push({ instanceId, creator: userId }, async (tx) => {
    const user = foldUser(await tx.load(USER, userId));
    if (!user) throw new NotFoundError("user not found");
    return changeUserEvents(user, change);
  });
}

/** Whether the new user's address is verified: the provider's own address, asserted verified by it. */
const emailVerified = (external: ExternalIdentity, values: Record<string, string>) =>
  values.email.toLowerCase() === external.email.toLowerCase() && external.emailVerified;

/** The new user's values from the identity (username, names, e-mail verified when the provider says so). */
function newUserEvents(
  orgId: string,
  userId: string,
  idp: LoginIdp,
  external: ExternalIdentity,
  values: Record<string, string>,
  lang: string,
) {
  return [
    addHumanEvent(userId, orgId, {
      username: values.username,
      profile: {
        given_name: values.givenName,
        family_name: values.familyName,
        display_name:
          values.givenName === external.givenName &&
          values.familyName === external.familyName &&
          external.displayName
            ? external.displayName
            : `${values.givenName} ${values.familyName}`,
        preferred_language: external.preferredLanguage ?? lang,
      },
      email: { address: values.email, is_verified: emailVerified(external, values) },
    }),
    idpLinkAddedEvent(userId, orgId, {
      idp_id: idp.id,
      external_user_id: external.id,
      external_username: external.username,
    }),
  ];
}

/** The registration form's values from the identity. */
export const valuesOf = (external: ExternalIdentity) => ({
  username: external.username,
  givenName: external.givenName,
  familyName: external.familyName,
  email: external.email,
});

/**
 * Creates the user with its link (one append); AlreadyExistsError when the username or identity is taken.
 * Its e-mail address is verified only when it is the provider's, asserted verified (`unverifiedEmail`
 * otherwise: the caller sends its code as after a local registration).
 */
export async function createLinkedUser(
  login: Login,
  request: FastifyRequest,
  authRequest: AuthRequest,
  intent: IdpIntent,
  idp: LoginIdp,
  values: Record<string, string>,
): Promise<LinkedUser> {
  const userId = newId();
  const lang = (await login.translatorFor(request, authRequest)).lang;
  const events = newUserEvents(intent.orgId, userId, idp, intent.external!, values, lang);
  await login.deps.eventStore.push({ instanceId: intent.instanceId, creator: userId }, async (tx) => {
    await holdOrg(tx, intent.instanceId, intent.orgId);
    return events;
  });
  const verified = emailVerified(intent.external!, values);
  return { id: userId, orgId: intent.orgId, ...(verified ? {} : { unverifiedEmail: values.email }) };
}
