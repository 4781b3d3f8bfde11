/**
 * The commands of a user's aggregate: creating users (human, machine) and their tokens, changes of the
 * profile, username, password and metadata, and removal. The aggregate itself is ./aggregate.ts; links to
 * identity providers ./idp-links.ts; state changes (lock, deactivate) ./state.ts; codes ./codes.ts.
 */
import { FailedPreconditionError } from "../../errors.ts";
import type { NewEvent } from "../../eventstore/types.ts";
import type { UserData } from "../user-schema/user-data.ts";
import { requireHuman, type UserAggregate, userEvent } from "./aggregate.ts";
import {
  type DataSetPayload,
  type HumanAddedPayload,
  type ImpersonatedPayload,
  type MachineAddedPayload,
  type PatAddedPayload,
  USER,
  type UserChangedPayload,
  UserEvent,
  type UsernameChangedPayload,
} from "./events.ts";
import { idpLinkReleases } from "./idp-links.ts";
import { usernameConstraint, usernameKey } from "./username.ts";

// The aggregate's API beside the commands: nearly every caller folds the user, then decides.
export { foldUser, requireHuman, requireMachine, type UserAggregate, userEvent } from "./aggregate.ts";
export function addHumanEvent(userId: string, orgId: string, payload: HumanAddedPayload): NewEvent {
  return {
    aggregateType: USER,
    aggregateId: userId,
    resourceOwner: orgId,
    type: UserEvent.humanAdded,
    payload: { ...payload },
    uniqueConstraints: [usernameConstraint("add", payload.username)],
  };
}

export function addMachineEvent(userId: string, orgId: string, payload: MachineAddedPayload): NewEvent {
  return {
    aggregateType: USER,
    aggregateId: userId,
    resourceOwner: orgId,
    type: UserEvent.machineAdded,
    payload: { ...payload },
    uniqueConstraints: [usernameConstraint("add", payload.username)],
  };
}

export function addPatEvent(userId: string, orgId: string, payload: PatAddedPayload): NewEvent {
  return {
    aggregateType: USER,
    aggregateId: userId,
    resourceOwner: orgId,
    type: UserEvent.patAdded,
    payload: { ...payload },
  };
}

/** Records an impersonation of the user (token exchange); appended with the token it issued. */
export function impersonatedEvent(userId: string, orgId: string, payload: ImpersonatedPayload): NewEvent {
  return {
    aggregateType: USER,
    aggregateId: userId,
    resourceOwner: orgId,
    type: UserEvent.impersonated,
    payload: { ...payload },
  };
}

/**
 * `user.password.changed` of a human user: the new argon2id hash (never the password), and whether the
 * next sign-in must change it. It resets the failed password attempts and ends a temporary lockout.
 */
export function setPasswordEvents(
  user: UserAggregate,
  passwordHash: string,
  changeRequired: boolean,
): NewEvent[] {
  requireHuman(user, "passwords");
  return [
    userEvent(user, UserEvent.passwordChanged, {
      password_hash: passwordHash,
      change_required: changeRequired,
    }),
  ];
}

export function changeUsernameEvent(user: UserAggregate, username: string): NewEvent[] {
  if (username === user.username) return [];
  // `Ada` → `ada`: the same key, so the constraint stays; only the spelling changes
  const sameKey = usernameKey(username) === usernameKey(user.username);
  const payload: UsernameChangedPayload = { username, old_username: user.username };
  return [
    {
      ...userEvent(user, UserEvent.usernameChanged, { ...payload }),
      uniqueConstraints: sameKey
        ? []
        : [usernameConstraint("remove", user.username), usernameConstraint("add", username)],
    },
  ];
}

/**
 * The `user.changed` event of the members of `change` that differ (none: no event). Only the members given
 * change, with one rule for addresses: a changed e-mail address or phone number is unverified unless the
 * change says it is verified, and a removed phone is unverified; the same address given again keeps its
 * verification. Verifying a phone the user does not have is FAILED_PRECONDITION.
 */
export function changeUserEvents(user: UserAggregate, given: UserChangedPayload): NewEvent[] {
  const change = { ...given };
  if (change.email !== undefined && change.email !== user.email) change.email_verified ??= false;
  if (change.phone !== undefined && change.phone !== user.phone) change.phone_verified ??= false;
  if (change.phone === null) change.phone_verified = false;
  const phone = change.phone === undefined ? user.phone : change.phone;
  if (change.phone_verified === true && !phone)
    throw new FailedPreconditionError("the user has no phone number to mark as verified");
  const current: Required<UserChangedPayload> = {
    ...user.profile,
    email: user.email ?? "",
    email_verified: user.emailVerified,
    phone: user.phone,
    phone_verified: user.phoneVerified,
    name: user.name ?? "",
    description: user.description,
    access_token_type: user.accessTokenType,
  };
  const changed: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(change)) {
    if (value === undefined) continue;
    if (current[key as keyof UserChangedPayload] !== value) changed[key] = value;
  }
  return Object.keys(changed).length ? [userEvent(user, UserEvent.changed, changed)] : [];
}

/** Sets and removes metadata entries (value "" removes); only real changes become events. */
export function metadataEvents(user: UserAggregate, entries: Record<string, string>): NewEvent[] {
  const events: NewEvent[] = [];
  for (const [key, value] of Object.entries(entries)) {
    if (value === "") {
      if (user.metadata.has(key)) events.push(userEvent(user, UserEvent.metadataRemoved, { key }));
    } else if (user.metadata.get(key) !== value) {
      events.push(userEvent(user, UserEvent.metadataSet, { key, value }));
    }
  }
  return events;
}

/** Removes the user, releasing its username and its external identities. */
export function removeUserEvent(user: UserAggregate): NewEvent {
  return {
    ...userEvent(user, UserEvent.removed, { username: user.username }),
    uniqueConstraints: [usernameConstraint("remove", user.username), ...idpLinkReleases(user)],
  };
}

/** The events that give a human user `next` as its custom data (none when it has it already). */
export function userDataEvents(user: UserAggregate, next: UserData | undefined): NewEvent[] {
  if (!next) return [];
  if (next.schemaId === null)
    return user.custom.schemaId === null
      ? []
      : [userEvent(user, UserEvent.dataRemoved, { schema_id: user.custom.schemaId })];
  const payload: DataSetPayload = {
    schema_id: next.schemaId,
    schema_revision: next.revision ?? 1,
    data: next.data ?? {},
  };
  return [userEvent(user, UserEvent.dataSet, { ...payload })];
}

/** "Skip" on the login's prompt to register a second factor (a human user's choice, kept as its time). */
export function skipMfaInitEvent(user: UserAggregate): NewEvent {
  requireHuman(user, "second factors");
  return userEvent(user, UserEvent.mfaInitSkipped);
}
