/**
 * Commands of user schemas. A schema is checked (./json-schema.ts) before its event is stored; its type is
 * claimed as a unique constraint of the instance. Removal is refused while users have the schema: it takes
 * the schema's use lock exclusively, and every write of a user's custom data takes it shared
 * (`lockSchemaUse`), so no user can get the schema while it is being removed.
 */
import { FailedPreconditionError, NotFoundError } from "../../errors.ts";
import type { EventStore } from "../../eventstore/eventstore.ts";
import type { CommandTx, NewEvent, PushContext, StoredEvent } from "../../eventstore/types.ts";
import {
  foldUserSchema,
  TYPE_CONSTRAINT,
  USER_SCHEMA,
  type UserSchemaAggregate,
  type UserSchemaChangedPayload,
  type UserSchemaConfig,
  UserSchemaEvent,
  UserSchemaState,
} from "./events.ts";
import { sameJson } from "./field-access.ts";
import { checkSchema } from "./json-schema.ts";

export interface Version {
  id: string;
  sequence: number;
  changeDate: Date;
}

function versionOf(event: StoredEvent): Version {
  return { id: event.aggregateId, sequence: event.sequence, changeDate: event.createdAt };
}

const typeClaim = (type: string) => ({
  action: "add" as const,
  type: TYPE_CONSTRAINT,
  field: type,
  message: `a user schema of type "${type}" already exists`,
});
const typeRelease = (type: string) => ({ action: "remove" as const, type: TYPE_CONSTRAINT, field: type });

function event(
  ctx: PushContext,
  id: string,
  type: string,
  payload = {},
  unique?: NewEvent["uniqueConstraints"],
) {
  return {
    aggregateType: USER_SCHEMA,
    aggregateId: id,
    type,
    resourceOwner: ctx.instanceId,
    payload,
    ...(unique ? { uniqueConstraints: unique } : {}),
  } satisfies NewEvent;
}

async function load(tx: CommandTx, id: string): Promise<UserSchemaAggregate> {
  const state = foldUserSchema(await tx.load(USER_SCHEMA, id));
  if (!state) throw new NotFoundError(`user schema ${id} not found`);
  return state;
}

/**
 * Holds the schema against removal until the transaction ends: `shared` for a user's data written with it,
 * exclusive for the removal.
 */
export async function lockSchemaUse(tx: CommandTx, instanceId: string, id: string, shared: boolean) {
  await tx.query(
    `SELECT ${shared ? "pg_advisory_xact_lock_shared" : "pg_advisory_xact_lock"}(hashtext($1))`,
    [`user_schema:${instanceId}:${id}`],
  );
}

/** Adds a schema, active, revision 1. INVALID_ARGUMENT naming the problem of a schema that cannot be used. */
export async function addUserSchema(
  store: EventStore,
  ctx: PushContext,
  id: string,
  config: UserSchemaConfig,
): Promise<Version> {
  checkSchema(config.schema, "user_schema.schema");
  const [added] = await store.push(ctx, async () => [
    event(ctx, id, UserSchemaEvent.added, { ...config }, [typeClaim(config.type)]),
  ]);
  return versionOf(added);
}

/** Changes what differs (no event when nothing does); a changed `schema` is the next revision. */
export async function changeUserSchema(
  store: EventStore,
  ctx: PushContext,
  id: string,
  change: Partial<UserSchemaConfig>,
): Promise<Version> {
  if (change.schema !== undefined) checkSchema(change.schema, "user_schema.schema");
  let current: Version | undefined;
  const events = await store.push(ctx, async (tx) => {
    const state = await load(tx, id);
    current = { id, sequence: state.sequence, changeDate: state.changedAt };
    const payload: UserSchemaChangedPayload = {};
    const unique: NonNullable<NewEvent["uniqueConstraints"]> = [];
    if (change.type !== undefined && change.type !== state.type) {
      payload.type = change.type;
      unique.push(typeRelease(state.type), typeClaim(change.type));
    }
    if (change.schema !== undefined && !sameJson(change.schema, state.schema)) {
      payload.schema = change.schema;
      payload.revision = state.revision + 1;
    }
    if (
      change.possible_authenticators !== undefined &&
      change.possible_authenticators.join() !== state.possible_authenticators.join()
    )
      payload.possible_authenticators = change.possible_authenticators;
    if (Object.keys(payload).length === 0) return [];
    return [event(ctx, id, UserSchemaEvent.changed, payload, unique.length ? unique : undefined)];
  });
  return events.length ? versionOf(events[0]) : current!;
}

/** Deactivates (`active: false`) or reactivates a schema; nothing when it is in that state already. */
export async function setUserSchemaState(
  store: EventStore,
  ctx: PushContext,
  id: string,
  active: boolean,
): Promise<Version> {
  let current: Version | undefined;
  const events = await store.push(ctx, async (tx) => {
    const state = await load(tx, id);
    current = { id, sequence: state.sequence, changeDate: state.changedAt };
    const target = active ? UserSchemaState.active : UserSchemaState.inactive;
    if (state.state === target) return [];
    return [event(ctx, id, active ? UserSchemaEvent.reactivated : UserSchemaEvent.deactivated)];
  });
  return events.length ? versionOf(events[0]) : current!;
}

/** Removes a schema and frees its type. FAILED_PRECONDITION while a user has it. */
export async function removeUserSchema(store: EventStore, ctx: PushContext, id: string): Promise<Version> {
  const [removed] = await store.push(ctx, async (tx) => {
    const state = await load(tx, id);
    await lockSchemaUse(tx, ctx.instanceId, id, false);
    const [used] = await tx.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM users WHERE instance_id = $1 AND schema_id = $2",
      [ctx.instanceId, id],
    );
    if (Number(used.n) > 0)
      throw new FailedPreconditionError(
        `user schema ${id} is used by ${used.n} user(s): give them another schema or delete them first`,
      );
    return [event(ctx, id, UserSchemaEvent.removed, { type: state.type }, [typeRelease(state.type)])];
  });
  return versionOf(removed);
}
