/**
 * One log line and one metrics observation per request, when its answer is out (or the client went away):
 * the instance, the caller, the protocol, the RPC or route template, the status and the duration. Probes
 * (`/healthz`, `/ready`, `/metrics`) log at debug, everything else at info (docs/operations.md "Logs").
 *
 * The metrics' labels stay bounded: the RPC's name or the route template (`/ui/login/password`, never the
 * path with its IDs), `unmatched` for paths no route serves, a known HTTP method or `OTHER`.
 */
import { type FastifyInstance, type FastifyReply, type FastifyRequest, LogController } from "fastify";
import type { RequestScope } from "../api/scope.ts";
import { Code } from "../errors.ts";
import type { Metrics } from "../metrics/metrics.ts";

/** Routes of health checks and scrapers: logged at debug, they would drown the rest. */
const PROBES = new Set(["/healthz", "/ready", "/metrics"]);

const METHODS = new Set(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]);

const CODE_NAMES: Record<number, string> = Object.fromEntries(
  Object.entries(Code).map(([name, code]) => [code, name]),
);

/** The route label of a request no route serves. */
export const UNMATCHED = "unmatched";

type Protocol = "rest" | "grpc" | "grpc_web" | "connect" | "http";

export interface RequestObserverOptions {
  metrics: Metrics;
  /** The URL as it may be logged (secret query parameters hidden). */
  redactUrl: (url: string) => string;
}

/**
 * Fastify's log controller, replaced: no "incoming request" line, and on completion one line with what a
 * person needs plus the metrics observation. Fastify calls `requestCompleted` once the answer is out,
 * whatever wrote it (connect's handlers write to the raw response). Its other lines (errors of streams,
 * of the error handler) stay as they are.
 */
export class RequestObserver extends LogController {
  /** Requests already observed (a request aborted after its answer began must not count twice). */
  private readonly observed = new WeakSet<FastifyRequest>();
  /** When each request arrived, for aborted requests (which have no reply timing). */
  private readonly startTimes = new WeakMap<FastifyRequest, number>();

  constructor(private readonly options: RequestObserverOptions) {
    super();
  }

  /** Registers what the controller cannot see: requests whose client went away before the answer. */
  register(app: FastifyInstance): void {
    app.addHook("onRequest", (request, _reply, done) => {
      this.startTimes.set(request, performance.now());
      done();
    });
    // The client closed the connection before the answer was complete: 499, as nginx logs it.
    app.addHook("onRequestAbort", (request, done) => {
      const started = this.startTimes.get(request);
      this.observe(request, 499, started === undefined ? 0 : performance.now() - started, undefined);
      done();
    });
  }

  override incomingRequest(): void {}

  override requestCompleted(
    _error: Error | null | undefined,
    request: FastifyRequest,
    reply: FastifyReply,
  ): void {
    this.observe(request, reply.statusCode, reply.elapsedTime, reply);
  }

  /** `reply` is undefined for an aborted request. */
  private observe(
    request: FastifyRequest,
    status: number,
    ms: number,
    reply: FastifyReply | undefined,
  ): void {
    if (this.observed.has(request)) return;
    this.observed.add(request);
    const aborted = reply === undefined;
    const config = request.routeOptions.config;
    const rpc = config?.rpc;
    const protocol: Protocol = rpc ? (config.rest ? "rest" : connectProtocol(request)) : "http";
    const route = rpc ?? request.routeOptions.url ?? UNMATCHED;
    const method = METHODS.has(request.method) ? request.method : "OTHER";
    const scope = request.scope as RequestScope | null;
    const code = rpc === undefined ? undefined : aborted ? Code.CANCELLED : rpcCode(scope, status, reply);
    const rpcCodeName = code === undefined ? "" : (CODE_NAMES[code] ?? String(code));
    this.options.metrics.observeRequest(
      { protocol, method, route, status: String(status), rpc_code: rpcCodeName },
      ms / 1000,
    );
    const line = {
      instance: scope?.instanceId,
      caller: scope?.caller,
      protocol,
      method: request.method,
      route,
      url: this.options.redactUrl(request.url),
      host: scope?.host,
      status,
      rpcCode: rpcCodeName || undefined,
      durationMs: Math.round(ms * 100) / 100,
    };
    const level = PROBES.has(route) ? "debug" : "info";
    request.log[level](line, aborted ? "request aborted" : "request completed");
  }
}

/** gRPC, gRPC-web or Connect, by the request's content type (connect-node chooses the same way). */
function connectProtocol(request: FastifyRequest): Protocol {
  const type = String(request.headers["content-type"] ?? "");
  if (type.startsWith("application/grpc-web")) return "grpc_web";
  if (type.startsWith("application/grpc")) return "grpc";
  return "connect";
}

/**
 * The status code of an RPC: as the interceptor chain noted it, else (the call failed before it, e.g. an
 * unknown instance or an unreadable message) the `grpc-status` header of a trailers-only answer, else
 * the code of the HTTP status.
 */
function rpcCode(scope: RequestScope | null, status: number, reply: FastifyReply | undefined): number {
  if (scope?.rpcCode !== undefined) return scope.rpcCode;
  const header = reply?.getHeader("grpc-status") ?? reply?.raw.getHeader("grpc-status");
  if (header !== undefined && /^\d+$/.test(String(header))) return Number(header);
  return codeOfHttpStatus(status);
}

/** The gRPC code of an HTTP status, as grpc-gateway pairs them. */
function codeOfHttpStatus(status: number): number {
  if (status < 400) return Code.OK;
  switch (status) {
    case 401:
      return Code.UNAUTHENTICATED;
    case 403:
      return Code.PERMISSION_DENIED;
    case 404:
      return Code.NOT_FOUND;
    case 409:
      return Code.ABORTED;
    case 413:
    case 429:
      return Code.RESOURCE_EXHAUSTED;
    case 499:
      return Code.CANCELLED;
    case 501:
      return Code.UNIMPLEMENTED;
    case 503:
      return Code.UNAVAILABLE;
    case 504:
      return Code.DEADLINE_EXCEEDED;
    default:
      return status < 500 ? Code.INVALID_ARGUMENT : Code.INTERNAL;
  }
}
