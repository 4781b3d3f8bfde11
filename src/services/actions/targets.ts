import { create } from "@bufbuild/protobuf";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { randomToken } from "../../crypto/tokens.ts";
import { addTarget, changeTarget, removeTarget, rotateSigningKey } from "../../domain/action/commands.ts";
import { ExecutionChoice, type TargetFields, TargetType } from "../../domain/action/events.ts";
import { NotFoundError } from "../../errors.ts";
import {
  CreateTargetResponseSchema,
  DeleteTargetResponseSchema,
  GetTargetResponseSchema,
  PatchTargetResponseSchema,
  type PlatformActions,
  RotateTargetSigningKeyResponseSchema,
  SearchTargetsResponseSchema,
} from "../../gen/platform/resources/action/v3alpha/action_service_pb.ts";
import type { PatchTarget, Target } from "../../gen/platform/resources/action/v3alpha/target_pb.ts";
import { newId } from "../../id.ts";
import { getTarget, searchTargets, type TargetFilter } from "../../query/actions.ts";
import { toPage } from "../../query/search.ts";
import { type AuthorizedCall, answersSecrets } from "../call.ts";
import type { ServiceDeps } from "../deps.ts";
import { listDetails, resourceDetails } from "../mapping.ts";
import { instanceOwner, requireHttpUrl, timeoutNs, toGetTarget } from "./mapping.ts";
import type { ActionsPermission } from "./service.ts";

type Authorize = (
  ctx: HandlerContext,
  permission: ActionsPermission,
) => Promise<AuthorizedCall & { instanceId: string }>;

/** `target_type` of a Target or PatchTarget → type and URL (the URL an http(s) URI). */
function targetTypeOf(
  t: Target | PatchTarget,
  prefix: string,
): Pick<TargetFields, "target_type" | "url"> | undefined {
  switch (t.targetType.case) {
    case "restWebhook":
      return {
        target_type: TargetType.restWebhook,
        url: requireHttpUrl(t.targetType.value.url, `${prefix}.rest_webhook.url`),
      };
    case "restRequestResponse":
      return {
        target_type: TargetType.restRequestResponse,
        url: requireHttpUrl(t.targetType.value.url, `${prefix}.rest_request_response.url`),
      };
    default:
      return undefined;
  }
}

function executionTypeOf(
  t: Target | PatchTarget,
): Pick<TargetFields, "execution_choice" | "execution_value"> | undefined {
  switch (t.executionType.case) {
    case "isAsync":
      return { execution_choice: ExecutionChoice.isAsync, execution_value: t.executionType.value };
    case "interruptOnError":
      return { execution_choice: ExecutionChoice.interruptOnError, execution_value: t.executionType.value };
    default:
      return undefined;
  }
}

/** CreateTarget, PatchTarget, DeleteTarget, GetTarget, SearchTargets. */
export function targetRpcs(
  deps: ServiceDeps,
  authorize: Authorize,
): Partial<ServiceImpl<typeof PlatformActions>> {
  return {
    async createTarget(req, ctx) {
      const call = await authorize(ctx, "action.target.write");
      const t = req.target!; // required by the declared rules, as are name, timeout and both oneofs
      const fields: TargetFields = {
        name: t.name,
        ...targetTypeOf(t, "target")!,
        timeout_ns: timeoutNs(t.timeout!, "target.timeout"),
        ...executionTypeOf(t)!,
      };
      const id = newId();
      const signingKey = randomToken();
      const version = await addTarget(
        deps.eventStore,
        { instanceId: call.instanceId, creator: call.creator },
        id,
        fields,
        signingKey,
      );
      return create(CreateTargetResponseSchema, {
        details: resourceDetails({ ...version, owner: instanceOwner(call.instanceId) }),
        signingKey,
      });
    },

    async patchTarget(req, ctx) {
      const call = await authorize(ctx, "action.target.write");
      const t = req.target!;
      const change: Partial<TargetFields> = {
        name: t.name,
        ...targetTypeOf(t, "target"),
        timeout_ns: t.timeout ? timeoutNs(t.timeout, "target.timeout") : undefined,
        ...executionTypeOf(t),
      };
      const version = await changeTarget(
        deps.eventStore,
        { instanceId: call.instanceId, creator: call.creator },
        req.id,
        change,
      );
      return create(PatchTargetResponseSchema, {
        details: resourceDetails({ ...version, owner: instanceOwner(call.instanceId) }),
      });
    },

    async deleteTarget(req, ctx) {
      const call = await authorize(ctx, "action.target.delete");
      const version = await removeTarget(
        deps.eventStore,
        { instanceId: call.instanceId, creator: call.creator },
        req.id,
      );
      return create(DeleteTargetResponseSchema, {
        details: resourceDetails({ ...version, owner: instanceOwner(call.instanceId) }),
      });
    },

    async rotateTargetSigningKey(req, ctx) {
      const call = await authorize(ctx, "action.target.write");
      const signingKey = randomToken();
      const version = await rotateSigningKey(
        deps.eventStore,
        { instanceId: call.instanceId, creator: call.creator },
        req.id,
        signingKey,
        deps.config.execution.signingKeyGraceSeconds,
      );
      return create(RotateTargetSigningKeyResponseSchema, {
        details: resourceDetails({ ...version, owner: instanceOwner(call.instanceId) }),
        signingKey,
      });
    },

    async getTarget(req, ctx) {
      const call = await authorize(ctx, "action.target.read");
      const row = await getTarget(deps.db, call.instanceId, req.id);
      if (!row) throw new NotFoundError(`target ${req.id} not found`);
      const withKey = await answersSecrets(deps, call, "action.target.read");
      return create(GetTargetResponseSchema, { target: toGetTarget(row, call.instanceId, withKey) });
    },

    async searchTargets(req, ctx) {
      const call = await authorize(ctx, "action.target.read");
      const page = toPage(req.query, deps.config.maxSearchLimit);
      const filters: TargetFilter[] = req.filters.map((f) =>
        f.filter.case === "name"
          ? { name: f.filter.value.name, method: f.filter.value.method }
          : { ids: f.filter.value?.ids ?? [] },
      );
      const result = await searchTargets(deps.db, call.instanceId, filters, req.sortingColumn, page);
      const withKey = await answersSecrets(deps, call, "action.target.read");
      return create(SearchTargetsResponseSchema, {
        details: listDetails(result),
        sortingColumn: req.sortingColumn,
        result: result.rows.map((row) => toGetTarget(row, call.instanceId, withKey)),
      });
    },
  };
}
