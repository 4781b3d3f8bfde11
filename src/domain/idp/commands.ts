/**
 * Commands of identity providers. Client secrets must be read back (the login flow presents them to the
 * provider), so they are sealed with the master key by the caller and written here to
 * `idp_client_secrets` in the transaction of the events; no event ever carries them.
 */
import { FailedPreconditionError, NotFoundError } from "../../errors.ts";
import type { EventStore } from "../../eventstore/eventstore.ts";
import type { NewEvent, PushContext, StoredEvent } from "../../eventstore/types.ts";
import type { Queryable } from "../../storage/database.ts";
import {
  type ChildPolicy,
  foldIdp,
  IDP,
  type IdpAggregate,
  type IdpConfig,
  IdpEvent,
  type IdpFields,
  type IdpOptions,
  type IdpState,
  type IdpType,
} from "./events.ts";

/** Result of a command: the version of the provider after it. */
export interface Version {
  id: string;
  sequence: number;
  changeDate: Date;
}

function versionOf(event: StoredEvent): Version {
  return { id: event.aggregateId, sequence: event.sequence, changeDate: event.createdAt };
}

const TYPE_NAMES: Record<number, string> = {
  1: "oidc",
  4: "oauth",
  8: "codehost_b",
  9: "codehost_b_self_hosted",
};

/** The provider `id`, which must exist and be of `type` (NOT_FOUND otherwise). */
async function loadIdp(
  tx: { load(type: string, id: string): Promise<StoredEvent[]> },
  id: string,
  type?: IdpType,
): Promise<IdpAggregate> {
  const state = foldIdp(await tx.load(IDP, id));
  if (!state || (type !== undefined && state.type !== type))
    throw new NotFoundError(
      type === undefined
        ? `identity provider ${id} not found`
        : `identity provider ${id} of type ${TYPE_NAMES[type]} not found`,
    );
  return state;
}

async function storeSecret(tx: Queryable, instanceId: string, id: string, sealed: string): Promise<void> {
  await tx.query(
    `INSERT INTO idp_client_secrets (instance_id, idp_id, client_secret) VALUES ($1, $2, $3)
     ON CONFLICT (instance_id, idp_id) DO UPDATE SET client_secret = EXCLUDED.client_secret`,
    [instanceId, id, sealed],
  );
}

/** Adds a provider with its sealed client secret. */
export async function addIdp(
  store: EventStore,
  ctx: PushContext,
  id: string,
  fields: IdpFields,
  sealedSecret: string,
): Promise<Version> {
  const [event] = await store.push(ctx, async (tx) => {
    await storeSecret(tx, ctx.instanceId, id, sealedSecret);
    return [
      {
        aggregateType: IDP,
        aggregateId: id,
        type: IdpEvent.added,
        resourceOwner: fields.owner_id,
        payload: { ...fields, options: { ...fields.options }, config: { ...fields.config } },
      },
    ];
  });
  return versionOf(event);
}

/** A change of a provider in its owning context; absent members stay. */
export interface IdpChange {
  name?: string;
  state?: IdpState;
  /** Options to change (merged into the current options). */
  options?: Partial<IdpOptions>;
  /** Members to change (merged into the current configuration). */
  config?: Partial<IdpConfig>;
  /** A new client secret: `sealed` is stored unless `isCurrent(currentSealed)` says it is the same one. */
  clientSecret?: { sealed: string; isCurrent(currentSealed: string): boolean };
}

/** JSON with the keys of every object sorted: event payloads are stored as jsonb, which reorders keys. */
function canonical(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(canonical);
  if (value !== null && typeof value === "object")
    return Object.fromEntries(
      Object.keys(value)
        .sort()
        .map((key) => [key, canonical((value as Record<string, unknown>)[key])]),
    );
  return value;
}

/** The members of a change that are given (undefined: not given, the current value stays). */
function definedOnly<T extends object>(change: Partial<T>): Partial<T> {
  return Object.fromEntries(Object.entries(change).filter(([, value]) => value !== undefined)) as Partial<T>;
}

/** Whether two values are equal as JSON, whatever the order of their keys. */
const sameJson = (a: unknown, b: unknown) => JSON.stringify(canonical(a)) === JSON.stringify(canonical(b));

