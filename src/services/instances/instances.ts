import { create } from "@bufbuild/protobuf";
import type { Duration } from "@bufbuild/protobuf/wkt";
import { DurationSchema } from "@bufbuild/protobuf/wkt";
import { apiService } from "../../api/register.ts";
import { externalOrigin } from "../../config.ts";
import { hashPassword } from "../../crypto/password.ts";
import {
  changeInstance,
  createInstance,
  removeInstance,
  setInstanceLimits,
} from "../../domain/instance/commands.ts";
import { INSTANCE, type InstanceLimitsPayload } from "../../domain/instance/events.ts";
import type { Version } from "../../domain/org/commands.ts";
import { checkPasswordPolicy } from "../../domain/user/password.ts";
import { checkUsername } from "../../domain/user/username.ts";
import { InvalidArgumentError, NotFoundError } from "../../errors.ts";
import { RequestContextSchema } from "../../gen/platform/object/v3alpha/object_pb.ts";
import {
  type GetInstance,
  GetInstanceSchema,
  InstanceFieldName,
  type InstanceSearchFilter,
  PlatformInstances,
} from "../../gen/platform/resources/instance/v3alpha/instance_service_pb.ts";
import { search, toPage, Where } from "../../query/search.ts";
import { SYSTEM_OWNER } from "../../query/settings.ts";
import type { Queryable } from "../../storage/database.ts";
import { authorize } from "../call.ts";
import type { ServiceDeps } from "../deps.ts";
import { listDetails, resourceDetails } from "../mapping.ts";
import { nonBlank } from "../organizations/organizations.ts";

/** Every RPC of this service acts in the system context: system users only (403 for anyone else). */
const SYSTEM_CONTEXT = create(RequestContextSchema, { context: { case: "system", value: true } });

interface InstanceRow {
  id: string;
  name: string;
  state: number;
  blocked: boolean;
  audit_log_retention_seconds: number | string | null;
  default_org_id: string | null;
  created_at: Date;
  changed_at: Date;
  sequence: number;
  domains: string[];
  primary_domain: string | null;
  [key: string]: unknown;
}

const SELECT = `i.id, i.name, i.state, i.blocked, i.audit_log_retention_seconds, i.default_org_id, i.created_at,
  i.changed_at, i.sequence,
  array(SELECT d.domain FROM instance_domains d WHERE d.instance_id = i.id
        ORDER BY d.is_primary DESC, d.created_at, d.domain) AS domains,
  (SELECT d.domain FROM instance_domains d WHERE d.instance_id = i.id AND d.is_primary) AS primary_domain`;

const details = (id: string, version: Version) => resourceDetails({ id, ...version, owner: SYSTEM_OWNER });

function toGetInstance(row: InstanceRow): GetInstance {
  const retention = row.audit_log_retention_seconds;
  return create(GetInstanceSchema, {
    details: resourceDetails({
      id: row.id,
      sequence: Number(row.sequence),
      changeDate: new Date(row.changed_at),
      owner: SYSTEM_OWNER,
    }),
    name: row.name,
    domains: row.domains ?? [],
    primaryDomain: row.primary_domain ?? "",
    state: row.state,
    blocked: row.blocked,
    auditLogRetention:
      retention === null || retention === undefined
        ? undefined
        : create(DurationSchema, { seconds: BigInt(retention) }),
    defaultOrgId: row.default_org_id ?? "",
  });
}

async function instanceRow(db: Queryable, id: string): Promise<InstanceRow> {
  const rows = await db.query<InstanceRow>(`SELECT ${SELECT} FROM instances i WHERE i.id = $1`, [id]);
  if (!rows[0]) throw new NotFoundError("instance not found");
  return rows[0];
}

const sortColumns: Record<number, string> = {
  [InstanceFieldName.UNSPECIFIED]: "i.created_at",
  [InstanceFieldName.CREATION_DATE]: "i.created_at",
  [InstanceFieldName.ID]: "i.id",
  [InstanceFieldName.NAME]: "lower(i.name)",
};

function applyFilters(where: Where, filters: InstanceSearchFilter[]): void {
  for (const { filter } of filters) {
    switch (filter.case) {
      case "inIds":
        where.in("i.id", filter.value.ids);
        break;
      case "domains": {
        const domains = filter.value.domains.map((d) => d.toLowerCase());
        where.and(
          (p) =>
            `EXISTS (SELECT 1 FROM instance_domains d WHERE d.instance_id = i.id AND d.domain = ANY(${p(domains)}))`,
        );
        break;
      }
      case "name":
        where.text("i.name", filter.value.method, filter.value.name);
        break;
    }
  }
}

/** Duration → whole seconds (0 removes the limit: null); negative or fractional is INVALID_ARGUMENT. */
function retentionSeconds(duration: Duration | undefined, field: string): number | null | undefined {
  if (!duration) return undefined;
  if (duration.seconds < 0n || duration.nanos < 0)
    throw new InvalidArgumentError("must not be negative", field);
  if (duration.nanos !== 0) throw new InvalidArgumentError("must be whole seconds", field);
  if (duration.seconds > BigInt(Number.MAX_SAFE_INTEGER))
    throw new InvalidArgumentError("is too large", field);
  return duration.seconds === 0n ? null : Number(duration.seconds);
}

