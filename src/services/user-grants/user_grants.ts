import { create } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import { apiService } from "../../api/register.ts";
import type { Caller, ResolvedContext } from "../../auth/caller.ts";
import type { Permission } from "../../auth/permissions.ts";
import {
  changeUserGrant,
  createUserGrant,
  removeUserGrant,
  type UserGrantAggregate,
  type UserGrantFields,
  userGrantOrg,
} from "../../domain/usergrant/commands.ts";
import { USER_GRANT } from "../../domain/usergrant/events.ts";
import { InvalidArgumentError, NotFoundError } from "../../errors.ts";
import type { StoredEvent } from "../../eventstore/types.ts";
import {
  type GetUserGrant,
  GetUserGrantSchema,
  PatchUserGrantSchema,
  PlatformUserGrants,
  UserGrantFieldName,
  UserGrantSchema,
  type UserGrantSearchFilter,
} from "../../gen/platform/resources/user_grant/v3alpha/user_grant_service_pb.ts";
import { newId } from "../../id.ts";
import { search, toPage, Where } from "../../query/search.ts";
import { authenticate, authorize } from "../call.ts";
import type { ServiceDeps } from "../deps.ts";
import { listDetails, resourceDetails } from "../mapping.ts";
import { nonEmptyList, patchFields } from "../patch.ts";
import { orgOwner, restrictToReadable, toDate } from "../projects/access.ts";

interface UserGrantRow {
  id: string;
  user_id: string;
  project_id: string;
  project_grant_id: string | null;
  org_id: string;
  project_org_id: string | null;
  role_keys: string[];
  created_at: Date;
  changed_at: Date;
  sequence: number | string;
  [key: string]: unknown;
}

const COLUMNS = `ug.id, ug.user_id, ug.project_id, ug.project_grant_id, ug.org_id, p.org_id AS project_org_id,
  ug.role_keys, ug.created_at, ug.changed_at, ug.sequence`;
const FROM = "user_grants ug LEFT JOIN projects p ON p.instance_id = ug.instance_id AND p.id = ug.project_id";

const FIELDS: UserGrantFields = {
  userId: "grant.user_id",
  roleKeys: "grant.role_keys",
  projectGrantId: "grant.project_grant_id",
};

function toGetUserGrant(row: UserGrantRow): GetUserGrant {
  return create(GetUserGrantSchema, {
    details: resourceDetails({
      id: row.id,
      sequence: Number(row.sequence),
      changeDate: toDate(row.changed_at),
      owner: orgOwner(row.org_id),
    }),
    grant: create(UserGrantSchema, {
      userId: row.user_id,
      projectId: row.project_id,
      projectGrantId: row.project_grant_id ?? undefined,
      roleKeys: row.role_keys,
    }),
  });
}

/**
 * Where a user grant is managed: directly given, in its project (so organization roles of the project's
 * organization and project memberships count); through a project grant, in the granted organization.
 */
function grantContext(
  instanceId: string,
  grant: { projectId: string; projectOrgId: string; projectGrantId?: string | null; orgId: string },
): ResolvedContext {
  return grant.projectGrantId
    ? { type: "org", instanceId, orgId: grant.orgId }
    : { type: "project", instanceId, orgId: grant.projectOrgId, projectId: grant.projectId };
}

const sortColumns: Record<number, string> = {
  [UserGrantFieldName.UNSPECIFIED]: "ug.created_at",
  [UserGrantFieldName.ID]: "ug.id",
  [UserGrantFieldName.CREATION_DATE]: "ug.created_at",
  [UserGrantFieldName.CHANGE_DATE]: "ug.changed_at",
  [UserGrantFieldName.USER_ID]: "ug.user_id",
  [UserGrantFieldName.PROJECT_ID]: "ug.project_id",
};

