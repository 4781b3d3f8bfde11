import { FailedPreconditionError } from "../../errors.ts";
import type { NewEvent, StoredEvent } from "../../eventstore/types.ts";
import {
  AccessTokenType,
  type HumanAddedPayload,
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

function usernameConstraint(username: string) {
  return {
    action: "add" as const,
    type: "username",
    field: username,
    ignoreCase: true,
    message: `username "${username}" is already taken`,
  };
}

export function addHumanEvent(userId: string, orgId: string, payload: HumanAddedPayload): NewEvent {
  return {
    aggregateType: USER,
    aggregateId: userId,
    resourceOwner: orgId,
    type: UserEvent.humanAdded,
    payload: { ...payload },
    uniqueConstraints: [usernameConstraint(payload.username)],
  };
}

export function addMachineEvent(userId: string, orgId: string, payload: MachineAddedPayload): NewEvent {
  return {
    aggregateType: USER,
    aggregateId: userId,
    resourceOwner: orgId,
    type: UserEvent.machineAdded,
    payload: { ...payload },
    uniqueConstraints: [usernameConstraint(payload.username)],
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
  name: string | null;
  description: string | null;
  accessTokenType: number;
  metadata: Map<string, string>;
  pats: Set<string>;
  keys: Set<string>;
  hasSecret: boolean;
  /** Sequence and time of the last event. */
  sequence: number;
  changeDate: Date;
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
      case UserEvent.passwordChanged:
        user.passwordHash = String(p.password_hash);
        user.passwordChangeRequired = p.change_required === true;
        break;
      case UserEvent.locked:
        user.state = UserState.locked;
        break;
      case UserEvent.unlocked:
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
  unlock: { from: UserState.locked, event: UserEvent.unlocked, describe: "the user is not locked" },
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

/** lock: ACTIVE → LOCKED, unlock: LOCKED → ACTIVE, deactivate: ACTIVE → INACTIVE, reactivate: INACTIVE → ACTIVE. */
export function changeStateEvents(user: UserAggregate, action: StateAction): NewEvent[] {
  const t = transitions[action];
  if (user.state !== t.from) throw new FailedPreconditionError(t.describe);
  return [userEvent(user, t.event)];
}

export function changeUsernameEvent(user: UserAggregate, username: string): NewEvent[] {
  if (username === user.username) return [];
  const payload: UsernameChangedPayload = { username, old_username: user.username };
  return [
    {
      ...userEvent(user, UserEvent.usernameChanged, { ...payload }),
      uniqueConstraints: [
        { action: "remove", type: "username", field: user.username, ignoreCase: true },
        usernameConstraint(username),
      ],
    },
  ];
}

/** `user.changed` with the fields of `change` that differ from the user's; none when nothing differs. */
export function changeUserEvents(user: UserAggregate, change: UserChangedPayload): NewEvent[] {
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

/** Removes the user, releasing its username. */
export function removeUserEvent(user: UserAggregate): NewEvent {
  return {
    ...userEvent(user, UserEvent.removed, { username: user.username }),
    uniqueConstraints: [{ action: "remove", type: "username", field: user.username, ignoreCase: true }],
  };
}

export function requireMachine(user: UserAggregate): void {
  if (user.type !== UserType.machine)
    throw new FailedPreconditionError("machine credentials exist only for machine users");
}

export function requireHuman(user: UserAggregate, what: string): void {
  if (user.type !== UserType.human) throw new FailedPreconditionError(`${what} exist only for human users`);
}
