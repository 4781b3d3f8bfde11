/**
 * User schemas (docs/user-schemas.md): the JSON Schemas (draft 2020-12) the custom data of human users is
 * checked against. Aggregate `user_schema`; ID: a new ID; resource owner: the instance. `type` is unique in
 * the instance (a unique constraint of the events). `revision` starts at 1 and grows with every change of
 * `schema`; users record the revision their data was last checked against.
 */
import type { StoredEvent } from "../../eventstore/types.ts";

export const USER_SCHEMA = "user_schema";

export const UserSchemaEvent = {
  /** The whole schema: type, schema, possible authenticators; active, revision 1. */
  added: "user_schema.added",
  /** Only the fields that changed; `revision` is there when `schema` changed (the new revision). */
  changed: "user_schema.changed",
  /** New users may no longer use it (users that have it keep it). */
  deactivated: "user_schema.deactivated",
  reactivated: "user_schema.reactivated",
  removed: "user_schema.removed",
} as const;

/** UserSchemaState of the API. */
export const UserSchemaState = { active: 1, inactive: 2 } as const;
export type UserSchemaState = (typeof UserSchemaState)[keyof typeof UserSchemaState];

/** AuthenticatorType of the API (what users of the schema may authenticate with). */
export const AuthenticatorType = {
  username: 1,
  password: 2,
  webauthn: 3,
  totp: 4,
  otpEmail: 5,
  otpSms: 6,
  identityProvider: 7,
} as const;

/** Unique constraint of the types of an instance. */
export const TYPE_CONSTRAINT = "user_schema_type";

/** Payload of `user_schema.added`. */
export interface UserSchemaConfig {
  type: string;
  /** The JSON Schema, as given. */
  schema: Record<string, unknown>;
  /** AuthenticatorType values, without duplicates, sorted. */
  possible_authenticators: number[];
}

/** Payload of `user_schema.changed`: the fields that changed. */
export interface UserSchemaChangedPayload extends Partial<UserSchemaConfig> {
  /** The new revision, when `schema` changed. */
  revision?: number;
}

export interface UserSchemaAggregate extends UserSchemaConfig {
  id: string;
  state: UserSchemaState;
  revision: number;
  sequence: number;
  changedAt: Date;
}

/** Current state of a schema from its events; undefined when it does not exist (never added or removed). */
export function foldUserSchema(events: StoredEvent[]): UserSchemaAggregate | undefined {
  let state: UserSchemaAggregate | undefined;
  for (const e of events) {
    const at = { sequence: e.sequence, changedAt: e.createdAt };
    switch (e.type) {
      case UserSchemaEvent.added: {
        const config = e.payload as unknown as UserSchemaConfig;
        state = { ...config, id: e.aggregateId, state: UserSchemaState.active, revision: 1, ...at };
        break;
      }
      case UserSchemaEvent.changed:
        if (state) state = { ...state, ...(e.payload as UserSchemaChangedPayload), ...at };
        break;
      case UserSchemaEvent.deactivated:
        if (state) state = { ...state, state: UserSchemaState.inactive, ...at };
        break;
      case UserSchemaEvent.reactivated:
        if (state) state = { ...state, state: UserSchemaState.active, ...at };
        break;
      case UserSchemaEvent.removed:
        state = undefined;
        break;
    }
  }
  return state;
}
