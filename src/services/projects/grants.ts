import { create } from "@bufbuild/protobuf";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type { Permission } from "../../auth/permissions.ts";
import {
  addProjectGrant,
  changeProjectGrant,
  removeProjectGrant,
  setProjectGrantState,
} from "../../domain/project/commands.ts";
import { PROJECT } from "../../domain/project/events.ts";
import { InvalidArgumentError, NotFoundError } from "../../errors.ts";
import {
  type GetProjectGrant,
  GetProjectGrantSchema,
  PatchProjectGrantSchema,
  type PlatformProjects,
  ProjectGrantFieldName,
  ProjectGrantSchema,
  type ProjectGrantSearchFilter,
} from "../../gen/platform/resources/project/v3alpha/project_service_pb.ts";
import { search, toPage, Where } from "../../query/search.ts";
import { authenticate, authorize } from "../call.ts";
import type { ServiceDeps } from "../deps.ts";
import { listDetails, resourceDetails } from "../mapping.ts";
import { nonEmptyList, patchFields } from "../patch.ts";
import { orgOwner, projectCall, restrictToReadable, toDate } from "./access.ts";

interface GrantRow {
  id: string;
  project_id: string;
  org_id: string;
  granted_org_id: string;
  role_keys: string[];
  state: number;
  created_at: Date;
  changed_at: Date;
  sequence: number | string;
  [key: string]: unknown;
}

const COLUMNS =
  "g.id, g.project_id, g.org_id, g.granted_org_id, g.role_keys, g.state, g.created_at, g.changed_at, g.sequence";

function toGetGrant(row: GrantRow): GetProjectGrant {
  return create(GetProjectGrantSchema, {
    details: resourceDetails({
      id: row.id,
      sequence: Number(row.sequence),
      changeDate: toDate(row.changed_at),
      owner: orgOwner(row.org_id),
    }),
    projectId: row.project_id,
    grant: create(ProjectGrantSchema, { grantedOrgId: row.granted_org_id, roleKeys: row.role_keys }),
    state: row.state,
  });
}

const sortColumns: Record<number, string> = {
  [ProjectGrantFieldName.UNSPECIFIED]: "g.created_at",
  [ProjectGrantFieldName.ID]: "g.id",
  [ProjectGrantFieldName.CREATION_DATE]: "g.created_at",
  [ProjectGrantFieldName.CHANGE_DATE]: "g.changed_at",
};

function applyFilters(where: Where, filters: ProjectGrantSearchFilter[]): void {
  for (const { filter } of filters) {
    switch (filter.case) {
      case "grantedOrg":
        where.and((p) => `g.granted_org_id = ${p(filter.value.grantedOrgId)}`);
        break;
      case "roleKey":
        where.and((p) => `${p(filter.value.roleKey)} = ANY(g.role_keys)`);
        break;
      case "state":
        where.and((p) => `g.state = ${p(filter.value.state)}`);
        break;
      case "inIds":
        where.in("g.id", filter.value.ids);
        break;
    }
  }
}

/** `project_id` of SearchProjectGrants meaning every project. */
const ANY_PROJECT = "-";