function applyFilters(where: Where, filters: UserGrantSearchFilter[]): void {
  for (const { filter } of filters) {
    switch (filter.case) {
      case "user":
        where.and((p) => `ug.user_id = ${p(filter.value.userId)}`);
        break;
      case "project":
        where.and((p) => `ug.project_id = ${p(filter.value.projectId)}`);
        break;
      case "projectGrant":
        where.and((p) => `ug.project_grant_id = ${p(filter.value.projectGrantId)}`);
        break;
      case "roleKey":
        where.and((p) => `${p(filter.value.roleKey)} = ANY(ug.role_keys)`);
        break;
      case "org":
        where.and((p) => `ug.org_id = ${p(filter.value.orgId)}`);
        break;
      case "inIds":
        where.in("ug.id", filter.value.ids);
        break;
    }
  }
}

/** PlatformUserGrants: roles of projects given to users (`/user_grants`). */
export function userGrantsService(deps: ServiceDeps) {
  /**
   * The user grant `id` of the Host's instance: 404 when unknown or the caller may not user.grant.read in
   * its context, 403 without `permission` there.
   */
  async function userGrantCall(ctx: HandlerContext, id: string, permission: Permission) {
    const { scope, caller } = await authenticate(deps, ctx);
    const instanceId = scope.instanceId ?? "";
    const rows = await deps.db.query<UserGrantRow>(
      `SELECT ${COLUMNS} FROM ${FROM} WHERE ug.instance_id = $1 AND ug.id = $2`,
      [instanceId, id],
    );
    const row = rows[0];
    if (!row) throw new NotFoundError("user grant not found");
    const context = grantContext(instanceId, {
      projectId: row.project_id,
      projectOrgId: row.project_org_id ?? "",
      projectGrantId: row.project_grant_id,
      orgId: row.org_id,
    });
    if (!(await deps.authorizer.can(caller, "user.grant.read", context)))
      throw new NotFoundError("user grant not found");
    await deps.authorizer.authorize(caller, permission, context);
    return { instanceId, caller, creator: caller.userId, row };
  }

  function details(grant: UserGrantAggregate, stored: StoredEvent[]) {
    const last = stored.filter((e) => e.aggregateType === USER_GRANT && e.aggregateId === grant.id).at(-1);
    return resourceDetails({
      id: grant.id,
      sequence: last?.sequence ?? grant.sequence,
      changeDate: last?.createdAt ?? grant.changeDate,
      owner: orgOwner(grant.orgId),
    });
  }

  /** user.grant.write where the grant will be managed; answers the organization that gives it. */
  async function authorizeCreate(
    caller: Caller,
    instanceId: string,
    projectId: string,
    projectGrantId?: string,
  ): Promise<string> {
    const { orgId, projectOrgId } = await userGrantOrg(deps.db, instanceId, projectId, projectGrantId);
    const context = grantContext(instanceId, { projectId, projectOrgId, projectGrantId, orgId });
    // An unknown project and one the caller may not read look alike.
    if (!(await deps.authorizer.can(caller, "user.grant.read", context)))
      throw new NotFoundError(projectGrantId ? "project grant not found" : "project not found");
    await deps.authorizer.authorize(caller, "user.grant.write", context);
    return orgId;
  }

  /**
   * The organization of the user `userId`, who is to get a grant given by `givingOrg`. A user the caller
   * may not read (user.read in its organization; its own user counts as readable) is answered exactly like
   * an unknown ID, with the same path (one lookup, one permission check), unless it belongs to `givingOrg`,
   * whose grants the caller manages. So user grants reveal no user IDs of organizations the caller cannot
   * see.
   */
  async function reachableUserOrg(
    caller: Caller,
    instanceId: string,
    userId: string,
    givingOrg: string,
  ): Promise<string> {
    const rows = await deps.db.query<{ org_id: string }>(
      "SELECT org_id FROM users WHERE instance_id = $1 AND id = $2",
      [instanceId, userId],
    );
    const orgId = rows[0]?.org_id ?? "";
    const readable = await deps.authorizer.can(caller, "user.read", { type: "org", instanceId, orgId });
    const self = caller.kind === "user" && caller.userId === userId;
    if (rows.length === 0 || !(readable || self || orgId === givingOrg))
      throw new NotFoundError("user not found");
    return orgId;
  }

  return apiService(PlatformUserGrants, {
    async createUserGrant(req, ctx) {
      const call = await authorize(deps, ctx, "authenticated", { ctx: req.ctx });
      if (call.context.type === "system")
        throw new InvalidArgumentError(
          "user grants live in an organization: choose one with ctx.org_id",
          "ctx",
        );
      const { caller, context } = call;
      const instanceId = context.instanceId;
      const input = req.grant!;
      const givingOrg = await authorizeCreate(caller, instanceId, input.projectId, input.projectGrantId);
      const userOrg = await reachableUserOrg(caller, instanceId, input.userId, givingOrg);
      // `ctx` names the organization the grant lives in: the user's, which gives it.
      if (context.type !== "instance" && context.orgId !== userOrg)
        throw new InvalidArgumentError("the user belongs to another organization than ctx names", "ctx");
      const grantId = newId();
      const stored = await createUserGrant(deps.eventStore, {
        instanceId,
        creator: call.creator,
        grantId,
        userId: input.userId,
        projectId: input.projectId,
        projectGrantId: input.projectGrantId,
        roleKeys: input.roleKeys,
        fields: FIELDS,
      });
      return {
        details: resourceDetails({
          id: grantId,
          sequence: stored.sequence,
          changeDate: stored.createdAt,
          owner: orgOwner(stored.resourceOwner),
        }),
      };
    },

    async getUserGrant(req, ctx) {
      const { row } = await userGrantCall(ctx, req.id, "user.grant.read");
      return { grant: toGetUserGrant(row) };
    },

    async patchUserGrant(req, ctx) {
      const fields = patchFields(PatchUserGrantSchema, req.grant, req.updateMask, "grant");
      const roleKeys = nonEmptyList(
        fields,
        "role_keys",
        req.grant?.roleKeys,
        "grant.role_keys",
        "delete the user grant to take all its roles away",
      );
      const call = await userGrantCall(ctx, req.id, "user.grant.write");
      const { grant, stored } = await changeUserGrant(deps.eventStore, {
        instanceId: call.instanceId,
        creator: call.creator,
        grantId: req.id,
        roleKeys: roleKeys ?? [],
        fields: FIELDS,
      });
      return { details: details(grant, stored) };
    },

    async deleteUserGrant(req, ctx) {
      const call = await userGrantCall(ctx, req.id, "user.grant.delete");
      const { grant, stored } = await removeUserGrant(deps.eventStore, {
        instanceId: call.instanceId,
        creator: call.creator,
        grantId: req.id,
      });
      return { details: details(grant, stored) };
    },

    async searchUserGrants(req, ctx) {
      const call = await authorize(deps, ctx, "authenticated", { ctx: req.ctx });
      if (call.context.type === "system")
        throw new InvalidArgumentError("user grants are searched in an instance or organization", "ctx");
      const instanceId = call.context.instanceId;
      const page = toPage(req.query, deps.config.maxSearchLimit);
      const where = new Where().and((p) => `ug.instance_id = ${p(instanceId)}`);
      if (call.context.type !== "instance") {
        const orgId = call.context.orgId;
        where.and((p) => `ug.org_id = ${p(orgId)}`);
      }
      // Readable: grants given by an organization where an organization role allows it, or direct grants
      // of a project where a project membership does.
      const restricted = await restrictToReadable(deps, call.caller, instanceId, "user.grant.read", where, {
        org: ["ug.org_id"],
        project: "CASE WHEN ug.project_grant_id IS NULL THEN ug.project_id END",
      });
      applyFilters(where, req.filters);
      const scope = call.context.type === "instance" ? "" : call.context.orgId;
      const result = await search<UserGrantRow>(deps.db, {
        select: COLUMNS,
        from: FROM,
        where,
        orderBy: sortColumns[req.sortingColumn] ?? "ug.created_at",
        tiebreak: "ug.id",
        page,
        instanceId,
        aggregateTypes: [USER_GRANT],
        table: { from: "user_grants ug", alias: "ug" },
        counted: !restricted && req.filters.length === 0 ? { resource: "user_grants", scope } : undefined,
      });
      return {
        details: listDetails(result),
        sortingColumn: req.sortingColumn,
        result: result.rows.map(toGetUserGrant),
      };
    },
  });
}
