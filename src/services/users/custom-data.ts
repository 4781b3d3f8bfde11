/**
 * The users API's side of custom data (docs/user-schemas.md "Users"): reading it as the caller may see it,
 * and turning a request's `schema_id` / `data` into a change the domain decides on.
 */
import type { JsonObject } from "@bufbuild/protobuf";
import type { Caller } from "../../auth/caller.ts";
import { type Role, readableData } from "../../domain/user-schema/field-access.ts";
import type { UserDataChange } from "../../domain/user-schema/user-data.ts";
import { FailedPreconditionError, InvalidArgumentError } from "../../errors.ts";
import { getUserSchemas } from "../../query/user-schemas.ts";
import type { Queryable } from "../../storage/database.ts";
import type { UserRow } from "./read.ts";

/** The field permissions that apply to `caller` on the user `userId`: the user itself is `self`. */
export function roleOn(caller: Caller, userId: string): Role {
  return caller.kind === "user" && caller.userId === userId ? "self" : "owner";
}

/** Whether a PatchUser body changes nothing but the custom data (what the user itself may do). */
export function onlyData(
  patch:
    | { username?: string; human?: unknown; machine?: unknown; schemaId?: string; data?: JsonObject }
    | undefined,
): boolean {
  return (
    patch !== undefined &&
    patch.data !== undefined &&
    patch.username === undefined &&
    patch.human === undefined &&
    patch.machine === undefined &&
    patch.schemaId === undefined
  );
}

/**
 * The change a CreateUser or PatchUser asks for, or undefined when it gives neither `schema_id` nor `data`.
 * Custom data exists only for human users: INVALID_ARGUMENT on creation, FAILED_PRECONDITION on a patch.
 */
export function dataChange(
  input: { schemaId?: string; data?: JsonObject },
  human: boolean,
  creating: boolean,
): UserDataChange | undefined {
  const schemaId = creating ? input.schemaId || undefined : input.schemaId;
  if (schemaId === undefined && input.data === undefined) return undefined;
  if (!human) {
    if (creating) throw new InvalidArgumentError("custom data exists only for human users", "user.schema_id");
    throw new FailedPreconditionError("user.data: custom data exists only for human users");
  }
  if (creating && schemaId === undefined)
    throw new InvalidArgumentError("is required with user.data", "user.schema_id");
  return { schemaId, data: input.data as Record<string, unknown> | undefined };
}

/** Each row's data as `role(row)` may read it (by its schema's field permissions); rows without data: none. */
export async function visibleData(
  db: Queryable,
  instanceId: string,
  rows: UserRow[],
  role: (row: UserRow) => Role,
): Promise<Map<string, Record<string, unknown>>> {
  const withData = rows.filter((r) => r.schema_id && r.data);
  const schemas = await getUserSchemas(
    db,
    instanceId,
    withData.map((r) => r.schema_id as string),
  );
  const out = new Map<string, Record<string, unknown>>();
  for (const row of withData) {
    // a schema cannot be removed while users have it; should it be missing, the defaults apply
    const schema = schemas.get(row.schema_id as string)?.schema ?? {};
    out.set(row.id, readableData(schema, row.data as Record<string, unknown>, role(row)));
  }
  return out;
}
