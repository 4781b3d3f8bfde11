import type { JsonObject } from "@bufbuild/protobuf";
import { create } from "@bufbuild/protobuf";
import { type Timestamp, TimestampSchema } from "@bufbuild/protobuf/wkt";
import type { HandlerContext } from "@connectrpc/connect";
import { apiService } from "../../api/register.ts";
import { aggregateTypes, eventTypes } from "../../domain/catalogue.ts";
import { withoutSecrets } from "../../domain/redaction.ts";
import { UserEvent } from "../../domain/user/events.ts";
import { readableData } from "../../domain/user-schema/field-access.ts";
import { InvalidArgumentError, PermissionDeniedError } from "../../errors.ts";
import type { RequestContext } from "../../gen/platform/object/v3alpha/object_pb.ts";
import {
  EditorSchema,
  type Event,
  EventSchema,
  type EventSearchFilter,
  PlatformEvents,
} from "../../gen/platform/resources/event/v3alpha/event_service_pb.ts";
import { auditLogRetention, type EventRow, searchEvents } from "../../query/events.ts";
import { toPage } from "../../query/search.ts";
import { getUserSchemas } from "../../query/user-schemas.ts";
import type { Queryable } from "../../storage/database.ts";
import { authorize } from "../call.ts";
import type { ServiceDeps } from "../deps.ts";
import { listDetails } from "../mapping.ts";

const PERMISSION = "events.read";
const knownAggregateTypes = new Set(aggregateTypes);
const knownEventTypes = new Set(eventTypes);

/** Seconds of 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z: the range of a Timestamp. */
const MIN_SECONDS = -62_135_596_800n;
const MAX_SECONDS = 253_402_300_799n;
const MAX_BIGINT = 2n ** 63n - 1n;

/**
 * Where the caller may read events, in the instance of the call: the whole instance (an instance role with
 * `events.read`, a system user) or the organizations where it holds `events.read` (ORG_OWNER); an
 * organization context narrows to that organization. PERMISSION_DENIED when nothing is readable.
 */
async function readableScope(
  deps: ServiceDeps,
  ctx: HandlerContext,
  requestContext: RequestContext | undefined,
): Promise<{ instanceId: string; owners: "all" | string[] }> {
  const call = await authorize(deps, ctx, "authenticated", { ctx: requestContext });
  const context = call.context;
  if (context.type === "system")
    throw new InvalidArgumentError("events are searched in an instance or an organization", "ctx");
  const instanceId = context.instanceId;
  if (context.type === "org" || context.type === "project") {
    await deps.authorizer.authorize(call.caller, PERMISSION, context);
    return { instanceId, owners: [context.orgId] };
  }
  const orgs = await deps.authorizer.orgsWith(call.caller, PERMISSION, instanceId);
  if (orgs !== "all" && orgs.size === 0)
    throw new PermissionDeniedError(`permission denied: ${PERMISSION} is required`);
  return { instanceId, owners: orgs === "all" ? "all" : [...orgs].sort() };
}

/** A Timestamp as RFC 3339 with microseconds (the precision events are stored with). */
function sqlTimestamp(ts: Timestamp | undefined, field: string): string | undefined {
  if (!ts) return undefined;
  if (ts.seconds < MIN_SECONDS || ts.seconds > MAX_SECONDS || ts.nanos < 0 || ts.nanos > 999_999_999)
    throw new InvalidArgumentError("is not a valid timestamp", field);
  const whole = new Date(Number(ts.seconds) * 1000).toISOString().slice(0, 19);
  return `${whole}.${String(Math.floor(ts.nanos / 1000)).padStart(6, "0")}Z`;
}

/** The filter kinds of a search, each at most once: the oneof case names of EventSearchFilter. */
type FilterKind = NonNullable<EventSearchFilter["filter"]["case"]>;
/** The JSON names of the kinds, for field paths in errors. */
const jsonName: Record<FilterKind, string> = {
  aggregateType: "aggregate_type",
  aggregateId: "aggregate_id",
  eventTypes: "event_types",
  editorUserId: "editor_user_id",
  resourceOwner: "resource_owner",
  createdAfter: "created_after",
  createdBefore: "created_before",
  fromSequence: "from_sequence",
};

/**
 * The filters, checked (known types, valid times, a cursor PostgreSQL can hold) and folded into one set of
 * conditions. Each kind may appear once: two values of one kind would match nothing (or, for times, be a
 * range given twice), which is a mistake worth a clear error.
 */
