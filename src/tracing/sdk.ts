/**
 * The OpenTelemetry SDK, loaded only when tracing is on (./tracing.ts imports this file dynamically): a
 * tracer provider with the configured sampler, a batch span processor and an OTLP/HTTP exporter, registered
 * with the API together with the W3C trace-context propagator and the AsyncLocalStorage context manager.
 * Settings that Platform does not validate itself are read by the SDK from the environment as usual
 * (OTEL_BSP_*, OTEL_EXPORTER_OTLP_TIMEOUT, OTEL_EXPORTER_OTLP_COMPRESSION, OTEL_EXPORTER_OTLP_CERTIFICATE,
 * OTEL_SPAN_*_LIMIT ...).
 */
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import {
  context,
  type DiagLogger,
  DiagLogLevel,
  diag,
  propagation,
  type Tracer,
  trace,
} from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { OTLPTraceExporter as JsonExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { OTLPTraceExporter as ProtobufExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { resourceFromAttributes } from "@opentelemetry/resources";
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BasicTracerProvider,
  BatchSpanProcessor,
  ParentBasedSampler,
  type Sampler,
  TraceIdRatioBasedSampler,
} from "@opentelemetry/sdk-trace-base";
import type { SamplerName, TracingConfig } from "./config.ts";
import type { TracingLog } from "./tracing.ts";

/** The instrumentation scope of every span. */
const SCOPE = "platform";

export function startSdk(
  config: TracingConfig,
  log: TracingLog,
): { tracer: Tracer; shutdown(): Promise<void> } {
  const version = packageVersion();
  diag.setLogger(throttled(log), DiagLogLevel.WARN);
  const Exporter = config.protocol === "http/json" ? JsonExporter : ProtobufExporter;
  const exporter = new Exporter({ url: config.url, headers: config.headers });
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({
      ...config.resourceAttributes,
      "service.name": config.serviceName,
      "service.version": version,
      "service.instance.id": config.resourceAttributes["service.instance.id"] ?? randomUUID(),
    }),
    sampler: sampler(config.sampler, config.samplerRatio),
    spanProcessors: [new BatchSpanProcessor(exporter)],
  });
  const contextManager = new AsyncLocalStorageContextManager().enable();
  context.setGlobalContextManager(contextManager);
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  trace.setGlobalTracerProvider(provider);
  return {
    tracer: provider.getTracer(SCOPE, version),
    async shutdown() {
      try {
        await provider.shutdown();
      } finally {
        trace.disable();
        propagation.disable();
        context.disable();
        diag.disable();
      }
    },
  };
}

function sampler(name: SamplerName, ratio: number): Sampler {
  const root = name.endsWith("always_on")
    ? new AlwaysOnSampler()
    : name.endsWith("always_off")
      ? new AlwaysOffSampler()
      : new TraceIdRatioBasedSampler(ratio);
  return name.startsWith("parentbased_") ? new ParentBasedSampler({ root }) : root;
}

/**
 * The SDK's own problems (an export that failed, a full queue) as warnings in Platform's log, each message
 * at most once a minute: a collector that is down must not flood the log.
 */
function throttled(log: TracingLog): DiagLogger {
  const lastSeen = new Map<string, number>();
  const warn = (raw: string, ...args: unknown[]) => {
    const detail = args.map((a) => (a instanceof Error ? a.message : String(a))).join(" ");
    const line = `${errorMessage(raw)}${detail ? ` ${detail}` : ""}`;
    const now = Date.now();
    if ((lastSeen.get(line) ?? -Infinity) > now - 60_000) return;
    if (lastSeen.size > 100) lastSeen.clear();
    lastSeen.set(line, now);
    log.warn(`tracing: ${line}`);
  };
  const ignore = () => {};
  return { error: warn, warn, info: ignore, debug: ignore, verbose: ignore };
}

/** The SDK reports a failed export as the error serialized to JSON (stack and all): its message only. */
function errorMessage(raw: string): string {
  if (!raw.startsWith("{")) return raw;
  try {
    const { message } = JSON.parse(raw) as { message?: unknown };
    return typeof message === "string" ? `export failed: ${message}` : raw;
  } catch {
    return raw;
  }
}

function packageVersion(): string {
  return JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")).version;
}
