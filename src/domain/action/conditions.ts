/**
 * Execution conditions and their IDs (docs/actions.md): `<type>.<value>`.
 *
 * | condition                       | ID                                                             |
 * |---------------------------------|----------------------------------------------------------------|
 * | request method                  | `request./platform.resources.user.v3alpha.PlatformUsers/CreateUser` |
 * | request service                 | `request.platform.resources.user.v3alpha.PlatformUsers`        |
 * | all requests                    | `request`                                                      |
 * | response (method/service/all)   | `response./pkg.Service/Method`, `response.pkg.Service`, `response` |
 * | event                           | `event.user.human.added`                                       |
 * | event group                     | `event.user.human.*`                                           |
 * | all events                      | `event`                                                        |
 * | function                        | `function.preuserinfo`                                         |
 *
 * Methods start with `/` and services never contain one, event names and groups contain no `*`, so every
 * ID maps back to exactly one condition.
 */
import { ExecutionType } from "./events.ts";

/** Functions usable as a condition: they append claims to userinfo / the access token. */
export const executionFunctions = ["preuserinfo", "preaccesstoken"] as const;

export type Condition =
  | { type: "request" | "response"; kind: "method" | "service"; value: string }
  | { type: "request" | "response" | "event"; kind: "all" }
  | { type: "event"; kind: "event" | "group"; value: string }
  | { type: "function"; kind: "function"; value: string };

export const executionTypeOf = (type: Condition["type"]): ExecutionType => ExecutionType[type];

/** Longest execution ID: `response.` + a 1000-character method. */
export const MAX_EXECUTION_ID_LENGTH = 1009;

export function executionId(c: Condition): string {
  switch (c.kind) {
    case "all":
      return c.type;
    case "group":
      return `event.${c.value}.*`;
    default:
      return `${c.type}.${c.value}`;
  }
}

/**
 * Event types and groups (the pattern of EventExecution in execution.proto): dot-separated segments of
 * ASCII letters, digits, `_` and `-`. ASCII keeps an execution ID (at most 1009 characters) within the
 * size PostgreSQL's btree indexes accept (about 2.7 kB for the events and action_executions keys); 1000
 * multi-byte characters would not fit.
 */
const EVENT_NAME = /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/u;

/** The condition of an execution ID; undefined when the ID is malformed. */
export function parseExecutionId(id: string): Condition | undefined {
  if (id.length > MAX_EXECUTION_ID_LENGTH) return undefined;
  if (id === "request" || id === "response" || id === "event") return { type: id, kind: "all" };
  const dot = id.indexOf(".");
  if (dot < 0) return undefined;
  const type = id.slice(0, dot);
  const value = id.slice(dot + 1);
  if (value === "" || value.length > 1000 + 2) return undefined;
  switch (type) {
    case "request":
    case "response":
      if (value.length > 1000) return undefined;
      return value.startsWith("/")
        ? { type, kind: "method", value }
        : value.includes("/")
          ? undefined
          : { type, kind: "service", value };
    case "event": {
      if (value.endsWith(".*")) {
        const group = value.slice(0, -2);
        return EVENT_NAME.test(group) && group.length <= 1000
          ? { type, kind: "group", value: group }
          : undefined;
      }
      return EVENT_NAME.test(value) && value.length <= 1000 ? { type, kind: "event", value } : undefined;
    }
    case "function":
      return value.length <= 1000 ? { type, kind: "function", value } : undefined;
    default:
      return undefined;
  }
}

/**
 * The IDs of the executions that may apply when `c` (a method, an event or a function) triggers, most
 * specific first: method, its service, all requests; event, each enclosing group, all events.
 */
export function executionCandidates(
  c:
    | { type: "request" | "response"; method: string }
    | { type: "event"; event: string }
    | { type: "function"; name: string },
): string[] {
  switch (c.type) {
    case "request":
    case "response": {
      const service = c.method.replace(/^\//, "").split("/")[0];
      return [`${c.type}.${c.method}`, `${c.type}.${service}`, c.type];
    }
    case "event": {
      const parts = c.event.split(".");
      const groups = parts
        .slice(0, -1)
        .map((_, i) => `event.${parts.slice(0, parts.length - 1 - i).join(".")}.*`);
      return [`event.${c.event}`, ...groups, "event"];
    }
    case "function":
      return [`function.${c.name}`];
  }
}
