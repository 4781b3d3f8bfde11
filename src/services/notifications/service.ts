import type { HandlerContext } from "@connectrpc/connect";
import { type ApiService, apiService } from "../../api/register.ts";
import type { Permission } from "../../auth/permissions.ts";
import { InternalError } from "../../errors.ts";
import { PlatformNotifications } from "../../gen/platform/resources/notification/v3alpha/notification_service_pb.ts";
import { type AuthorizedCall, authorize } from "../call.ts";
import type { ServiceDeps } from "../deps.ts";
import { messageRpcs } from "./messages.ts";
import { smsRpcs } from "./sms.ts";
import { smtpRpcs } from "./smtp.ts";

export type NotificationPermission = Extract<Permission, `iam.notification.${string}`>;

export type Gate = (
  ctx: HandlerContext,
  permission: NotificationPermission,
) => Promise<AuthorizedCall & { instanceId: string }>;

/**
 * PlatformNotifications: the SMTP and SMS providers of the instance of the Host header and the record of
 * the messages sent through them (docs/notifications.md). Instance-wide: only instance roles grant `iam.notification.*`.
 */
export function notificationsService(deps: ServiceDeps): ApiService {
  const gate: Gate = async (ctx, permission) => {
    const call = await authorize(deps, ctx, permission);
    if (call.context.type === "system") throw new InternalError("notification providers need an instance");
    return { ...call, instanceId: call.context.instanceId };
  };
  return apiService(PlatformNotifications, {
    ...smtpRpcs(deps, gate),
    ...smsRpcs(deps, gate),
    ...messageRpcs(deps, gate),
  });
}
