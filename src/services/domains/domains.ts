import { create } from "@bufbuild/protobuf";
import { apiService } from "../../api/register.ts";
import type { Permission } from "../../auth/permissions.ts";
import {
  addOrgDomain,
  removeOrgDomain,
  setPrimaryOrgDomain,
  type Version,
  verifyOrgDomain,
} from "../../domain/org/commands.ts";
import { ORG } from "../../domain/org/events.ts";
import { InvalidArgumentError, NotFoundError } from "../../errors.ts";
import {
  DomainFieldName,
  DomainSchema,
  type DomainSearchFilter,
  DomainValidationType,
  type GetDomain,
  GetDomainSchema,
  PlatformDomains,
} from "../../gen/platform/resources/domain/v3alpha/domain_service_pb.ts";
import { search, toPage, Where } from "../../query/search.ts";
import type { Queryable } from "../../storage/database.ts";
import type { AuthorizedCall } from "../call.ts";
import { authorize } from "../call.ts";
import type { ServiceDeps } from "../deps.ts";
import { listDetails, resourceDetails } from "../mapping.ts";
import { NetworkDomainVerifier } from "./verifier.ts";

const OWNER_TYPE_ORG = 3;

interface DomainRow {
  instance_id: string;
  org_id: string;
  id: string;
  domain: string;
  is_verified: boolean;
  is_primary: boolean;
  is_generated: boolean;
  validation_token: string;
  created_at: Date;
  changed_at: Date;
  sequence: number;
  [key: string]: unknown;
}

const SELECT =
  "d.instance_id, d.org_id, d.id, d.domain, d.is_verified, d.is_primary, d.is_generated, d.validation_token, d.created_at, d.changed_at, d.sequence";

function toGetDomain(row: DomainRow): GetDomain {
  return create(GetDomainSchema, {
    details: resourceDetails({
      id: row.id,
      sequence: Number(row.sequence),
      changeDate: new Date(row.changed_at),
      owner: { type: OWNER_TYPE_ORG, id: row.org_id },
    }),
    domain: create(DomainSchema, { domain: row.domain }),
    isVerified: row.is_verified,
    isPrimary: row.is_primary,
    isGenerated: row.is_generated,
    validationToken: row.validation_token,
  });
}

async function domainRow(db: Queryable, instanceId: string, id: string): Promise<DomainRow> {
  const rows = await db.query<DomainRow>(
    `SELECT ${SELECT} FROM org_domains d WHERE d.instance_id = $1 AND d.id = $2`,
    [instanceId, id],
  );
  if (!rows[0]) throw new NotFoundError("domain not found");
  return rows[0];
}

const sortColumns: Record<number, string> = {
  [DomainFieldName.UNSPECIFIED]: "d.created_at",
  [DomainFieldName.CREATION_DATE]: "d.created_at",
  [DomainFieldName.DOMAIN]: "d.domain",
};

function applyFilters(where: Where, filters: DomainSearchFilter[]): void {
  for (const { filter } of filters) {
    switch (filter.case) {
      case "domain":
        where.text("d.domain", filter.value.method, filter.value.domain);
        break;
      case "verified":
        where.and((p) => `d.is_verified = ${p(filter.value.isVerified)}`);
        break;
      case "inIds":
        where.in("d.id", filter.value.ids);
        break;
    }
  }
}

