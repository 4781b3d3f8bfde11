/**
 * The execution engine (docs/actions.md): finds the executions that apply to a request, a
 * response, a function or an event, calls their targets and acts on the answers.
 *
 * - Request and response conditions: `callRequestTargets` / `callResponseTargets`, run by the interceptor
 *   of ./interceptor.ts in the one interceptor chain of every protocol.
 * - Function conditions (`preuserinfo`, `preaccesstoken`): `runFunction` (./functions.ts), called by the
 *   OIDC endpoints.
 * - Event conditions: a durable outbox written with the events (./outbox.ts) and a delivery worker per
 *   process (./worker.ts).
 *
 * Every call is a signed POST (./signing.ts) through `HttpCaller` (src/net/http.ts: the outbound-address
 * policy, timeout, answer size). Target types: `rest_webhook` (only the status counts) and
 * `rest_request_response` (the answer's JSON is used). Execution types: `is_async` (not awaited, its
 * result never matters), `interrupt_on_error` (a failure stops the call with an error naming the target),
 * neither (a failure is logged and the call goes on). No call is ever made inside a database transaction.
 */
import { setMaxListeners } from "node:events";
import {
  type DescMessage,
  fromJson,
  type JsonValue,
  type MessageShape,
  type Registry,
  toJson,
} from "@bufbuild/protobuf";
import { rejectNul, validate } from "../api/validate.ts";
import { executionCandidates } from "../domain/action/conditions.ts";
import { TargetType } from "../domain/action/events.ts";
import {
  Code,
  DeadlineExceededError,
  FailedPreconditionError,
  PlatformError,
  UnavailableError,
} from "../errors.ts";
import type { EventStore } from "../eventstore/eventstore.ts";
import { type CallAnswer, CallFailure, formatMs, HttpCaller } from "../net/http.ts";
import type { OutboundGuard } from "../net/outbound.ts";
import type { FeatureGate } from "../query/features.ts";
import type { Queryable } from "../storage/database.ts";
import { ExecutionLookup, type ResolvedTarget } from "./lookup.ts";
import { SIGNATURE_HEADER, signatureHeader } from "./signing.ts";

/** The engine's settings (from src/config.ts). */
export interface ExecutionSettings {
  /** Where targets may be called: the outbound-address policy's guard of the instance level. */
  outbound: OutboundGuard;
  /** PLATFORM_EXECUTION_MAX_RESPONSE_BYTES. */
  maxResponseBytes: number;
  /** PLATFORM_EXECUTION_MAX_ATTEMPTS: attempts of an event delivery before it is given up. */
  maxAttempts: number;
  /** PLATFORM_EXECUTION_RETRY_DELAY_MS: the first retry delay of an event delivery (doubling each time). */
  retryDelayMs: number;
  /** PLATFORM_EXECUTION_SIGNING_KEY_GRACE_SECONDS: how long the key before a rotation stays valid. */
  signingKeyGraceSeconds: number;
}

/** What the engine logs with (pino's shape). */
export interface ExecutionLog {
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
  debug?(obj: object, msg: string): void;
}

/** Per call: a signal that cancels the calls (the client went away) and the request's logger. */
export interface CallOptions {
  signal?: AbortSignal;
  log?: ExecutionLog;
}

/** Who made the call, as the request payload names it. */
export interface CallInfo {
  fullMethod: string;
  instanceID: string;
  orgID: string;
  projectID: string;
  userID: string;
}

/** A target that failed: why (a CallFailure kind, a non-2xx answer, or an unusable answer) and a message. */
export class TargetFailure extends Error {
  constructor(
    readonly target: Pick<ResolvedTarget, "id" | "name">,
    readonly kind: CallFailure["kind"] | "status" | "invalid",
    readonly detail: string,
    readonly status?: number,
  ) {
    super(`target ${target.name} (${target.id}) ${detail}`);
    this.name = "TargetFailure";
  }

  /**
   * What the client gets when the target interrupts its call (docs/actions.md "Errors"): a timeout is
   * DEADLINE_EXCEEDED (504), a target that cannot be reached UNAVAILABLE (503, worth a retry), a target
   * that refused (non-2xx), gave an unusable answer, or is denied FAILED_PRECONDITION (400). The message
   * names the target; of its answer only a short excerpt.
   */
  toPlatformError(): PlatformError {
    switch (this.kind) {
      case "timeout":
        return new DeadlineExceededError(this.message);
      case "unreachable":
        return new UnavailableError(this.message);
      case "cancelled":
        return new PlatformError(Code.CANCELLED, this.message);
      default:
        return new FailedPreconditionError(this.message);
    }
  }
}

