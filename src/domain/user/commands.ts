import { FailedPreconditionError, NotFoundError } from "../../errors.ts";
import type { NewEvent, StoredEvent } from "../../eventstore/types.ts";
import { NO_DATA, type UserData } from "../user-schema/user-data.ts";
import {
  AccessTokenType,
  type CodeAddedPayload,
  type DataSetPayload,
  type HumanAddedPayload,
  type IdpLinkAddedPayload,
  type ImpersonatedPayload,
  type MachineAddedPayload,
  type PatAddedPayload,
  USER,
  type UserChangedPayload,
  UserEvent,
  type UsernameChangedPayload,
  UserState,
  UserType,
} from "./events.ts";
import { usernameConstraint, usernameKey } from "./username.ts";

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

/** The state of one user aggregate, folded from its events (what commands decide on). */
export interface UserAggregate {
  id: string;
  orgId: string;
  type: (typeof UserType)[keyof typeof UserType];
  username: string;
  state: number;
  profile: {
    given_name: string;
    family_name: string;
    display_name: string | null;
    nick_name: string | null;
    preferred_language: string | null;
  };
  email: string | null;
  emailVerified: boolean;
  phone: string | null;
  phoneVerified: boolean;
  passwordHash: string | null;
  passwordChangeRequired: boolean;
  /** End of the last temporary password lockout (it may be over); undefined after a reset. */
  passwordLockedUntil?: Date;
  name: string | null;
  description: string | null;
  accessTokenType: number;
  metadata: Map<string, string>;
  pats: Set<string>;
  keys: Set<string>;
  hasSecret: boolean;
  /** Links to external identities, by identity provider ID. */
  idpLinks: Map<string, { externalUserId: string; externalUsername: string }>;
  /** The open codes: of the e-mail address, of the phone, to set a password with (./codes.ts). */
  codes: { email?: OpenCode; phone?: OpenCode; password?: OpenCode };
  /** When the user's last verification codes were made (the newest few): the rate limit. */
  codeTimes: Date[];
  /** Custom data of a human user (docs/user-schemas.md). */
  custom: UserData;
  /** Sequence and time of the last event. */
  sequence: number;
  changeDate: Date;
}

/** A verification code not used yet: its hash, end of validity, the address it proves, wrong tries. */
export interface OpenCode {
  hash: string;
  expiresAt: Date;
  target: string;
  failures: number;
}