/** PlatformDomains: the domains of organizations, their validation and the primary domain. */
export function domainsService(deps: ServiceDeps) {
  const verifier = () => deps.domainVerifier ?? defaultVerifier;
  // organization owners validate domains: the organization level of the outbound-address policy
  const defaultVerifier = new NetworkDomainVerifier({ outbound: deps.outbound.guard("organization") });

  /**
   * The domain addressed by ID in the Host's instance, after checking `permission` in its org: 404 when
   * it is unknown or the caller may not even read it (domain.read), 403 when it may read
   * it but lacks `permission`.
   */
  async function addressed(ctx: Parameters<typeof authorize>[1], id: string, permission: Permission) {
    const call = await authorize(deps, ctx, "authenticated");
    if (call.context.type === "system") throw new NotFoundError("domain not found");
    const row = await domainRow(deps.db, call.context.instanceId, id);
    const context = { type: "org" as const, instanceId: row.instance_id, orgId: row.org_id };
    if (!(await deps.authorizer.can(call.caller, "domain.read", context)))
      throw new NotFoundError("domain not found");
    await deps.authorizer.authorize(call.caller, permission, context);
    return { call, row };
  }

  const details = (row: { id: string; org_id: string }, version: Version) =>
    resourceDetails({ id: row.id, ...version, owner: { type: OWNER_TYPE_ORG, id: row.org_id } });

  /** The organization a create addresses: `ctx` org, else the instance's default organization. */
  async function targetOrg(call: AuthorizedCall): Promise<{ instanceId: string; orgId: string }> {
    if (call.context.type === "org" || call.context.type === "project")
      return { instanceId: call.context.instanceId, orgId: call.context.orgId };
    if (call.context.type === "system")
      throw new InvalidArgumentError("domains belong to an organization: set ctx.org_id", "ctx");
    const instance = await deps.instances.byId(call.context.instanceId);
    if (!instance?.defaultOrgId) throw new NotFoundError("the instance has no default organization");
    return { instanceId: instance.id, orgId: instance.defaultOrgId };
  }

  return apiService(PlatformDomains, {
    async createDomain(req, ctx) {
      const call = await authorize(deps, ctx, "authenticated", { ctx: req.ctx });
      const org = await targetOrg(call);
      await deps.authorizer.authorize(call.caller, "domain.write", { type: "org", ...org });
      const domain = (req.domain?.domain ?? "").toLowerCase();
      const added = await addOrgDomain(deps.eventStore, {
        instanceId: org.instanceId,
        creator: call.creator,
        orgId: org.orgId,
        domain,
      });
      return {
        details: details({ id: added.domainId, org_id: org.orgId }, added.version),
        validationToken: added.validationToken,
      };
    },

    async getDomain(req, ctx) {
      const { row } = await addressed(ctx, req.id, "domain.read");
      return { domain: toGetDomain(row) };
    },

    async deleteDomain(req, ctx) {
      const { call, row } = await addressed(ctx, req.id, "domain.delete");
      const version = await removeOrgDomain(deps.eventStore, {
        instanceId: row.instance_id,
        creator: call.creator,
        orgId: row.org_id,
        domainId: row.id,
      });
      return { details: details(row, version) };
    },

    async searchDomains(req, ctx) {
      const call = await authorize(deps, ctx, "authenticated", { ctx: req.ctx });
      if (call.context.type === "system")
        throw new InvalidArgumentError("domains are searched in an instance or organization context", "ctx");
      const instanceId = call.context.instanceId;
      const page = toPage(req.query, deps.config.maxSearchLimit);
      const where = new Where().and((p) => `d.instance_id = ${p(instanceId)}`);
      if (call.context.type === "org" || call.context.type === "project") {
        await deps.authorizer.authorize(call.caller, "domain.read", call.context);
        where.in("d.org_id", [call.context.orgId]);
      } else {
        const readable = await deps.authorizer.orgsWith(call.caller, "domain.read", instanceId);
        if (readable !== "all") where.in("d.org_id", [...readable]);
      }
      applyFilters(where, req.filters);
      const result = await search<DomainRow>(deps.db, {
        select: SELECT,
        from: "org_domains d",
        where,
        orderBy: sortColumns[req.sortingColumn] ?? "d.created_at",
        tiebreak: "d.id",
        page,
        instanceId,
        aggregateTypes: [ORG],
      });
      return {
        details: listDetails(result),
        sortingColumn: req.sortingColumn,
        result: result.rows.map(toGetDomain),
      };
    },

    async setDomainAsPrimary(req, ctx) {
      const { call, row } = await addressed(ctx, req.id, "domain.write");
      const version = await setPrimaryOrgDomain(deps.eventStore, {
        instanceId: row.instance_id,
        creator: call.creator,
        orgId: row.org_id,
        domainId: row.id,
      });
      return { details: details(row, version) };
    },

    async validateDomain(req, ctx) {
      const { call, row } = await addressed(ctx, req.id, "domain.write");
      const method = req.validation?.method;
      if (!row.is_verified) {
        await verifier().verify(
          method === DomainValidationType.DNS ? "dns" : "http",
          row.domain,
          row.validation_token,
        );
      }
      const version = await verifyOrgDomain(deps.eventStore, {
        instanceId: row.instance_id,
        creator: call.creator,
        orgId: row.org_id,
        domainId: row.id,
        validationType: method ?? 0,
      });
      return { details: details(row, version) };
    },
  });
}
