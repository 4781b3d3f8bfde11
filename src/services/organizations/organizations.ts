import { create } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import { apiService } from "../../api/register.ts";
import type { Caller } from "../../auth/caller.ts";
import type { Permission } from "../../auth/permissions.ts";
import { setDefaultOrg } from "../../domain/instance/commands.ts";
import { INSTANCE } from "../../domain/instance/events.ts";
import { changeOrg, createOrg, removeOrg } from "../../domain/org/commands.ts";
import { ORG } from "../../domain/org/events.ts";
import { InvalidArgumentError, NotFoundError } from "../../errors.ts";
import { type RequestContext, RequestContextSchema } from "../../gen/platform/object/v3alpha/object_pb.ts";
import {
  type GetOrganization,
  GetOrganizationSchema,
  OrganizationFieldName,
  OrganizationSchema,
  type OrganizationSearchFilter,
  PlatformOrganizations,
} from "../../gen/platform/resources/organization/v3alpha/organization_service_pb.ts";
import { search, toPage, Where } from "../../query/search.ts";
import type { Queryable } from "../../storage/database.ts";
import { authorize } from "../call.ts";
import type { ServiceDeps } from "../deps.ts";
import { listDetails, resourceDetails } from "../mapping.ts";

const OWNER_TYPE_INSTANCE = 2;

/** `ctx` selecting one organization of the Host's instance (for RPCs addressed by org ID). */
export function orgContext(orgId: string): RequestContext {
  return create(RequestContextSchema, { context: { case: "orgId", value: orgId } });
}

/** A required text that must not be only white space. */
export function nonBlank(value: string, field: string): string {
  if (value.trim() === "") throw new InvalidArgumentError("must not be blank", field);
  return value.trim();
}

export interface OrgRow {
  instance_id: string;
  id: string;
  name: string;
  state: number;
  primary_domain: string;
  created_at: Date;
  changed_at: Date;
  sequence: number;
  is_default: boolean;
  [key: string]: unknown;
}

const SELECT = `o.instance_id, o.id, o.name, o.state, o.primary_domain, o.created_at, o.changed_at, o.sequence,
  coalesce(i.default_org_id = o.id, false) AS is_default`;
const FROM = "orgs o LEFT JOIN instances i ON i.id = o.instance_id";

export async function orgRow(db: Queryable, instanceId: string, orgId: string): Promise<OrgRow> {
  const rows = await db.query<OrgRow>(
    `SELECT ${SELECT} FROM ${FROM} WHERE o.instance_id = $1 AND o.id = $2`,
    [instanceId, orgId],
  );
  if (!rows[0]) throw new NotFoundError("organization not found");
  return rows[0];
}

function toGetOrganization(row: OrgRow): GetOrganization {
  return create(GetOrganizationSchema, {
    details: resourceDetails({
      id: row.id,
      sequence: Number(row.sequence),
      changeDate: new Date(row.changed_at),
      owner: { type: OWNER_TYPE_INSTANCE, id: row.instance_id },
    }),
    organization: create(OrganizationSchema, { name: row.name }),
    state: row.state,
    primaryDomain: row.primary_domain,
    isInstanceDefault: row.is_default === true,
  });
}

const sortColumns: Record<number, string> = {
  [OrganizationFieldName.UNSPECIFIED]: "o.created_at",
  [OrganizationFieldName.CREATION_DATE]: "o.created_at",
  [OrganizationFieldName.ID]: "o.id",
  [OrganizationFieldName.CHANGE_DATE]: "o.changed_at",
  [OrganizationFieldName.NAME]: "lower(o.name)",
};

function applyFilters(where: Where, filters: OrganizationSearchFilter[]): void {
  for (const { filter } of filters) {
    switch (filter.case) {
      case "name":
        where.text("o.name", filter.value.method, filter.value.name);
        break;
      case "inIds":
        where.in("o.id", filter.value.ids);
        break;
      case "state":
        where.and((p) => `o.state = ${p(filter.value.state)}`);
        break;
    }
  }
}

/** Organizations of the instance the caller may read: every one, or those listed. */
async function readableOrgs(deps: ServiceDeps, caller: Caller, instanceId: string) {
  return deps.authorizer.orgsWith(caller, "org.read", instanceId);
}