function checkedFilters(filters: EventSearchFilter[]) {
  const seen = new Map<FilterKind, number>();
  const at = (kind: FilterKind) => `filters[${seen.get(kind)}].${jsonName[kind]}`;
  const f: { [K in FilterKind]?: Extract<EventSearchFilter["filter"], { case: K }>["value"] } = {};
  filters.forEach(({ filter }, i) => {
    if (!filter.case) return; // refused by the oneof_required rule before the call
    if (seen.has(filter.case))
      throw new InvalidArgumentError(
        `is given more than once (at filters[${seen.get(filter.case)}])`,
        `filters[${i}].${jsonName[filter.case]}`,
      );
    seen.set(filter.case, i);
    (f as Record<string, unknown>)[filter.case] = filter.value;
  });
  const aggregateType = f.aggregateType?.aggregateType;
  if (aggregateType && !knownAggregateTypes.has(aggregateType))
    throw new InvalidArgumentError(
      `unknown aggregate type "${aggregateType}" (GET /resources/v3alpha/events/aggregate_types lists them)`,
      `${at("aggregateType")}.aggregate_type`,
    );
  f.eventTypes?.eventTypes.forEach((type, i) => {
    if (!knownEventTypes.has(type))
      throw new InvalidArgumentError(
        `unknown event type "${type}" (GET /resources/v3alpha/events/types lists them)`,
        `${at("eventTypes")}.event_types[${i}]`,
      );
  });
  const createdAfter = sqlTimestamp(f.createdAfter?.createdAfter, `${at("createdAfter")}.created_after`);
  const createdBefore = sqlTimestamp(f.createdBefore?.createdBefore, `${at("createdBefore")}.created_before`);
  if (createdAfter && createdBefore && createdAfter >= createdBefore)
    throw new InvalidArgumentError(
      `must be later than ${at("createdAfter")}.created_after`,
      `${at("createdBefore")}.created_before`,
    );
  const fromSequence = f.fromSequence?.fromSequence;
  if (fromSequence !== undefined && fromSequence > MAX_BIGINT)
    throw new InvalidArgumentError("is too large", `${at("fromSequence")}.from_sequence`);
  return {
    aggregateType,
    aggregateId: f.aggregateId?.aggregateId,
    eventTypes: f.eventTypes?.eventTypes,
    editorUserId: f.editorUserId?.editorUserId,
    resourceOwner: f.resourceOwner?.resourceOwner,
    createdAfter,
    createdBefore,
    fromSequence: fromSequence || undefined,
  };
}

function editorName(row: EventRow): string {
  if (row.display_name) return row.display_name;
  if (row.machine_name) return row.machine_name;
  return [row.given_name, row.family_name].filter(Boolean).join(" ");
}

/** Events whose payload holds a user's custom data (`schema_id`, `data`). */
const CUSTOM_DATA_EVENTS = new Set<string>([UserEvent.humanAdded, UserEvent.dataSet]);

/**
 * The payloads' custom data as the organization's administrators may read it (the `owner` field
 * permissions of the schema as it is now; docs/user-schemas.md): the audit log shows no more of it than
 * GetUser does.
 */
async function ownerViewOfData(db: Queryable, instanceId: string, rows: EventRow[]): Promise<void> {
  const withData = rows.filter(
    (r) => CUSTOM_DATA_EVENTS.has(r.event_type) && r.payload?.schema_id && r.payload.data,
  );
  if (withData.length === 0) return;
  const schemas = await getUserSchemas(
    db,
    instanceId,
    withData.map((r) => String(r.payload!.schema_id)),
  );
  for (const row of withData) {
    const schema = schemas.get(String(row.payload!.schema_id))?.schema ?? {};
    row.payload = {
      ...row.payload,
      data: readableData(schema, row.payload!.data as Record<string, unknown>, "owner"),
    };
  }
}

function toEvent(row: EventRow): Event {
  const micros = BigInt(row.created_us);
  return create(EventSchema, {
    sequence: BigInt(row.position),
    createdAt: create(TimestampSchema, {
      seconds: micros / 1_000_000n,
      nanos: Number(micros % 1_000_000n) * 1000,
    }),
    eventType: row.event_type,
    aggregateType: row.aggregate_type,
    aggregateId: row.aggregate_id,
    resourceOwner: row.resource_owner,
    editor: create(EditorSchema, { userId: row.creator, displayName: editorName(row) }),
    payload: withoutSecrets(row.payload ?? {}) as JsonObject,
    aggregateSequence: BigInt(row.sequence),
  });
}

/** PlatformEvents: the audit log (docs/audit-log.md). */
export function eventsService(deps: ServiceDeps) {
  return apiService(PlatformEvents, {
    async searchEvents(req, ctx) {
      const { instanceId, owners } = await readableScope(deps, ctx, req.ctx);
      const page = toPage(req.query, deps.config.maxSearchLimit);
      const filters = checkedFilters(req.filters);
      const result = await searchEvents(deps.db, {
        instanceId,
        readableOwners: owners,
        ...filters,
        retentionSeconds: await auditLogRetention(deps.db, instanceId),
        page,
      });
      await ownerViewOfData(deps.db, instanceId, result.rows);
      return { details: listDetails(result), result: result.rows.map(toEvent) };
    },

    async listEventTypes(req, ctx) {
      await readableScope(deps, ctx, req.ctx);
      return { eventTypes: [...eventTypes] };
    },

    async listAggregateTypes(req, ctx) {
      await readableScope(deps, ctx, req.ctx);
      return { aggregateTypes: [...aggregateTypes] };
    },
  });
}
