/**
 * Links of a user to identities at external identity providers (sign-in with a provider): adding and
 * removing them, and the unique constraint that keeps one identity linked to one user per instance.
 */
import { FailedPreconditionError, NotFoundError } from "../../errors.ts";
import type { NewEvent, UniqueConstraintAction } from "../../eventstore/types.ts";
import { requireHuman, type UserAggregate, userEvent } from "./aggregate.ts";
import { type IdpLinkAddedPayload, USER, UserEvent } from "./events.ts";

/** The message of a refused removal of the last way to sign in (`removeIdpLinkEvents`). */
export const LAST_SIGN_IN_METHOD = "the link is the user's only way to sign in (the user has no password)";

/** The unique constraint of external identities: one identity of a provider links to one user per instance. */
export const IDP_LINK_CONSTRAINT = "user_idp_link";

function idpLinkKey(idpId: string, externalUserId: string): string {
  return `${idpId}:${externalUserId}`;
}

/**
 * Links the external identity to the user: FAILED_PRECONDITION for machine users or when the user has a
 * link to this provider already; ALREADY_EXISTS (the unique constraint) when the identity is linked to
 * another user of the instance. Linking the same identity again changes nothing.
 */
export function addIdpLinkEvents(user: UserAggregate, link: IdpLinkAddedPayload): NewEvent[] {
  requireHuman(user, "links to identity providers");
  const existing = user.idpLinks.get(link.idp_id);
  if (existing?.externalUserId === link.external_user_id) return [];
  if (existing) throw new FailedPreconditionError("the user is linked to another identity of this provider");
  return [idpLinkAddedEvent(user.id, user.orgId, link)];
}

/** `user.idp.link.added`, claiming the identity (also for a user created in the same append). */
export function idpLinkAddedEvent(userId: string, orgId: string, link: IdpLinkAddedPayload): NewEvent {
  return {
    aggregateType: USER,
    aggregateId: userId,
    resourceOwner: orgId,
    type: UserEvent.idpLinkAdded,
    payload: { ...link },
    uniqueConstraints: [
      {
        action: "add",
        type: IDP_LINK_CONSTRAINT,
        field: idpLinkKey(link.idp_id, link.external_user_id),
        message: "the external identity is linked to another user",
      },
    ],
  };
}

/**
 * Removes the user's link to the provider `idpId` (NOT_FOUND when there is none). `keepSignIn` (the
 * person's own account page): FAILED_PRECONDITION `LAST_SIGN_IN_METHOD` when it is the user's only link
 * and the user has no password, which would leave the account without a way to sign in.
 */
export function removeIdpLinkEvents(
  user: UserAggregate,
  idpId: string,
  options: { keepSignIn?: boolean } = {},
): NewEvent[] {
  const link = user.idpLinks.get(idpId);
  if (!link) throw new NotFoundError("link not found");
  if (options.keepSignIn && user.passwordHash === null && user.idpLinks.size === 1)
    throw new FailedPreconditionError(LAST_SIGN_IN_METHOD);
  return [
    {
      ...userEvent(user, UserEvent.idpLinkRemoved, { idp_id: idpId, external_user_id: link.externalUserId }),
      uniqueConstraints: [
        { action: "remove", type: IDP_LINK_CONSTRAINT, field: idpLinkKey(idpId, link.externalUserId) },
      ],
    },
  ];
}

/** The releases of the user's external identities (its removal frees them for other users). */
export function idpLinkReleases(user: UserAggregate): UniqueConstraintAction[] {
  return [...user.idpLinks].map(([idpId, link]) => ({
    action: "remove" as const,
    type: IDP_LINK_CONSTRAINT,
    field: idpLinkKey(idpId, link.externalUserId),
  }));
}