/** At most this many characters of a target's answer appear in an error message. */
const EXCERPT_CHARS = 100;

export function excerpt(body: Buffer): string {
  const text = body
    .subarray(0, EXCERPT_CHARS * 4)
    .toString("utf8")
    .replace(/[\p{Cc}\s]+/gu, " ")
    .trim();
  return text.length > EXCERPT_CHARS ? `${text.slice(0, EXCERPT_CHARS)}…` : text;
}

const JSON_WRITE = { useProtoFieldName: true, alwaysEmitImplicit: true } as const;

export class ExecutionEngine {
  readonly lookup: ExecutionLookup;
  readonly http: HttpCaller;
  /** For google.protobuf.Any in request and response JSON (set by the server once the API is registered). */
  registry?: Registry;
  private readonly pending = new Set<Promise<unknown>>();
  /** Cancels the asynchronous calls still running when the process stops. */
  private readonly stopping = new AbortController();

  constructor(
    readonly db: Queryable,
    readonly eventStore: EventStore,
    private readonly features: Pick<FeatureGate, "flags"> | undefined,
    readonly settings: ExecutionSettings,
    readonly log: ExecutionLog,
    options: { cacheTtlMs?: number } = {},
  ) {
    this.lookup = new ExecutionLookup(db, eventStore, options.cacheTtlMs);
    setMaxListeners(0, this.stopping.signal); // one listener per asynchronous call under way
    this.http = new HttpCaller({
      guard: settings.outbound,
      maxResponseBytes: settings.maxResponseBytes,
    });
  }