/** Folds a user's events; undefined when the user does not exist (never added, or removed). */
export function foldUser(events: StoredEvent[]): UserAggregate | undefined {
  let user: UserAggregate | undefined;
  for (const e of events) {
    const p = (e.payload ?? {}) as Record<string, unknown>;
    switch (e.type) {
      case UserEvent.humanAdded:
      case UserEvent.machineAdded: {
        const human = e.type === UserEvent.humanAdded ? (p as unknown as HumanAddedPayload) : undefined;
        const machine = e.type === UserEvent.machineAdded ? (p as unknown as MachineAddedPayload) : undefined;
        user = {
          id: e.aggregateId,
          orgId: e.resourceOwner,
          type: human ? UserType.human : UserType.machine,
          username: String(p.username),
          state: UserState.active,
          profile: {
            given_name: human?.profile.given_name ?? "",
            family_name: human?.profile.family_name ?? "",
            display_name: human?.profile.display_name ?? null,
            nick_name: human?.profile.nick_name ?? null,
            preferred_language: human?.profile.preferred_language ?? null,
          },
          email: human?.email.address ?? null,
          emailVerified: human?.email.is_verified === true,
          phone: human?.phone?.number ?? null,
          phoneVerified: human?.phone?.is_verified === true,
          passwordHash: human?.password_hash ?? null,
          passwordChangeRequired: human?.password_change_required === true,
          name: machine?.name ?? null,
          description: machine?.description ?? null,
          accessTokenType: machine?.access_token_type ?? AccessTokenType.bearer,
          metadata: new Map(),
          pats: new Set(),
          keys: new Set(),
          hasSecret: false,
          idpLinks: new Map(),
          codes: {},
          codeTimes: [],
          custom: human?.schema_id
            ? { schemaId: human.schema_id, revision: human.schema_revision ?? 1, data: human.data ?? {} }
            : NO_DATA,
          sequence: e.sequence,
          changeDate: e.createdAt,
        };
        continue;
      }
      case UserEvent.removed:
        user = undefined;
        continue;
    }
    if (!user) continue;
    user.sequence = e.sequence;
    user.changeDate = e.createdAt;
    switch (e.type) {
      case UserEvent.changed: {
        const c = p as UserChangedPayload;
        for (const key of [
          "given_name",
          "family_name",
          "display_name",
          "nick_name",
          "preferred_language",
        ] as const)
          if (key in c) (user.profile as Record<string, unknown>)[key] = c[key];
        // a code proves the address it was made for: a new address voids it
        if (c.email !== undefined && c.email !== user.email) {
          user.codes.email = undefined;
          user.codes.password = undefined; // it was sent to the old address
        }
        if (c.phone !== undefined && c.phone !== user.phone) user.codes.phone = undefined;
        if (c.email !== undefined) user.email = c.email;
        if (c.email_verified !== undefined) user.emailVerified = c.email_verified;
        if (c.phone !== undefined) user.phone = c.phone;
        if (c.phone_verified !== undefined) user.phoneVerified = c.phone_verified;
        if (c.name !== undefined) user.name = c.name;
        if (c.description !== undefined) user.description = c.description;
        if (c.access_token_type !== undefined) user.accessTokenType = c.access_token_type;
        break;
      }
      case UserEvent.usernameChanged:
        user.username = String(p.username);
        break;
      case UserEvent.emailCodeAdded:
      case UserEvent.phoneCodeAdded:
      case UserEvent.passwordCodeAdded: {
        const c = p as unknown as CodeAddedPayload;
        const channel =
          e.type === UserEvent.emailCodeAdded
            ? "email"
            : e.type === UserEvent.phoneCodeAdded
              ? "phone"
              : "password";
        user.codes[channel] = {
          hash: c.code_hash,
          expiresAt: new Date(c.expires_at),
          target: c.target,
          failures: 0,
        };
        user.codeTimes = [...user.codeTimes.slice(-9), e.createdAt];
        break;
      }
      case UserEvent.emailCodeCheckFailed:
      case UserEvent.phoneCodeCheckFailed:
      case UserEvent.passwordCodeCheckFailed: {
        const code =
          user.codes[
            e.type === UserEvent.emailCodeCheckFailed
              ? "email"
              : e.type === UserEvent.phoneCodeCheckFailed
                ? "phone"
                : "password"
          ];
        if (code) code.failures++;
        break;
      }
      case UserEvent.emailVerified:
        user.emailVerified = true;
        user.codes.email = undefined;
        break;
      case UserEvent.phoneVerified:
        user.phoneVerified = true;
        user.codes.phone = undefined;
        break;
      case UserEvent.passwordChanged:
        user.codes.password = undefined; // a new password uses up (or voids) the password code
        user.passwordHash = String(p.password_hash);
        user.passwordChangeRequired = p.change_required === true;
        user.passwordLockedUntil = undefined;
        break;
      case UserEvent.passwordCheckFailed:
        user.passwordLockedUntil = typeof p.locked_until === "string" ? new Date(p.locked_until) : undefined;
        break;
      case UserEvent.passwordCheckSucceeded:
        user.passwordLockedUntil = undefined;
        break;
      case UserEvent.locked:
        user.state = UserState.locked;
        break;
      case UserEvent.unlocked:
        user.state = UserState.active;
        user.passwordLockedUntil = undefined;
        break;
      case UserEvent.reactivated:
        user.state = UserState.active;
        break;
      case UserEvent.deactivated:
        user.state = UserState.inactive;
        break;
      case UserEvent.metadataSet:
        user.metadata.set(String(p.key), String(p.value));
        break;
      case UserEvent.metadataRemoved:
        user.metadata.delete(String(p.key));
        break;
      case UserEvent.secretSet:
        user.hasSecret = true;
        break;
      case UserEvent.secretRemoved:
        user.hasSecret = false;
        break;
      case UserEvent.keyAdded:
        user.keys.add(String(p.key_id));
        break;
      case UserEvent.keyRemoved:
        user.keys.delete(String(p.key_id));
        break;
      case UserEvent.patAdded:
        user.pats.add(String(p.pat_id));
        break;
      case UserEvent.patRemoved:
        user.pats.delete(String(p.pat_id));
        break;
      case UserEvent.idpLinkAdded:
        user.idpLinks.set(String(p.idp_id), {
          externalUserId: String(p.external_user_id),
          externalUsername: String(p.external_username ?? ""),
        });
        break;
      case UserEvent.idpLinkRemoved:
        user.idpLinks.delete(String(p.idp_id));
        break;
      case UserEvent.dataSet: {
        const d = p as unknown as DataSetPayload;
        user.custom = { schemaId: d.schema_id, revision: d.schema_revision, data: d.data };
        break;
      }
      case UserEvent.dataRemoved:
        user.custom = NO_DATA;
        break;
    }
  }
  return user;
}

