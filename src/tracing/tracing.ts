/**
 * OpenTelemetry tracing (docs/operations.md "Tracing"): off unless an OTLP endpoint is configured. When
 * off, the SDK is never loaded and nothing is instrumented: the server, the RPC chain and the database
 * get no hooks or wrappers at all, and the outbound HTTP client checks `activeTracer()` once per call.
 * When on, `startTracing` loads the SDK (./sdk.ts) and registers it with the OpenTelemetry API (tracer
 * provider, W3C trace-context propagator, AsyncLocalStorage context manager), so that a span started for
 * a request is the parent of every span started while serving it.
 *
 * The SDK is process-wide (the API's globals), like the process's tracing settings: several Platforms in
 * one process (tests) share the first one's and the last `shutdown` stops it.
 */
import { type Attributes, SpanKind, SpanStatusCode, type Tracer } from "@opentelemetry/api";
import type { TracingConfig } from "./config.ts";

export interface Tracing {
  tracer: Tracer;
  /** Exports what is buffered and stops; the last user's shutdown unregisters the SDK. */
  shutdown(): Promise<void>;
}

interface Running {
  tracer: Tracer;
  users: number;
  stop(): Promise<void>;
}

let running: Running | undefined;
let starting: Promise<Running> | undefined;

/** The tracer while tracing is on; undefined when off (the common case: one check, nothing else). */
export function activeTracer(): Tracer | undefined {
  return running?.tracer;
}

export interface TracingLog {
  /** Problems of the exporter (the collector cannot be reached, ...), at most one line a minute each. */
  warn(message: string): void;
}

/** Loads and registers the SDK (once per process); resolves with this user's handle. */
export async function startTracing(config: TracingConfig, log: TracingLog): Promise<Tracing> {
  starting ??= import("./sdk.ts").then(async ({ startSdk }) => {
    const sdk = await startSdk(config, log);
    running = { tracer: sdk.tracer, users: 0, stop: sdk.shutdown };
    return running;
  });
  let current: Running;
  try {
    current = await starting;
  } catch (error) {
    starting = undefined;
    throw error;
  }
  current.users++;
  let stopped = false;
  return {
    tracer: current.tracer,
    async shutdown() {
      if (stopped) return;
      stopped = true;
      if (--current.users > 0) return;
      if (running === current) {
        running = undefined;
        starting = undefined;
      }
      await current.stop();
    },
  };
}

/**
 * Runs `work` as the root span of a trace of its own (background work that no request started, such as an
 * event delivery), so that its database statements and outbound calls are traced as its children.
 */
export function inRootSpan<T>(
  tracer: Tracer,
  name: string,
  attributes: Attributes,
  work: () => Promise<T>,
): Promise<T> {
  return tracer.startActiveSpan(name, { kind: SpanKind.INTERNAL, root: true, attributes }, (span) =>
    work().then(
      (value) => {
        span.end();
        return value;
      },
      (error: unknown) => {
        span.setStatus({ code: SpanStatusCode.ERROR, message: (error as Error)?.message });
        span.end();
        throw error;
      },
    ),
  );
}
