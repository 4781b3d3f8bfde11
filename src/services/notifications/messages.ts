import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import { USER } from "../../domain/user/events.ts";
import {
  type NotificationMessage,
  NotificationMessageSchema,
} from "../../gen/platform/resources/notification/v3alpha/message_pb.ts";
import {
  type PlatformNotifications,
  SearchNotificationsResponseSchema,
} from "../../gen/platform/resources/notification/v3alpha/notification_service_pb.ts";
import { search, toPage, Where } from "../../query/search.ts";
import type { ServiceDeps } from "../deps.ts";
import { listDetails } from "../mapping.ts";
import { providerDetails } from "./common.ts";
import type { Gate } from "./service.ts";

interface MessageRow {
  id: string;
  user_id: string;
  type: string;
  channel: number;
  recipient: string;
  state: number;
  attempts: number;
  last_error: string | null;
  created_at: Date;
  changed_at: Date;
  sent_at: Date | null;
  [key: string]: unknown;
}

const COLUMNS =
  "id, user_id, type, channel, recipient, state, attempts, last_error, created_at, changed_at, sent_at";

function toMessage(row: MessageRow, instanceId: string): NotificationMessage {
  return create(NotificationMessageSchema, {
    // a record, not an event-sourced resource: its version is the number of attempts made
    details: providerDetails(
      { id: row.id, sequence: Number(row.attempts), changeDate: new Date(row.changed_at) },
      instanceId,
    ),
    type: row.type,
    channel: Number(row.channel),
    recipient: row.recipient,
    state: Number(row.state),
    attempts: Number(row.attempts),
    lastError: row.last_error ?? "",
    sentAt: row.sent_at ? timestampFromDate(new Date(row.sent_at)) : undefined,
    userId: row.user_id,
  });
}

/** SearchNotifications: the record of the notification outbox (src/notifications/outbox.ts). */
export function messageRpcs(
  deps: ServiceDeps,
  gate: Gate,
): Partial<ServiceImpl<typeof PlatformNotifications>> {
  return {
    async searchNotifications(req, ctx) {
      const call = await gate(ctx, "iam.notification.read");
      const page = toPage(req.query, deps.config.maxSearchLimit);
      const where = new Where().and((p) => `instance_id = ${p(call.instanceId)}`);
      for (const { filter } of req.filters) {
        const [column, value] =
          filter.case === "userId"
            ? ["user_id", filter.value.userId]
            : filter.case === "state"
              ? ["state", filter.value.state]
              : filter.case === "type"
                ? ["type", filter.value.type]
                : [undefined, undefined]; // none: refused by the declared rules
        if (column) where.and((p) => `${column} = ${p(value)}`);
      }
      const result = await search<MessageRow>(deps.db, {
        select: COLUMNS,
        from: "notification_messages",
        where,
        orderBy: "created_at",
        tiebreak: "id",
        page,
        instanceId: call.instanceId,
        aggregateTypes: [USER],
      });
      return create(SearchNotificationsResponseSchema, {
        details: listDetails(result),
        result: result.rows.map((row) => toMessage(row, call.instanceId)),
      });
    },
  };
}