  /**
   * Lets the asynchronous calls under way finish for up to `graceMs`, cancels the rest, then closes the
   * kept-alive connections.
   */
  async close(graceMs = 5_000): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.allSettled([...this.pending]),
      new Promise((resolve) => {
        timer = setTimeout(resolve, graceMs);
      }),
    ]);
    clearTimeout(timer);
    this.stopping.abort();
    await Promise.allSettled([...this.pending]);
    this.http.close();
  }

  /** Whether the `actions` feature lets this instance call targets. */
  async enabled(instanceId: string): Promise<boolean> {
    if (!this.features) return true;
    return (await this.features.flags(instanceId)).actions === true;
  }

  /** The targets of a request or response condition on `method` (`/pkg.Service/Method`). */
  targetsOf(instanceId: string, type: "request" | "response", method: string): Promise<ResolvedTarget[]> {
    return this.lookup.targets(instanceId, executionCandidates({ type, method }));
  }

  /** The targets of a function condition. */
  functionTargets(instanceId: string, name: string): Promise<ResolvedTarget[]> {
    return this.lookup.targets(instanceId, executionCandidates({ type: "function", name }));
  }

  /**
   * One signed POST of `body` to `target`. Resolves with the answer when its status is 2xx; rejects with a
   * TargetFailure otherwise (no answer in time, unreachable, denied, too large, non-2xx).
   */
  async send(
    target: Pick<
      ResolvedTarget,
      "id" | "name" | "url" | "timeoutMs" | "signingKey" | "previousSigningKey" | "previousValidUntil"
    >,
    body: string,
    signal?: AbortSignal,
  ): Promise<CallAnswer> {
    const now = Date.now();
    const previous =
      target.previousSigningKey && (target.previousValidUntil ?? 0) > now
        ? target.previousSigningKey
        : undefined;
    const headers = {
      [SIGNATURE_HEADER]: signatureHeader({ current: target.signingKey, previous }, body, now),
    };
    let answer: CallAnswer;
    try {
      answer = await this.http.post(target.url, body, headers, target.timeoutMs, signal);
    } catch (error) {
      if (error instanceof CallFailure) {
        const detail =
          error.kind === "timeout" ? `timed out after ${formatMs(target.timeoutMs)}` : error.message;
        throw new TargetFailure(target, error.kind, detail);
      }
      throw error;
    }
    if (answer.status < 200 || answer.status > 299) {
      const text = excerpt(answer.body);
      throw new TargetFailure(
        target,
        "status",
        `answered HTTP ${answer.status}${text ? `: ${text}` : ""}`,
        answer.status,
      );
    }
    return answer;
  }

  /** Runs `call` for an `is_async` target: not awaited, its failure only logged. */
  private detach(
    target: ResolvedTarget,
    what: string,
    call: () => Promise<unknown>,
    log: ExecutionLog,
  ): void {
    const running = call()
      .catch((error) => log.warn({ err: error, target: target.id }, `${what}: asynchronous call failed`))
      .finally(() => this.pending.delete(running));
    this.pending.add(running);
  }

  /**
   * Calls `targets` in order with `payload(current)` and folds their answers into `current`:
   * `use(answer, current)` turns a request/response target's answer into the next value (throwing a
   * message for an unusable answer). A failure stops the call (thrown as the client's error) when the
   * target interrupts on error, else it is logged and the value stays as it was.
   */
  async callInOrder<T>(
    targets: ResolvedTarget[],
    what: string,
    initial: T,
    payload: (current: T) => unknown,
    use: ((answer: Buffer, current: T, target: ResolvedTarget) => T) | undefined,
    options: CallOptions = {},
  ): Promise<T> {
    const { signal } = options;
    const log = options.log ?? this.log;
    let current = initial;
    for (const target of targets) {
      const body = JSON.stringify(payload(current));
      if (target.isAsync) {
        this.detach(target, what, () => this.send(target, body, this.stopping.signal), log);
        continue;
      }
      try {
        const answer = await this.send(target, body, signal);
        if (use && target.type === TargetType.restRequestResponse) {
          try {
            current = use(answer.body, current, target);
          } catch (error) {
            const reason = error instanceof Error ? error.message : String(error);
            throw new TargetFailure(target, "invalid", `answered unusable JSON: ${reason}`);
          }
        }
      } catch (error) {
        if (!(error instanceof TargetFailure)) throw error;
        if (target.interruptOnError) throw error.toPlatformError();
        log.warn({ target: target.id, execution: target.executionId }, `${what}: ${error.message}`);
      }
    }
    return current;
  }

  /**
   * Request condition: each target gets `{fullMethod, instanceID, orgID, projectID, userID, request}`;
   * a request/response target's answer is the request from then on (parsed and validated like a client's).
   */
  callRequestTargets<D extends DescMessage>(
    targets: ResolvedTarget[],
    info: CallInfo,
    schema: D,
    request: MessageShape<D>,
    options?: CallOptions,
  ): Promise<MessageShape<D>> {
    return this.callInOrder(
      targets,
      `request execution of ${info.fullMethod}`,
      request,
      (current) => ({ ...info, request: this.json(schema, current) }),
      (answer) => this.parse(schema, answer),
      options,
    );
  }

  /**
   * Response condition: each target gets the request payload plus `response`; a request/response target's
   * answer replaces the response.
   */
  callResponseTargets<D extends DescMessage>(
    targets: ResolvedTarget[],
    info: CallInfo,
    request: { schema: DescMessage; message: unknown },
    schema: D,
    response: MessageShape<D>,
    options?: CallOptions,
  ): Promise<MessageShape<D>> {
    const requestJson = this.json(request.schema, request.message as never);
    return this.callInOrder(
      targets,
      `response execution of ${info.fullMethod}`,
      response,
      (current) => ({ ...info, request: requestJson, response: this.json(schema, current) }),
      (answer) => this.parse(schema, answer),
      options,
    );
  }

  /** A message in proto JSON with the proto (snake_case) names, as the API writes it. */
  json<D extends DescMessage>(schema: D, message: MessageShape<D>): JsonValue {
    return toJson(schema, message, { ...JSON_WRITE, registry: this.registry });
  }

  /** A target's answer as a message, parsed and validated like client input (throws the reason). */
  parse<D extends DescMessage>(schema: D, body: Buffer): MessageShape<D> {
    let json: JsonValue;
    try {
      json = JSON.parse(body.toString("utf8")) as JsonValue;
    } catch {
      throw new Error("not JSON");
    }
    const message = fromJson(schema, json, { ignoreUnknownFields: false, registry: this.registry });
    rejectNul(schema, message);
    validate(schema, message);
    return message;
  }
}
