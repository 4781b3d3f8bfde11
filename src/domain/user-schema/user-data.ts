/**
 * The custom data of a human user (docs/user-schemas.md "Users"): which schema the user has, the revision
 * its data was last checked against, and the data. Deciding a change: the schema must exist (and be active
 * to be given to a user), the caller must be allowed to write every property that changes
 * (./field-access.ts), and the resulting document must match the schema's current revision.
 */
import {
  FailedPreconditionError,
  InvalidArgumentError,
  NotFoundError,
  PermissionDeniedError,
} from "../../errors.ts";
import type { CommandTx } from "../../eventstore/types.ts";
import { lockSchemaUse } from "./commands.ts";
import { UserSchemaState } from "./events.ts";
import { mergePatch, type Role, sameJson, unwritableChange } from "./field-access.ts";
import { checkData, validatorOf } from "./json-schema.ts";

type Json = Record<string, unknown>;

/** A user's schema and data (all null: the user has no schema). */
export interface UserData {
  schemaId: string | null;
  revision: number | null;
  data: Json | null;
}

export const NO_DATA: UserData = { schemaId: null, revision: null, data: null };

/**
 * A requested change: `schemaId` another schema (its data then replaces the document: `data` or `{}`), ""
 * none; `data` a JSON merge patch (RFC 7396) of the document when the schema stays (the whole document
 * on creation).
 */
export interface UserDataChange {
  schemaId?: string;
  data?: Json;
}

interface SchemaRow {
  [column: string]: unknown;
  id: string;
  state: number;
  schema: Json;
  revision: number;
}

async function readSchema(tx: CommandTx, instanceId: string, id: string): Promise<SchemaRow | undefined> {
  const rows = await tx.query<SchemaRow>(
    "SELECT id, state, schema, revision FROM user_schemas WHERE instance_id = $1 AND id = $2",
    [instanceId, id],
  );
  return rows[0] && { ...rows[0], revision: Number(rows[0].revision) };
}

function denyUnwritable(path: string | undefined): void {
  if (path !== undefined)
    throw new PermissionDeniedError(`user.data: the caller may not write the property at ${path}`);
}

/**
 * The user's data after `change` made by `role`, or undefined when nothing changes. NOT_FOUND for an unknown
 * schema, FAILED_PRECONDITION for an inactive one given to the user (or data without a schema on a user
 * that has none), PERMISSION_DENIED naming the first property `role` may not write, INVALID_ARGUMENT naming
 * the JSON pointer of the first problem of the resulting document.
 */
export async function decideUserData(
  tx: CommandTx,
  instanceId: string,
  current: UserData,
  change: UserDataChange,
  role: Role,
): Promise<UserData | undefined> {
  if (change.schemaId === undefined && change.data === undefined) return undefined;
  const targetId = change.schemaId ?? current.schemaId;
  if (targetId === null)
    throw new FailedPreconditionError("the user has no schema: give user.schema_id with user.data");
  const previous = current.schemaId ? await readSchema(tx, instanceId, current.schemaId) : undefined;
  if (targetId === "") {
    if (change.data !== undefined)
      throw new InvalidArgumentError("must be absent when user.schema_id is empty", "user.data");
    if (current.schemaId === null) return undefined;
    if (previous) denyUnwritable(unwritableChange(previous.schema, current.data ?? {}, undefined, role));
    return NO_DATA;
  }
  // the lock first: a removal that committed meanwhile is then seen by the read
  await lockSchemaUse(tx, instanceId, targetId, true);
  const schema = await readSchema(tx, instanceId, targetId);
  if (!schema) throw new NotFoundError(`user schema ${targetId} not found`);
  let data: Json;
  if (targetId !== current.schemaId) {
    if (schema.state !== UserSchemaState.active)
      throw new FailedPreconditionError(`user schema ${targetId} is inactive: it cannot be given to users`);
    if (previous) denyUnwritable(unwritableChange(previous.schema, current.data ?? {}, undefined, role));
    data = mergePatch({}, change.data ?? {});
    denyUnwritable(unwritableChange(schema.schema, undefined, data, role));
  } else {
    data = mergePatch(current.data ?? {}, change.data ?? {});
    denyUnwritable(unwritableChange(schema.schema, current.data ?? {}, data, role));
  }
  const validate = validatorOf({ instanceId, schemaId: schema.id, revision: schema.revision }, schema.schema);
  checkData(validate, data, "user.data");
  if (targetId === current.schemaId && schema.revision === current.revision && sameJson(data, current.data))
    return undefined;
  return { schemaId: targetId, revision: schema.revision, data };
}
