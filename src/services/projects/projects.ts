import { create } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import { changeProject, createProject, removeProject } from "../../domain/project/commands.ts";
import { PROJECT, type PrivateLabelingSetting } from "../../domain/project/events.ts";
import { InvalidArgumentError, NotFoundError } from "../../errors.ts";
import {
  type GetProject,
  GetProjectSchema,
  type PlatformProjects,
  ProjectFieldName,
  ProjectSchema,
  type ProjectSearchFilter,
} from "../../gen/platform/resources/project/v3alpha/project_service_pb.ts";
import { search, toPage, Where } from "../../query/search.ts";
import { authorize } from "../call.ts";
import type { ServiceDeps } from "../deps.ts";
import { listDetails, resourceDetails } from "../mapping.ts";
import { nonBlank } from "../organizations/organizations.ts";
import {
  orgOwner,
  PROJECT_COLUMNS,
  PROJECT_FROM,
  type ProjectRow,
  projectCall,
  restrictToReadable,
  toDate,
} from "./access.ts";

function toGetProject(row: ProjectRow): GetProject {
  return create(GetProjectSchema, {
    details: resourceDetails({
      id: row.id,
      sequence: Number(row.sequence),
      changeDate: toDate(row.changed_at),
      owner: orgOwner(row.org_id),
    }),
    project: create(ProjectSchema, {
      name: row.name,
      projectRoleAssertion: row.role_assertion,
      projectRoleCheck: row.role_check,
      privateLabelingSetting: Number(row.private_labeling_setting),
    }),
    managementProject: row.management === true,
  });
}

const sortColumns: Record<number, string> = {
  [ProjectFieldName.UNSPECIFIED]: "p.created_at",
  [ProjectFieldName.ID]: "p.id",
  [ProjectFieldName.CREATION_DATE]: "p.created_at",
  [ProjectFieldName.CHANGE_DATE]: "p.changed_at",
  [ProjectFieldName.NAME]: "lower(p.name)",
};

function applyFilters(where: Where, filters: ProjectSearchFilter[]): void {
  for (const { filter } of filters) {
    switch (filter.case) {
      case "name":
        where.text("p.name", filter.value.method, filter.value.name);
        break;
      case "inIds":
        where.in("p.id", filter.value.ids);
        break;
    }
  }
}

/** The project RPCs of PlatformProjects. */
export function projectRpcs(deps: ServiceDeps): Partial<ServiceImpl<typeof PlatformProjects>> {
  return {
    async createProject(req, ctx) {
      const call = await authorize(deps, ctx, "authenticated", { ctx: req.ctx });
      if (call.context.type === "system")
        throw new InvalidArgumentError(
          "projects belong to an organization: choose one with ctx.org_id",
          "ctx",
        );
      const instanceId = call.context.instanceId;
      const orgId =
        call.context.type === "instance"
          ? (await deps.instances.byId(instanceId))?.defaultOrgId
          : call.context.orgId;
      if (!orgId) throw new NotFoundError("the instance has no default organization");
      const orgContext = { type: "org" as const, instanceId, orgId };
      await deps.authorizer.authorize(call.caller, "project.create", orgContext);
      const input = req.project!;
      // An ORG_PROJECT_CREATOR may create but not change projects: it becomes the new project's owner.
      const ownerUserId =
        call.caller.kind === "user" && !(await deps.authorizer.can(call.caller, "project.write", orgContext))
          ? call.caller.userId
          : undefined;
      const { projectId, version } = await createProject(deps.eventStore, {
        instanceId,
        creator: call.creator,
        orgId,
        name: nonBlank(input.name, "project.name"),
        roleAssertion: input.projectRoleAssertion,
        roleCheck: input.projectRoleCheck,
        privateLabelingSetting: input.privateLabelingSetting as PrivateLabelingSetting,
        ownerUserId,
      });
      return { details: resourceDetails({ id: projectId, ...version, owner: orgOwner(orgId) }) };
    },

    async getProject(req, ctx) {
      const { project } = await projectCall(deps, ctx, req.id, "project.read", "project.read");
      return { project: toGetProject(project) };
    },

    async patchProject(req, ctx) {
      const call = await projectCall(deps, ctx, req.id, "project.write", "project.read");
      const input = req.project;
      const version = await changeProject(deps.eventStore, {
        instanceId: call.instanceId,
        creator: call.creator,
        projectId: req.id,
        change: {
          name: input?.name === undefined ? undefined : nonBlank(input.name, "project.name"),
          project_role_assertion: input?.projectRoleAssertion,
          project_role_check: input?.projectRoleCheck,
          private_labeling_setting: input?.privateLabelingSetting as PrivateLabelingSetting | undefined,
        },
      });
      return { details: resourceDetails({ id: req.id, ...version, owner: orgOwner(call.project.org_id) }) };
    },

    async deleteProject(req, ctx) {
      const call = await projectCall(deps, ctx, req.id, "project.delete", "project.read");
      const version = await removeProject(deps.eventStore, {
        instanceId: call.instanceId,
        creator: call.creator,
        projectId: req.id,
      });
      return { details: resourceDetails({ id: req.id, ...version, owner: orgOwner(call.project.org_id) }) };
    },

    async searchProjects(req, ctx) {
      const call = await authorize(deps, ctx, "authenticated", { ctx: req.ctx });
      if (call.context.type === "system")
        throw new InvalidArgumentError("projects are searched in an instance or organization", "ctx");
      const instanceId = call.context.instanceId;
      const page = toPage(req.query, deps.config.maxSearchLimit);
      const where = new Where().and((p) => `p.instance_id = ${p(instanceId)}`);
      if (call.context.type !== "instance") {
        const orgId = call.context.orgId;
        where.and((p) => `p.org_id = ${p(orgId)}`);
      }
      const restricted = await restrictToReadable(deps, call.caller, instanceId, "project.read", where, {
        org: ["p.org_id"],
        project: "p.id",
      });
      applyFilters(where, req.filters);
      const scope = call.context.type === "instance" ? "" : call.context.orgId;
      const result = await search<ProjectRow>(deps.db, {
        select: PROJECT_COLUMNS,
        from: PROJECT_FROM,
        where,
        orderBy: sortColumns[req.sortingColumn] ?? "p.created_at",
        tiebreak: "p.id",
        page,
        instanceId,
        aggregateTypes: [PROJECT],
        table: { from: "projects p", alias: "p" },
        counted: !restricted && req.filters.length === 0 ? { resource: "projects", scope } : undefined,
      });
      return {
        details: listDetails(result),
        sortingColumn: req.sortingColumn,
        result: result.rows.map(toGetProject),
      };
    },
  };
}