function limitsOf(
  block: boolean | undefined,
  retention: Duration | undefined,
  field: string,
): InstanceLimitsPayload {
  const limits: InstanceLimitsPayload = {};
  if (block !== undefined) limits.block = block;
  const seconds = retentionSeconds(retention, field);
  if (seconds !== undefined) limits.audit_log_retention_seconds = seconds;
  return limits;
}

/** PlatformInstances: instances of the system (system users only). */
export function instancesService(deps: ServiceDeps) {
  return apiService(PlatformInstances, {
    async createInstance(req, ctx) {
      const call = await authorize(deps, ctx, "instance.write", { ctx: SYSTEM_CONTEXT });
      const input = req.instance!;
      const name = nonBlank(input.name, "instance.name");
      const domains = input.domains.map((d) => d.toLowerCase());
      domains.forEach((domain, i) => {
        if (domains.indexOf(domain) !== i)
          throw new InvalidArgumentError(`"${domain}" is listed twice`, `instance.domains[${i}]`);
      });
      const orgName = nonBlank(input.firstOrgName, "instance.first_org_name");
      const admin = input.admin!;
      checkUsername(admin.username, "instance.admin.username");
      // The same complexity policy as every other password (users API, SetPassword).
      checkPasswordPolicy(admin.password, deps.config.passwordMinLength, "instance.admin.password");
      const created = await createInstance(deps.eventStore, call.creator, {
        name,
        domains,
        orgName,
        admin: {
          username: admin.username,
          passwordHash: await hashPassword(admin.password),
          passwordChangeRequired: false,
        },
        consoleOrigin: domains[0] ? externalOrigin(deps.config, domains[0]) : undefined,
      });
      return {
        details: details(created.instanceId, created.version),
        orgId: created.orgId,
        adminUserId: created.adminUserId,
      };
    },

    async getInstance(req, ctx) {
      await authorize(deps, ctx, "instance.read", { ctx: SYSTEM_CONTEXT });
      return { instance: toGetInstance(await instanceRow(deps.db, req.id)) };
    },

    async patchInstance(req, ctx) {
      const call = await authorize(deps, ctx, "instance.write", { ctx: SYSTEM_CONTEXT });
      const name =
        req.instance?.name === undefined ? undefined : nonBlank(req.instance.name, "instance.name");
      const version = await changeInstance(deps.eventStore, {
        instanceId: req.id,
        creator: call.creator,
        name,
      });
      return { details: details(req.id, version) };
    },

    async deleteInstance(req, ctx) {
      const call = await authorize(deps, ctx, "instance.write", { ctx: SYSTEM_CONTEXT });
      const version = await removeInstance(deps.eventStore, { instanceId: req.id, creator: call.creator });
      return { details: details(req.id, version) };
    },

    async searchInstances(req, ctx) {
      await authorize(deps, ctx, "instance.read", { ctx: SYSTEM_CONTEXT });
      const page = toPage(req.query, deps.config.maxSearchLimit);
      const where = new Where();
      applyFilters(where, req.filters);
      const result = await search<InstanceRow>(deps.db, {
        select: SELECT,
        from: "instances i",
        where,
        orderBy: sortColumns[req.sortingColumn] ?? "i.created_at",
        tiebreak: "i.id",
        page,
        instanceId: "",
        aggregateTypes: [INSTANCE],
      });
      // Instance events live in their own instance: the newest of all of them is what this read model saw.
      const processed = await deps.db.query<{ position: number | null; created_at: Date | null }>(
        "SELECT position, created_at FROM events WHERE aggregate_type = $1 ORDER BY position DESC LIMIT 1",
        [INSTANCE],
      );
      result.processedSequence = Number(processed[0]?.position ?? 0);
      result.timestamp = processed[0]?.created_at ?? undefined;
      return {
        details: listDetails(result),
        sortingColumn: req.sortingColumn,
        result: result.rows.map(toGetInstance),
      };
    },

    async limitInstance(req, ctx) {
      const call = await authorize(deps, ctx, "instance.write", { ctx: SYSTEM_CONTEXT });
      const limits = limitsOf(req.limits?.block, req.limits?.auditLogRetention, "limits.audit_log_retention");
      const [version] = await setInstanceLimits(deps.eventStore, {
        instanceIds: [req.id],
        creator: call.creator,
        limits,
      });
      return { details: details(req.id, version) };
    },

    async bulkLimitInstances(req, ctx) {
      const call = await authorize(deps, ctx, "instance.write", { ctx: SYSTEM_CONTEXT });
      const input = req.limits!;
      const limits = limitsOf(input.block, input.auditLogRetention, "limits.audit_log_retention");
      const versions = await setInstanceLimits(deps.eventStore, {
        instanceIds: input.instanceIds,
        creator: call.creator,
        limits,
      });
      return { details: versions.map((version, i) => details(input.instanceIds[i], version)) };
    },
  });
}
