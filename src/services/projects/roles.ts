import { create } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import { addProjectRole, changeProjectRole, removeProjectRole } from "../../domain/project/commands.ts";
import { PROJECT } from "../../domain/project/events.ts";
import { NotFoundError } from "../../errors.ts";
import {
  type GetProjectRole,
  GetProjectRoleSchema,
  type PlatformProjects,
  ProjectRoleFieldName,
  ProjectRoleSchema,
  type ProjectRoleSearchFilter,
} from "../../gen/platform/resources/project/v3alpha/project_service_pb.ts";
import { search, toPage, Where } from "../../query/search.ts";
import type { ServiceDeps } from "../deps.ts";
import { listDetails, resourceDetails } from "../mapping.ts";
import { nonBlank } from "../organizations/organizations.ts";
import { orgOwner, projectCall, toDate } from "./access.ts";

interface RoleRow {
  project_id: string;
  key: string;
  org_id: string;
  display_name: string;
  group_name: string;
  created_at: Date;
  changed_at: Date;
  sequence: number | string;
  [key: string]: unknown;
}

const COLUMNS =
  "r.project_id, r.key, r.org_id, r.display_name, r.group_name, r.created_at, r.changed_at, r.sequence";

function toGetRole(row: RoleRow): GetProjectRole {
  return create(GetProjectRoleSchema, {
    details: resourceDetails({
      id: row.key,
      sequence: Number(row.sequence),
      changeDate: toDate(row.changed_at),
      owner: orgOwner(row.org_id),
    }),
    projectId: row.project_id,
    role: create(ProjectRoleSchema, { key: row.key, displayName: row.display_name, group: row.group_name }),
  });
}

const sortColumns: Record<number, string> = {
  [ProjectRoleFieldName.UNSPECIFIED]: "r.created_at",
  [ProjectRoleFieldName.KEY]: "r.key",
  [ProjectRoleFieldName.CREATION_DATE]: "r.created_at",
  [ProjectRoleFieldName.CHANGE_DATE]: "r.changed_at",
  [ProjectRoleFieldName.DISPLAY_NAME]: "lower(r.display_name)",
  [ProjectRoleFieldName.GROUP]: "lower(r.group_name)",
};

function applyFilters(where: Where, filters: ProjectRoleSearchFilter[]): void {
  for (const { filter } of filters) {
    switch (filter.case) {
      case "key":
        where.text("r.key", filter.value.method, filter.value.key);
        break;
      case "displayName":
        where.text("r.display_name", filter.value.method, filter.value.displayName);
        break;
      case "group":
        where.text("r.group_name", filter.value.method, filter.value.group);
        break;
    }
  }
}

/** The role RPCs of PlatformProjects (`/projects/{project_id}/roles`). */
export function roleRpcs(deps: ServiceDeps): Partial<ServiceImpl<typeof PlatformProjects>> {
  return {
    async createProjectRole(req, ctx) {
      const call = await projectCall(deps, ctx, req.projectId, "project.role.write", "project.role.read");
      const role = req.role!;
      const version = await addProjectRole(deps.eventStore, {
        instanceId: call.instanceId,
        creator: call.creator,
        projectId: req.projectId,
        role: {
          key: role.key,
          display_name: nonBlank(role.displayName, "role.display_name"),
          group: role.group.trim(),
        },
      });
      return { details: resourceDetails({ id: role.key, ...version, owner: orgOwner(call.project.org_id) }) };
    },

    async getProjectRole(req, ctx) {
      const call = await projectCall(deps, ctx, req.projectId, "project.role.read", "project.role.read");
      const rows = await deps.db.query<RoleRow>(
        `SELECT ${COLUMNS} FROM project_roles r WHERE r.instance_id = $1 AND r.project_id = $2 AND r.key = $3`,
        [call.instanceId, req.projectId, req.key],
      );
      if (!rows[0]) throw new NotFoundError("role not found");
      return { role: toGetRole(rows[0]) };
    },

    async patchProjectRole(req, ctx) {
      const call = await projectCall(deps, ctx, req.projectId, "project.role.write", "project.role.read");
      const input = req.role;
      const version = await changeProjectRole(deps.eventStore, {
        instanceId: call.instanceId,
        creator: call.creator,
        projectId: req.projectId,
        key: req.key,
        displayName:
          input?.displayName === undefined ? undefined : nonBlank(input.displayName, "role.display_name"),
        group: input?.group?.trim(),
      });
      return { details: resourceDetails({ id: req.key, ...version, owner: orgOwner(call.project.org_id) }) };
    },

    async deleteProjectRole(req, ctx) {
      const call = await projectCall(deps, ctx, req.projectId, "project.role.delete", "project.role.read");
      const version = await removeProjectRole(deps.eventStore, {
        instanceId: call.instanceId,
        creator: call.creator,
        projectId: req.projectId,
        key: req.key,
      });
      return { details: resourceDetails({ id: req.key, ...version, owner: orgOwner(call.project.org_id) }) };
    },

    async searchProjectRoles(req, ctx) {
      const call = await projectCall(deps, ctx, req.projectId, "project.role.read", "project.role.read");
      const page = toPage(req.query, deps.config.maxSearchLimit);
      const where = new Where()
        .and((p) => `r.instance_id = ${p(call.instanceId)}`)
        .and((p) => `r.project_id = ${p(req.projectId)}`);
      applyFilters(where, req.filters);
      const result = await search<RoleRow>(deps.db, {
        select: COLUMNS,
        from: "project_roles r",
        where,
        orderBy: sortColumns[req.sortingColumn] ?? "r.created_at",
        tiebreak: "r.key",
        page,
        instanceId: call.instanceId,
        aggregateTypes: [PROJECT],
      });
      return {
        details: listDetails(result),
        sortingColumn: req.sortingColumn,
        result: result.rows.map(toGetRole),
      };
    },
  };
}
