/**
 * Targets and executions (docs/actions.md). Both are instance-wide
 * aggregates: `target` (ID: a new ID) and `execution` (ID: the execution ID derived from its condition,
 * see ./conditions.ts), so there is at most one execution per condition and putting it again replaces it.
 */
import type { StoredEvent } from "../../eventstore/types.ts";

export const TARGET = "target";
export const EXECUTION = "execution";

export const TargetEvent = {
  added: "target.added",
  /** Only the fields that changed. */
  changed: "target.changed",
  /** A new signing key (never in the event: `previous_valid_until` says until when the old one is sent too). */
  signingKeyRotated: "target.signing_key.rotated",
  removed: "target.removed",
} as const;

export const ExecutionEvent = {
  /** The whole execution (condition, targets, includes): created or replaced. */
  set: "execution.set",
  removed: "execution.removed",
} as const;

/** How a target is called (the `target_type` member). */
export const TargetType = { restWebhook: 1, restRequestResponse: 2 } as const;
export type TargetType = (typeof TargetType)[keyof typeof TargetType];

/** Which `execution_type` member was set (its bool value is kept separately, so reads give back the input). */
export const ExecutionChoice = { isAsync: 1, interruptOnError: 2 } as const;
export type ExecutionChoice = (typeof ExecutionChoice)[keyof typeof ExecutionChoice];

/** Longest timeout of a target call (this keeps calls below common proxy limits). */
export const MAX_TARGET_TIMEOUT_NS = 270_000_000_000;

/** Payload of `target.added`; `target.changed` carries a subset. The signing key is never in an event. */
export interface TargetFields {
  name: string;
  target_type: TargetType;
  url: string;
  /** Nanoseconds, > 0 and ≤ MAX_TARGET_TIMEOUT_NS. */
  timeout_ns: number;
  execution_choice: ExecutionChoice;
  /** Value of the chosen `execution_type` member. */
  execution_value: boolean;
}

export interface TargetState extends TargetFields {
  sequence: number;
  changedAt: Date;
}

/** `is_async` and `interrupt_on_error` as the caller of targets needs them. */
export function callBehaviour(t: Pick<TargetFields, "execution_choice" | "execution_value">): {
  isAsync: boolean;
  interruptOnError: boolean;
} {
  return {
    isAsync: t.execution_choice === ExecutionChoice.isAsync && t.execution_value,
    interruptOnError: t.execution_choice === ExecutionChoice.interruptOnError && t.execution_value,
  };
}

/** Current state of a target from its events; undefined when it does not exist (never added or removed). */
export function foldTarget(events: StoredEvent[]): TargetState | undefined {
  let state: TargetState | undefined;
  for (const e of events) {
    switch (e.type) {
      case TargetEvent.added:
        state = { ...(e.payload as unknown as TargetFields), sequence: e.sequence, changedAt: e.createdAt };
        break;
      case TargetEvent.changed:
        if (state)
          state = {
            ...state,
            ...(e.payload as Partial<TargetFields>),
            sequence: e.sequence,
            changedAt: e.createdAt,
          };
        break;
      case TargetEvent.signingKeyRotated:
        if (state) state = { ...state, sequence: e.sequence, changedAt: e.createdAt };
        break;
      case TargetEvent.removed:
        state = undefined;
        break;
    }
  }
  return state;
}

/** ExecutionType of the API. */
export const ExecutionType = { request: 1, response: 2, event: 3, function: 4 } as const;
export type ExecutionType = (typeof ExecutionType)[keyof typeof ExecutionType];

/** Payload of `execution.set`. */
export interface ExecutionFields {
  execution_type: ExecutionType;
  /** `method`, `service`, `all` (request/response), `event`, `group`, `all` (event), `function`. */
  condition_kind: string;
  /** The method, service, event, group or function name; "" for `all`. */
  condition_value: string;
  targets: string[];
  includes: string[];
}

export interface ExecutionState extends ExecutionFields {
  sequence: number;
  changedAt: Date;
}

/** Current state of an execution from its events; undefined when it does not exist. */
export function foldExecution(events: StoredEvent[]): ExecutionState | undefined {
  let state: ExecutionState | undefined;
  for (const e of events) {
    if (e.type === ExecutionEvent.set) {
      state = { ...(e.payload as unknown as ExecutionFields), sequence: e.sequence, changedAt: e.createdAt };
    } else if (e.type === ExecutionEvent.removed) {
      state = undefined;
    }
  }
  return state;
}