/** The project grant RPCs of PlatformProjects (`/projects/{project_id}/grants`). */
export function grantRpcs(deps: ServiceDeps): Partial<ServiceImpl<typeof PlatformProjects>> {
  /**
   * The project grant `grantId` of the project: 404 `project grant not found` when unknown or the caller
   * holds project.grant.read neither in the project nor in the granted organization; 403 without
   * `permission` (write and delete: in the project).
   */
  async function grantCall(ctx: HandlerContext, projectId: string, grantId: string, permission: Permission) {
    const { scope, caller } = await authenticate(deps, ctx);
    const instanceId = scope.instanceId ?? "";
    const rows = await deps.db.query<GrantRow>(
      `SELECT ${COLUMNS} FROM project_grants g WHERE g.instance_id = $1 AND g.project_id = $2 AND g.id = $3`,
      [instanceId, projectId, grantId],
    );
    const row = rows[0];
    if (!row) throw new NotFoundError("project grant not found");
    const project = { type: "project" as const, instanceId, orgId: row.org_id, projectId };
    const granted = { type: "org" as const, instanceId, orgId: row.granted_org_id };
    const readable =
      (await deps.authorizer.can(caller, "project.grant.read", project)) ||
      (await deps.authorizer.can(caller, "project.grant.read", granted));
    if (!readable) throw new NotFoundError("project grant not found");
    if (permission !== "project.grant.read") await deps.authorizer.authorize(caller, permission, project);
    return { instanceId, creator: caller.userId, row };
  }

  const details = (row: GrantRow, version: { sequence: number; changeDate?: Date }) =>
    resourceDetails({ id: row.id, ...version, owner: orgOwner(row.org_id) });

  return {
    async createProjectGrant(req, ctx) {
      const call = await projectCall(deps, ctx, req.projectId, "project.grant.write", "project.grant.read");
      const input = req.grant!;
      const { grantId, version } = await addProjectGrant(deps.eventStore, {
        instanceId: call.instanceId,
        creator: call.creator,
        projectId: req.projectId,
        grantedOrgId: input.grantedOrgId,
        roleKeys: input.roleKeys,
        fields: { grantedOrgId: "grant.granted_org_id", roleKeys: "grant.role_keys" },
      });
      return { details: resourceDetails({ id: grantId, ...version, owner: orgOwner(call.project.org_id) }) };
    },

    async getProjectGrant(req, ctx) {
      const { row } = await grantCall(ctx, req.projectId, req.id, "project.grant.read");
      return { grant: toGetGrant(row) };
    },

    async patchProjectGrant(req, ctx) {
      const fields = patchFields(PatchProjectGrantSchema, req.grant, req.updateMask, "grant");
      const roleKeys = nonEmptyList(
        fields,
        "role_keys",
        req.grant?.roleKeys,
        "grant.role_keys",
        "delete the project grant to take all its roles away",
      );
      const call = await grantCall(ctx, req.projectId, req.id, "project.grant.write");
      const version = await changeProjectGrant(deps.eventStore, {
        instanceId: call.instanceId,
        creator: call.creator,
        projectId: req.projectId,
        grantId: req.id,
        roleKeys: roleKeys ?? [],
        field: "grant.role_keys",
      });
      return { details: details(call.row, version) };
    },

    async deleteProjectGrant(req, ctx) {
      const call = await grantCall(ctx, req.projectId, req.id, "project.grant.delete");
      const version = await removeProjectGrant(deps.eventStore, {
        instanceId: call.instanceId,
        creator: call.creator,
        projectId: req.projectId,
        grantId: req.id,
      });
      return { details: details(call.row, version) };
    },

    async deactivateProjectGrant(req, ctx) {
      const call = await grantCall(ctx, req.projectId, req.id, "project.grant.write");
      const version = await setProjectGrantState(deps.eventStore, {
        instanceId: call.instanceId,
        creator: call.creator,
        projectId: req.projectId,
        grantId: req.id,
        action: "deactivate",
      });
      return { details: details(call.row, version) };
    },

    async reactivateProjectGrant(req, ctx) {
      const call = await grantCall(ctx, req.projectId, req.id, "project.grant.write");
      const version = await setProjectGrantState(deps.eventStore, {
        instanceId: call.instanceId,
        creator: call.creator,
        projectId: req.projectId,
        grantId: req.id,
        action: "reactivate",
      });
      return { details: details(call.row, version) };
    },

    async searchProjectGrants(req, ctx) {
      const call = await authorize(deps, ctx, "authenticated", { ctx: req.ctx });
      if (call.context.type === "system")
        throw new InvalidArgumentError("project grants are searched in an instance or organization", "ctx");
      const instanceId = call.context.instanceId;
      const page = toPage(req.query, deps.config.maxSearchLimit);
      const where = new Where().and((p) => `g.instance_id = ${p(instanceId)}`);
      if (req.projectId !== ANY_PROJECT) where.and((p) => `g.project_id = ${p(req.projectId)}`);
      if (call.context.type !== "instance") {
        const orgId = call.context.orgId;
        where.and((p) => `(g.org_id = ${p(orgId)} OR g.granted_org_id = ${p(orgId)})`);
      }
      await restrictToReadable(deps, call.caller, instanceId, "project.grant.read", where, {
        org: ["g.org_id", "g.granted_org_id"],
        project: "g.project_id",
      });
      applyFilters(where, req.filters);
      const result = await search<GrantRow>(deps.db, {
        select: COLUMNS,
        from: "project_grants g",
        where,
        orderBy: sortColumns[req.sortingColumn] ?? "g.created_at",
        tiebreak: "g.id",
        page,
        instanceId,
        aggregateTypes: [PROJECT],
      });
      return {
        details: listDetails(result),
        sortingColumn: req.sortingColumn,
        result: result.rows.map(toGetGrant),
      };
    },
  };
}