/** An event on an existing user's aggregate. */
export function userEvent(user: UserAggregate, type: string, payload?: Record<string, unknown>): NewEvent {
  return {
    aggregateType: USER,
    aggregateId: user.id,
    resourceOwner: user.orgId,
    type,
    payload: payload ?? null,
  };
}

export type StateAction = "lock" | "unlock" | "deactivate" | "reactivate";

const transitions: Record<StateAction, { from: number; event: string; describe: string }> = {
  lock: { from: UserState.active, event: UserEvent.locked, describe: "only an active user can be locked" },
  unlock: {
    from: UserState.locked,
    event: UserEvent.unlocked,
    describe: "the user is neither locked nor locked out of password checks",
  },
  deactivate: {
    from: UserState.active,
    event: UserEvent.deactivated,
    describe: "only an active user can be deactivated",
  },
  reactivate: {
    from: UserState.inactive,
    event: UserEvent.reactivated,
    describe: "the user is not inactive",
  },
};

/**
 * lock: ACTIVE → LOCKED, unlock: LOCKED → ACTIVE, deactivate: ACTIVE → INACTIVE, reactivate: INACTIVE →
 * ACTIVE. Unlock also ends a temporary password lockout lasting at `now` (the user is ACTIVE then), and
 * either way resets the count of wrong passwords.
 */
export function changeStateEvents(user: UserAggregate, action: StateAction, now = new Date()): NewEvent[] {
  const t = transitions[action];
  const lockedOut =
    action === "unlock" &&
    user.state === UserState.active &&
    user.passwordLockedUntil !== undefined &&
    user.passwordLockedUntil.getTime() > now.getTime();
  if (user.state !== t.from && !lockedOut) throw new FailedPreconditionError(t.describe);
  return [userEvent(user, t.event)];
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

/** `user.changed` with the fields of `change` that differ from the user's; none when nothing differs. */
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
    uniqueConstraints: [
      usernameConstraint("remove", user.username),
      ...[...user.idpLinks].map(([idpId, link]) => ({
        action: "remove" as const,
        type: IDP_LINK_CONSTRAINT,
        field: idpLinkKey(idpId, link.externalUserId),
      })),
    ],
  };
}

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

export function requireMachine(user: UserAggregate): void {
  if (user.type !== UserType.machine)
    throw new FailedPreconditionError("machine credentials exist only for machine users");
}

export function requireHuman(user: UserAggregate, what: string): void {
  if (user.type !== UserType.human) throw new FailedPreconditionError(`${what} exist only for human users`);
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
