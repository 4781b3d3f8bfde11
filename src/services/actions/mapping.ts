import { create } from "@bufbuild/protobuf";
import { type Duration, DurationSchema } from "@bufbuild/protobuf/wkt";
import type { Condition as DomainCondition } from "../../domain/action/conditions.ts";
import { ExecutionChoice, MAX_TARGET_TIMEOUT_NS, TargetType } from "../../domain/action/events.ts";
import { InvalidArgumentError } from "../../errors.ts";
import {
  type Condition,
  ConditionSchema,
  EventExecutionSchema,
  ExecutionSchema,
  type GetExecution,
  GetExecutionSchema,
  RequestExecutionSchema,
  ResponseExecutionSchema,
} from "../../gen/platform/resources/action/v3alpha/execution_pb.ts";
import {
  type GetTarget,
  GetTargetSchema,
  SetRESTRequestResponseSchema,
  SetRESTWebhookSchema,
  type Target,
  TargetSchema,
} from "../../gen/platform/resources/action/v3alpha/target_pb.ts";
import type { ExecutionRow, TargetRow } from "../../query/actions.ts";
import { resourceDetails } from "../mapping.ts";

const NS_PER_S = 1_000_000_000n;

/** Duration → nanoseconds: INVALID_ARGUMENT naming `field` unless 0 < d ≤ 270 s. */
export function timeoutNs(d: Duration, field: string): number {
  const ns = d.seconds * NS_PER_S + BigInt(d.nanos);
  if (d.seconds < 0n || d.nanos < 0 || ns <= 0n)
    throw new InvalidArgumentError("must be greater than 0s", field);
  if (ns > BigInt(MAX_TARGET_TIMEOUT_NS)) {
    throw new InvalidArgumentError(`must be at most ${MAX_TARGET_TIMEOUT_NS / 1e9}s`, field);
  }
  return Number(ns);
}

function toDuration(ns: number | string): Duration {
  const total = BigInt(ns);
  return create(DurationSchema, { seconds: total / NS_PER_S, nanos: Number(total % NS_PER_S) });
}

/** A target's URL must be an http or https URI (the declared rules checked that it is a URI). */
export function requireHttpUrl(url: string, field: string): string {
  let protocol = "";
  try {
    protocol = new URL(url).protocol;
  } catch {
    // reported below
  }
  if (protocol !== "http:" && protocol !== "https:")
    throw new InvalidArgumentError("must be an http or https URI", field);
  return url;
}

export function instanceOwner(instanceId: string) {
  return { type: 2 as const, id: instanceId };
}

/** A target as answered; its signing key only `withKey` (src/services/call.ts `answersSecrets`). */
export function toGetTarget(row: TargetRow, instanceId: string, withKey: boolean): GetTarget {
  const url = row.url;
  const target: Target = create(TargetSchema, {
    name: row.name,
    targetType:
      row.target_type === TargetType.restRequestResponse
        ? { case: "restRequestResponse", value: create(SetRESTRequestResponseSchema, { url }) }
        : { case: "restWebhook", value: create(SetRESTWebhookSchema, { url }) },
    timeout: toDuration(row.timeout_ns),
    executionType:
      row.execution_choice === ExecutionChoice.isAsync
        ? { case: "isAsync", value: row.is_async }
        : { case: "interruptOnError", value: row.interrupt_on_error },
    signingKey: withKey ? row.signing_key : "",
  });
  return create(GetTargetSchema, {
    details: resourceDetails({
      id: row.id,
      sequence: Number(row.sequence),
      changeDate: row.changed_at,
      owner: instanceOwner(instanceId),
    }),
    target,
  });
}

/**
 * Condition message → domain condition, without checking that methods, services and functions exist
 * (the declared rules have checked that exactly one member is set and the lengths).
 */
export function toDomainCondition(c: Condition | undefined, field: string): DomainCondition {
  const member = c?.conditionType;
  switch (member?.case) {
    case "request":
    case "response": {
      const inner = member.value.condition;
      if (inner.case === "all") return { type: member.case, kind: "all" };
      if (inner.case === "method") return { type: member.case, kind: "method", value: inner.value };
      if (inner.case === "service") return { type: member.case, kind: "service", value: inner.value };
      throw new InvalidArgumentError(
        "one of method, service, all must be set",
        `${field}.${member.case}.condition`,
      );
    }
    case "event": {
      const inner = member.value.condition;
      if (inner.case === "all") return { type: "event", kind: "all" };
      if (inner.case === "event" || inner.case === "group")
        return { type: "event", kind: inner.case, value: inner.value };
      throw new InvalidArgumentError("one of event, group, all must be set", `${field}.event.condition`);
    }
    case "function":
      return { type: "function", kind: "function", value: member.value };
    default:
      throw new InvalidArgumentError(
        "one of request, response, function, event must be set",
        `${field}.condition_type`,
      );
  }
}

function toCondition(
  row: Pick<ExecutionRow, "execution_type" | "condition_kind" | "condition_value">,
): Condition {
  const kind = row.condition_kind;
  const value = row.condition_value;
  const inner = kind === "all" ? { case: "all" as const, value: true } : { case: kind as "method", value };
  switch (row.execution_type) {
    case 1:
      return create(ConditionSchema, {
        conditionType: { case: "request", value: create(RequestExecutionSchema, { condition: inner }) },
      });
    case 2:
      return create(ConditionSchema, {
        conditionType: { case: "response", value: create(ResponseExecutionSchema, { condition: inner }) },
      });
    case 3:
      return create(ConditionSchema, {
        conditionType: {
          case: "event",
          value: create(EventExecutionSchema, {
            condition:
              kind === "all" ? { case: "all", value: true } : { case: kind as "event" | "group", value },
          }),
        },
      });
    default:
      return create(ConditionSchema, { conditionType: { case: "function", value } });
  }
}

export function toGetExecution(row: ExecutionRow, instanceId: string): GetExecution {
  return create(GetExecutionSchema, {
    details: resourceDetails({
      id: row.id,
      sequence: Number(row.sequence),
      changeDate: row.changed_at,
      owner: instanceOwner(instanceId),
    }),
    execution: create(ExecutionSchema, {
      condition: toCondition(row),
      targets: row.targets,
      includes: row.includes,
    }),
  });
}
