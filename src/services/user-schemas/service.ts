import { create } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import { type ApiService, apiService } from "../../api/register.ts";
import type { Permission } from "../../auth/permissions.ts";
import {
  addUserSchema,
  changeUserSchema,
  removeUserSchema,
  setUserSchemaState,
} from "../../domain/user-schema/commands.ts";
import type { UserSchemaConfig } from "../../domain/user-schema/events.ts";
import { InternalError, InvalidArgumentError, NotFoundError } from "../../errors.ts";
import {
  type AuthenticatorType,
  type GetUserSchema,
  GetUserSchemaSchema,
  PatchUserSchemaSchema,
  UserSchemaSchema,
  type UserSchemaSearchFilter,
  type UserSchemaState,
} from "../../gen/platform/resources/user_schema/v3alpha/user_schema_pb.ts";
import {
  PlatformUserSchemas,
  SearchUserSchemasResponseSchema,
} from "../../gen/platform/resources/user_schema/v3alpha/user_schema_service_pb.ts";
import { newId } from "../../id.ts";
import { toPage } from "../../query/search.ts";
import {
  getUserSchema,
  searchUserSchemas,
  type UserSchemaFilter,
  type UserSchemaRow,
} from "../../query/user-schemas.ts";
import { authorize } from "../call.ts";
import type { ServiceDeps } from "../deps.ts";
import { listDetails, resourceDetails } from "../mapping.ts";
import { patchFields } from "../patch.ts";

type UserSchemaPermission = Extract<Permission, `userschema.${string}`>;

/** `details` of a schema: its version, owned by the instance. */
function schemaDetails(version: { id: string; sequence: number; changeDate?: Date }, instanceId: string) {
  return resourceDetails({ ...version, owner: { type: 2, id: instanceId } });
}

function toGetUserSchema(row: UserSchemaRow, instanceId: string): GetUserSchema {
  return create(GetUserSchemaSchema, {
    details: schemaDetails(
      { id: row.id, sequence: Number(row.sequence), changeDate: row.changed_at },
      instanceId,
    ),
    userSchema: create(UserSchemaSchema, {
      type: row.type,
      schema: row.schema as never,
      possibleAuthenticators: row.possible_authenticators as AuthenticatorType[],
    }),
    state: row.state as UserSchemaState,
    revision: Number(row.revision),
  });
}

/** The authenticators as stored: without duplicates, in the enum's order. */
function authenticators(list: readonly number[]): number[] {
  if (list.includes(0))
    throw new InvalidArgumentError(
      "must not hold AUTHENTICATOR_TYPE_UNSPECIFIED",
      "user_schema.possible_authenticators",
    );
  return [...new Set(list)].sort((a, b) => a - b);
}

function toFilters(filters: UserSchemaSearchFilter[]): UserSchemaFilter[] {
  return filters.map((f, i) => {
    switch (f.filter.case) {
      case "id":
        return { id: f.filter.value.id };
      case "type":
        return { type: f.filter.value.type, method: f.filter.value.method };
      case "state":
        return { state: f.filter.value.state };
      default:
        throw new InvalidArgumentError("one of id, type, state must be set", `filters[${i}]`);
    }
  });
}

/**
 * PlatformUserSchemas: the JSON Schemas of the custom data of human users in the instance of the Host
 * header (docs/user-schemas.md). Instance-wide: only instance roles grant `userschema.*`.
 */
export function userSchemasService(deps: ServiceDeps): ApiService {
  const gate = async (ctx: HandlerContext, permission: UserSchemaPermission) => {
    const call = await authorize(deps, ctx, permission);
    if (call.context.type === "system") throw new InternalError("user schemas need an instance");
    const instanceId = call.context.instanceId;
    return { instanceId, push: { instanceId, creator: call.creator } };
  };
  return apiService(PlatformUserSchemas, {
    async createUserSchema(req, ctx) {
      const call = await gate(ctx, "userschema.write");
      const input = req.userSchema!; // required by the declared rules, as are type and schema
      const config: UserSchemaConfig = {
        type: input.type,
        schema: input.schema as Record<string, unknown>,
        possible_authenticators: authenticators(input.possibleAuthenticators),
      };
      const version = await addUserSchema(deps.eventStore, call.push, newId(), config);
      return { details: schemaDetails(version, call.instanceId) };
    },

    async patchUserSchema(req, ctx) {
      const fields = patchFields(PatchUserSchemaSchema, req.userSchema, req.updateMask, "user_schema");
      const call = await gate(ctx, "userschema.write");
      const p = req.userSchema!;
      const version = await changeUserSchema(deps.eventStore, call.push, req.id, {
        type: fields.has("type") ? (p.type ?? "") : undefined,
        schema: fields.has("schema") ? ((p.schema ?? {}) as Record<string, unknown>) : undefined,
        possible_authenticators: fields.has("possible_authenticators")
          ? authenticators(p.possibleAuthenticators)
          : undefined,
      });
      return { details: schemaDetails(version, call.instanceId) };
    },

    async deleteUserSchema(req, ctx) {
      const call = await gate(ctx, "userschema.delete");
      const version = await removeUserSchema(deps.eventStore, call.push, req.id);
      return { details: schemaDetails(version, call.instanceId) };
    },

    async getUserSchema(req, ctx) {
      const call = await gate(ctx, "userschema.read");
      const row = await getUserSchema(deps.db, call.instanceId, req.id);
      if (!row) throw new NotFoundError(`user schema ${req.id} not found`);
      const schema = toGetUserSchema(row, call.instanceId);
      return {
        details: schema.details,
        userSchema: schema.userSchema,
        state: schema.state,
        revision: schema.revision,
      };
    },

    async searchUserSchemas(req, ctx) {
      const call = await gate(ctx, "userschema.read");
      const page = toPage(req.query, deps.config.maxSearchLimit);
      const result = await searchUserSchemas(
        deps.db,
        call.instanceId,
        toFilters(req.filters),
        req.sortingColumn,
        page,
      );
      return create(SearchUserSchemasResponseSchema, {
        details: listDetails(result),
        sortingColumn: req.sortingColumn,
        result: result.rows.map((row) => toGetUserSchema(row, call.instanceId)),
      });
    },

    async deactivateUserSchema(req, ctx) {
      const call = await gate(ctx, "userschema.write");
      const version = await setUserSchemaState(deps.eventStore, call.push, req.id, false);
      return { details: schemaDetails(version, call.instanceId) };
    },

    async reactivateUserSchema(req, ctx) {
      const call = await gate(ctx, "userschema.write");
      const version = await setUserSchemaState(deps.eventStore, call.push, req.id, true);
      return { details: schemaDetails(version, call.instanceId) };
    },
  });
}
