/**
 * A user's aggregate: its state folded from its events, what every user command decides on, and the
 * helpers of those commands (an event on the aggregate, the human/machine preconditions).
 */
import { FailedPreconditionError } from "../../errors.ts";
import type { NewEvent, StoredEvent } from "../../eventstore/types.ts";
import { NO_DATA, type UserData } from "../user-schema/user-data.ts";
import {
  AccessTokenType,
  type CodeAddedPayload,
  type DataSetPayload,
  type HumanAddedPayload,
  type MachineAddedPayload,
  type PasswordCodeReason,
  type SecondFactor,
  USER,
  type UserChangedPayload,
  UserEvent,
  UserState,
  UserType,
} from "./events.ts";

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
  /** Ends of the last temporary lockouts of second factors (they may be over); a factor's goes on a reset. */
  factorLockedUntil: Partial<Record<SecondFactor, Date>>;
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
  /** Password codes: what the code is for (a code added without a reason is a reset's). */
  reason?: PasswordCodeReason;
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
          factorLockedUntil: {},
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
          ...(channel === "password" ? { reason: c.reason ?? "reset" } : {}),
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
      case UserEvent.factorCheckFailed:
      case UserEvent.factorCheckSucceeded: {
        const factor = p.factor as SecondFactor;
        const until = e.type === UserEvent.factorCheckFailed ? p.locked_until : undefined;
        if (typeof until === "string") user.factorLockedUntil[factor] = new Date(until);
        else delete user.factorLockedUntil[factor];
        break;
      }
      case UserEvent.locked:
        user.state = UserState.locked;
        break;
      case UserEvent.unlocked:
        user.state = UserState.active;
        user.passwordLockedUntil = undefined;
        user.factorLockedUntil = {};
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

export function requireMachine(user: UserAggregate): void {
  if (user.type !== UserType.machine)
    throw new FailedPreconditionError("machine credentials exist only for machine users");
}

export function requireHuman(user: UserAggregate, what: string): void {
  if (user.type !== UserType.human) throw new FailedPreconditionError(`${what} exist only for human users`);
}
