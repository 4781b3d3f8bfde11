import { create, type DescService } from "@bufbuild/protobuf";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { setHttpStatus } from "../../api/register.ts";
import { putExecution, removeExecution } from "../../domain/action/commands.ts";
import { type Condition, executionFunctions, executionId } from "../../domain/action/conditions.ts";
import { NotFoundError } from "../../errors.ts";
import {
  DeleteExecutionResponseSchema,
  ListAvailableExecutionFunctionsResponseSchema,
  ListAvailableExecutionMethodsResponseSchema,
  ListAvailableExecutionServicesResponseSchema,
  type PlatformActions,
  PutExecutionResponseSchema,
  SearchExecutionsResponseSchema,
} from "../../gen/platform/resources/action/v3alpha/action_service_pb.ts";
import { type ExecutionFilter, searchExecutions } from "../../query/actions.ts";
import { toPage } from "../../query/search.ts";
import type { AuthorizedCall } from "../call.ts";
import type { ServiceDeps } from "../deps.ts";
import { listDetails, resourceDetails } from "../mapping.ts";
import { instanceOwner, toDomainCondition, toGetExecution } from "./mapping.ts";
import type { ActionsPermission } from "./service.ts";

type Authorize = (
  ctx: HandlerContext,
  permission: ActionsPermission,
) => Promise<AuthorizedCall & { instanceId: string }>;

/** The methods and services usable in conditions: those of every service Platform serves. */
export class AvailableConditions {
  private cached?: { methods: string[]; services: string[] };

  constructor(private readonly services: () => DescService[]) {}

  private lists() {
    // Built on first use: the list of services is complete only once every service is registered.
    this.cached ??= {
      methods: this.services()
        .flatMap((s) => s.methods.map((m) => `/${s.typeName}/${m.name}`))
        .sort(),
      services: this.services()
        .map((s) => s.typeName)
        .sort(),
    };
    return this.cached;
  }

  get methods(): string[] {
    return this.lists().methods;
  }

  get serviceNames(): string[] {
    return this.lists().services;
  }

  /** NOT_FOUND naming the field when the method, service or function of the condition does not exist. */
  requireAvailable(c: Condition, field: string): void {
    if (c.kind === "method" && !this.methods.includes(c.value)) {
      throw new NotFoundError(
        `${field}.${c.type}.method: method "${c.value}" not found (see GET /resources/v3alpha/executions/methods)`,
      );
    }
    if (c.kind === "service" && !this.serviceNames.includes(c.value)) {
      throw new NotFoundError(
        `${field}.${c.type}.service: service "${c.value}" not found (see GET /resources/v3alpha/executions/services)`,
      );
    }
    if (c.kind === "function" && !(executionFunctions as readonly string[]).includes(c.value)) {
      throw new NotFoundError(
        `${field}.function: function "${c.value}" not found (see GET /resources/v3alpha/executions/functions)`,
      );
    }
  }
}

/** PutExecution, DeleteExecution, SearchExecutions and the ListAvailableExecution* lists. */
export function executionRpcs(
  deps: ServiceDeps,
  authorize: Authorize,
  available: AvailableConditions,
): Partial<ServiceImpl<typeof PlatformActions>> {
  return {
    async putExecution(req, ctx) {
      const call = await authorize(ctx, "action.execution.write");
      const execution = req.execution!;
      const condition = toDomainCondition(execution.condition, "execution.condition");
      available.requireAvailable(condition, "execution.condition");
      const result = await putExecution(
        deps.eventStore,
        { instanceId: call.instanceId, creator: call.creator },
        condition,
        execution.targets,
        execution.includes,
      );
      setHttpStatus(ctx, result.created ? 201 : 200);
      return create(PutExecutionResponseSchema, {
        details: resourceDetails({ ...result, owner: instanceOwner(call.instanceId) }),
      });
    },

    async deleteExecution(req, ctx) {
      const call = await authorize(ctx, "action.execution.delete");
      const version = await removeExecution(
        deps.eventStore,
        { instanceId: call.instanceId, creator: call.creator },
        req.id,
      );
      return create(DeleteExecutionResponseSchema, {
        details: resourceDetails({ ...version, owner: instanceOwner(call.instanceId) }),
      });
    },

    async searchExecutions(req, ctx) {
      const call = await authorize(ctx, "execution.read");
      const page = toPage(req.query, deps.config.maxSearchLimit);
      const filters: ExecutionFilter[] = req.filters.map((f, i) => {
        switch (f.filter.case) {
          case "inConditions":
            return {
              ids: f.filter.value.conditions.map((c, j) =>
                executionId(toDomainCondition(c, `filters[${i}].in_conditions.conditions[${j}]`)),
              ),
            };
          case "executionType":
            return { executionType: f.filter.value.type };
          case "target":
            return { targetId: f.filter.value.id };
          default:
            return { include: f.filter.value?.include ?? "" };
        }
      });
      const result = await searchExecutions(deps.db, call.instanceId, filters, page);
      return create(SearchExecutionsResponseSchema, {
        details: listDetails(result),
        result: result.rows.map((row) => toGetExecution(row, call.instanceId)),
      });
    },

    async listAvailableExecutionFunctions(_req, ctx) {
      await authorize(ctx, "execution.read");
      return create(ListAvailableExecutionFunctionsResponseSchema, { functions: [...executionFunctions] });
    },

    async listAvailableExecutionMethods(_req, ctx) {
      await authorize(ctx, "execution.read");
      return create(ListAvailableExecutionMethodsResponseSchema, { methods: available.methods });
    },

    async listAvailableExecutionServices(_req, ctx) {
      await authorize(ctx, "execution.read");
      return create(ListAvailableExecutionServicesResponseSchema, { services: available.serviceNames });
    },
  };
}