/** PlatformOrganizations: the organizations of an instance. */
export function organizationsService(deps: ServiceDeps) {
  /**
   * The organization `id` of the Host's instance as the call's context, with `permission` in it. 404 when
   * it is unknown or the caller may not even read it (org.read), 403 when it may read it
   * but lacks `permission`.
   */
  async function orgCall(ctx: HandlerContext, id: string, permission: Permission) {
    const call = await authorize(deps, ctx, "authenticated", { ctx: orgContext(id) });
    if (call.context.type !== "org") throw new NotFoundError("organization not found");
    const context = call.context;
    if (!(await deps.authorizer.can(call.caller, "org.read", context)))
      throw new NotFoundError("organization not found");
    if (permission !== "org.read") await deps.authorizer.authorize(call.caller, permission, context);
    return { ...call, context };
  }

  return apiService(PlatformOrganizations, {
    async createOrganization(req, ctx) {
      const call = await authorize(deps, ctx, "org.create", { ctx: req.ctx });
      if (call.context.type !== "instance")
        throw new InvalidArgumentError("organizations are created in an instance context", "ctx");
      const name = nonBlank(req.organization?.name ?? "", "organization.name");
      const instance = await deps.instances.byId(call.context.instanceId);
      if (!instance) throw new NotFoundError("instance not found");
      const { orgId, version } = await createOrg(deps.eventStore, {
        instanceId: instance.id,
        creator: call.creator,
        name,
        instanceDomain: instance.primaryDomain,
      });
      return {
        details: resourceDetails({
          id: orgId,
          ...version,
          owner: { type: OWNER_TYPE_INSTANCE, id: instance.id },
        }),
      };
    },

    async getOrganization(req, ctx) {
      const call = await orgCall(ctx, req.id, "org.read");
      return { organization: toGetOrganization(await orgRow(deps.db, call.context.instanceId, req.id)) };
    },

    async getInstanceDefaultOrganization(req, ctx) {
      const call = await authorize(deps, ctx, "authenticated", { ctx: req.ctx });
      if (call.context.type !== "instance")
        throw new InvalidArgumentError("the default organization is read in an instance context", "ctx");
      const instance = await deps.instances.byId(call.context.instanceId);
      if (!instance?.defaultOrgId) throw new NotFoundError("the instance has no default organization");
      await deps.authorizer.authorize(call.caller, "org.read", {
        type: "org",
        instanceId: instance.id,
        orgId: instance.defaultOrgId,
      });
      return { organization: toGetOrganization(await orgRow(deps.db, instance.id, instance.defaultOrgId)) };
    },

    async patchOrganization(req, ctx) {
      const call = await orgCall(ctx, req.id, "org.write");
      const name =
        req.organization?.name === undefined
          ? undefined
          : nonBlank(req.organization.name, "organization.name");
      const version = await changeOrg(deps.eventStore, {
        instanceId: call.context.instanceId,
        creator: call.creator,
        orgId: req.id,
        name,
      });
      return {
        details: resourceDetails({
          id: req.id,
          ...version,
          owner: { type: OWNER_TYPE_INSTANCE, id: call.context.instanceId },
        }),
      };
    },

    async deleteOrganization(req, ctx) {
      const call = await orgCall(ctx, req.id, "org.delete");
      // Its users go with it: no control over a more privileged account.
      await deps.authorizer.requireControlOfOrgUsers(call.caller, call.context.instanceId, req.id);
      const version = await removeOrg(deps.eventStore, {
        instanceId: call.context.instanceId,
        creator: call.creator,
        orgId: req.id,
      });
      return {
        details: resourceDetails({
          id: req.id,
          ...version,
          owner: { type: OWNER_TYPE_INSTANCE, id: call.context.instanceId },
        }),
      };
    },

    async searchOrganizations(req, ctx) {
      const call = await authorize(deps, ctx, "authenticated", { ctx: req.ctx });
      if (call.context.type === "system")
        throw new InvalidArgumentError("organizations are searched in an instance context", "ctx");
      const instanceId = call.context.instanceId;
      const page = toPage(req.query, deps.config.maxSearchLimit);
      const where = new Where().and((p) => `o.instance_id = ${p(instanceId)}`);
      if (call.context.type === "org" || call.context.type === "project")
        where.in("o.id", [call.context.orgId]);
      const readable = await readableOrgs(deps, call.caller, instanceId);
      if (readable !== "all") where.in("o.id", [...readable]);
      applyFilters(where, req.filters);
      const result = await search<OrgRow>(deps.db, {
        select: SELECT,
        from: FROM,
        where,
        orderBy: sortColumns[req.sortingColumn] ?? "o.created_at",
        tiebreak: "o.id",
        page,
        instanceId,
        aggregateTypes: [ORG, INSTANCE],
        counted:
          call.context.type === "instance" && readable === "all" && req.filters.length === 0
            ? { resource: "orgs", scope: "" }
            : undefined,
      });
      return {
        details: listDetails(result),
        sortingColumn: req.sortingColumn,
        result: result.rows.map(toGetOrganization),
      };
    },

    async setAsInstanceDefaultOrganization(req, ctx) {
      const call = await authorize(deps, ctx, "instance.write");
      if (call.context.type !== "instance") throw new NotFoundError("instance not found");
      const version = await setDefaultOrg(deps.eventStore, {
        instanceId: call.context.instanceId,
        creator: call.creator,
        orgId: req.id,
      });
      return {
        details: resourceDetails({
          id: req.id,
          ...version,
          owner: { type: OWNER_TYPE_INSTANCE, id: call.context.instanceId },
        }),
      };
    },
  });
}
