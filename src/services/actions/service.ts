import type { DescService } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import { type ApiService, apiService } from "../../api/register.ts";
import type { Permission } from "../../auth/permissions.ts";
import { InternalError } from "../../errors.ts";
import { PlatformActions } from "../../gen/platform/resources/action/v3alpha/action_service_pb.ts";
import { authorize } from "../call.ts";
import type { ServiceDeps } from "../deps.ts";
import { deliveryRpcs } from "./deliveries.ts";
import { AvailableConditions, executionRpcs } from "./executions.ts";
import { targetRpcs } from "./targets.ts";

export type ActionsPermission = Extract<Permission, `action.${string}` | "execution.read">;

/**
 * PlatformActions: targets, executions and the lists of available
 * conditions. Instance-wide (no `ctx`: the instance of the Host header), behind the feature flags
 * `multitenancy_resources_api` and `actions`.
 *
 * `services` returns every service Platform serves; it is called lazily (on the first list or
 * condition check), so the lists of methods and services include services registered after this one.
 */
export function actionsService(deps: ServiceDeps, services: () => DescService[]): ApiService {
  const gate = async (ctx: HandlerContext, permission: ActionsPermission) => {
    const call = await authorize(deps, ctx, permission, {
      features: ["multitenancy_resources_api", "actions"],
    });
    if (call.context.type === "system") throw new InternalError("actions need an instance context");
    return { ...call, instanceId: call.context.instanceId };
  };
  return apiService(PlatformActions, {
    ...targetRpcs(deps, gate),
    ...executionRpcs(deps, gate, new AvailableConditions(services)),
    ...deliveryRpcs(deps, gate),
  });
}
