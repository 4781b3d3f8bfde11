import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { EXECUTION, TARGET } from "../../domain/action/events.ts";
import type { DeliveryRow } from "../../execution/deliveries.ts";
import {
  type PlatformActions,
  SearchExecutionDeliveriesResponseSchema,
} from "../../gen/platform/resources/action/v3alpha/action_service_pb.ts";
import {
  type Delivery,
  DeliveryEventSchema,
  DeliverySchema,
  DeliveryStatus,
} from "../../gen/platform/resources/action/v3alpha/delivery_pb.ts";
import { search, toPage, Where } from "../../query/search.ts";
import type { AuthorizedCall } from "../call.ts";
import type { ServiceDeps } from "../deps.ts";
import { listDetails } from "../mapping.ts";
import type { ActionsPermission } from "./service.ts";

type Authorize = (
  ctx: HandlerContext,
  permission: ActionsPermission,
) => Promise<AuthorizedCall & { instanceId: string }>;

const COLUMNS =
  "id, event_position, event_type, aggregate_type, aggregate_id, execution_id, target_id, status, attempts, next_attempt_at, last_error, last_status, created_at, changed_at, delivered_at";

function toDelivery(row: DeliveryRow): Delivery {
  const pending = Number(row.status) === DeliveryStatus.PENDING;
  return create(DeliverySchema, {
    id: row.id,
    executionId: row.execution_id,
    targetId: row.target_id,
    event: create(DeliveryEventSchema, {
      type: row.event_type,
      aggregateType: row.aggregate_type,
      aggregateId: row.aggregate_id,
      position: BigInt(row.event_position),
    }),
    status: Number(row.status),
    attempts: Number(row.attempts),
    lastError: row.last_error ?? "",
    lastHttpStatus: row.last_status ?? 0,
    nextAttemptDate: pending ? timestampFromDate(new Date(row.next_attempt_at)) : undefined,
    creationDate: timestampFromDate(new Date(row.created_at)),
    changeDate: timestampFromDate(new Date(row.changed_at)),
    deliveryDate: row.delivered_at ? timestampFromDate(new Date(row.delivered_at)) : undefined,
  });
}

/** SearchExecutionDeliveries: the delivery log of event conditions (src/execution/deliveries.ts). */
export function deliveryRpcs(
  deps: ServiceDeps,
  authorize: Authorize,
): Partial<ServiceImpl<typeof PlatformActions>> {
  return {
    async searchExecutionDeliveries(req, ctx) {
      const call = await authorize(ctx, "execution.read");
      const page = toPage(req.query, deps.config.maxSearchLimit);
      const where = new Where().and((p) => `instance_id = ${p(call.instanceId)}`);
      for (const { filter } of req.filters) {
        const [column, value] =
          filter.case === "target"
            ? ["target_id", filter.value.id]
            : filter.case === "status"
              ? ["status", filter.value.status]
              : filter.case === "eventType"
                ? ["event_type", filter.value.type]
                : filter.case === "aggregate"
                  ? ["aggregate_id", filter.value.id]
                  : [undefined, undefined]; // none: refused by the declared rules
        if (column) where.and((p) => `${column} = ${p(value)}`);
      }
      const result = await search<DeliveryRow>(deps.db, {
        select: COLUMNS,
        from: "execution_deliveries",
        where,
        orderBy: "created_at",
        tiebreak: "id",
        page,
        instanceId: call.instanceId,
        aggregateTypes: [TARGET, EXECUTION],
      });
      return create(SearchExecutionDeliveriesResponseSchema, {
        details: listDetails(result),
        result: result.rows.map(toDelivery),
      });
    },
  };
}