/**
 * Changes what differs (no event when nothing differs). NOT_FOUND when the provider does not exist or is
 * of another type.
 */
export async function changeIdp(
  store: EventStore,
  ctx: PushContext,
  id: string,
  type: IdpType,
  change: IdpChange,
): Promise<Version> {
  let current: Version | undefined;
  const events = await store.push(ctx, async (tx) => {
    const state = await loadIdp(tx, id, type);
    current = { id, sequence: state.sequence, changeDate: state.changedAt };
    const payload: Record<string, unknown> = {};
    if (change.name !== undefined && change.name !== state.name) payload.name = change.name;
    if (change.state !== undefined && change.state !== state.state) payload.state = change.state;
    if (change.options !== undefined) {
      const merged: IdpOptions = { ...state.options, ...definedOnly(change.options) };
      if (!sameJson(merged, state.options)) payload.options = merged;
    }
    if (change.config !== undefined) {
      const merged: IdpConfig = { ...state.config, ...definedOnly(change.config) };
      if (!sameJson(merged, state.config)) payload.config = merged;
    }
    if (change.clientSecret) {
      const rows = await tx.query<{ client_secret: string }>(
        "SELECT client_secret FROM idp_client_secrets WHERE instance_id = $1 AND idp_id = $2",
        [ctx.instanceId, id],
      );
      if (!rows[0] || !change.clientSecret.isCurrent(rows[0].client_secret)) {
        await storeSecret(tx, ctx.instanceId, id, change.clientSecret.sealed);
        payload.client_secret_changed = true;
      }
    }
    if (Object.keys(payload).length === 0) return [];
    return [
      { aggregateType: IDP, aggregateId: id, type: IdpEvent.changed, resourceOwner: state.owner_id, payload },
    ];
  });
  return events.length ? versionOf(events[0]) : current!;
}

/**
 * Sets a child context's state policy of a provider: ACTIVATE / DEACTIVATE (1 / 2) store it, INHERIT (3)
 * removes it. No event when it is already so. NOT_FOUND when the provider does not exist or is of another
 * type; FAILED_PRECONDITION when the provider is not the instance's (only those have child contexts).
 */
export async function setIdpStatePolicy(
  store: EventStore,
  ctx: PushContext,
  id: string,
  type: IdpType,
  contextId: string,
  policy: ChildPolicy | 3,
): Promise<Version> {
  let current: Version | undefined;
  const events = await store.push(ctx, async (tx) => {
    const state = await loadIdp(tx, id, type);
    if (state.owner_type !== 2)
      throw new FailedPreconditionError(
        "only an instance's identity provider has state policies in organizations",
      );
    current = { id, sequence: state.sequence, changeDate: state.changedAt };
    const existing = state.policies.get(contextId);
    if (policy === 3) {
      if (existing === undefined) return [];
      return [
        {
          aggregateType: IDP,
          aggregateId: id,
          type: IdpEvent.statePolicyRemoved,
          resourceOwner: state.owner_id,
          payload: { context_id: contextId },
        },
      ];
    }
    if (existing === policy) return [];
    return [
      {
        aggregateType: IDP,
        aggregateId: id,
        type: IdpEvent.statePolicySet,
        resourceOwner: state.owner_id,
        payload: { context_id: contextId, policy },
      },
    ];
  });
  return events.length ? versionOf(events[0]) : current!;
}

/** Removes a provider (its policies go with it, its secret is deleted). NOT_FOUND when it does not exist. */
export async function removeIdp(store: EventStore, ctx: PushContext, id: string): Promise<Version> {
  const events = await store.push(ctx, async (tx) => {
    const state = await loadIdp(tx, id);
    await tx.query("DELETE FROM idp_client_secrets WHERE instance_id = $1 AND idp_id = $2", [
      ctx.instanceId,
      id,
    ]);
    const event: NewEvent = {
      aggregateType: IDP,
      aggregateId: id,
      type: IdpEvent.removed,
      resourceOwner: state.owner_id,
      payload: { owner_type: state.owner_type, owner_id: state.owner_id, name: state.name },
    };
    return [event];
  });
  return versionOf(events[0]);
}
