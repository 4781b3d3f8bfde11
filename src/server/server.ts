import { randomUUID } from "node:crypto";
import Fastify, {
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  type FastifyServerFactory,
} from "fastify";
import type { DestinationStream } from "pino";
import type { RequestScope } from "../api/scope.ts";
import { bodyTooLarge, headersFor, type RpcStatusReply, toRpcStatus } from "../api/status.ts";
import type { Config } from "../config.ts";
import { Code, PlatformError } from "../errors.ts";
import { METRICS_PATH, registerMetricsRoute } from "../metrics/endpoint.ts";
import type { Metrics } from "../metrics/metrics.ts";
import type { InstanceDirectory } from "../query/instances.ts";
import type { Database } from "../storage/database.ts";
import { inArrivalOrder } from "../storage/fair-queue.ts";
import { migrationsComplete } from "../storage/migrate.ts";
import { annotateRequestSpan, nameRequestSpan, tracingHandler } from "../tracing/http-server.ts";
import { activeTracer } from "../tracing/tracing.ts";
import { createListener, type DualProtocolServer } from "./listener.ts";
import { logStream } from "./log.ts";
import { RequestObserver } from "./requests.ts";

declare module "fastify" {
  interface FastifyRequest {
    scope: RequestScope;
  }
}

/** The longest `/ready` waits for the database before it answers 503 "database not answering". */
const READY_CHECK_MS = 2000;

export interface ServerDeps {
  config: Config;
  db: Database;
  instances: InstanceDirectory;
  metrics: Metrics;
  /** Where log lines go instead of stdout (tests read them). */
  logDestination?: DestinationStream;
}

/**
 * Paths served whatever the Host header says (probes of orchestrators and scrapers use IPs or pod names)
 * and whether or not the instance is blocked. gRPC server reflection (src/api/reflection.ts) describes the
 * same public schema for every instance, so `grpcurl -plaintext 127.0.0.1:8080 list` works too.
 */
const HOSTLESS_PATHS = new Set([
  "/healthz",
  "/ready",
  METRICS_PATH,
  "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
  "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
]);

/** The instances API (system users) stays reachable on a blocked instance's domains: it unblocks them. */
const BLOCK_EXEMPT_PREFIXES = [
  "/resources/v3alpha/instances",
  "/platform.resources.instance.v3alpha.PlatformInstances/",
];

const BLOCKED_MESSAGE = "the instance is blocked";

const BLOCKED_PAGE = `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Instance blocked</title></head>
<body style="font-family: sans-serif; max-width: 40rem; margin: 4rem auto; padding: 0 1rem">
<h1>This instance is blocked</h1>
<p>The instance you are trying to reach has been blocked by its operator. Please contact your
administrator.</p>
</body>
</html>
`;

/**
 * A blocked instance answers RESOURCE_EXHAUSTED: 429 with an rpcStatus body to API calls, a
 * trailers-only gRPC status to gRPC clients and a small HTML page to browsers.
 */
function sendBlocked(headers: Record<string, string | string[] | undefined>, reply: FastifyReply) {
  if (isGrpc(headers)) return sendGrpcStatus(headers, reply, Code.RESOURCE_EXHAUSTED, BLOCKED_MESSAGE);
  if (String(headers.accept ?? "").includes("text/html")) {
    return reply.code(429).type("text/html; charset=utf-8").send(BLOCKED_PAGE);
  }
  return reply.code(429).send({ code: Code.RESOURCE_EXHAUSTED, message: BLOCKED_MESSAGE, details: [] });
}

function isGrpc(headers: Record<string, string | string[] | undefined>): boolean {
  return String(headers["content-type"] ?? "").startsWith("application/grpc");
}

/** A trailers-only gRPC (or gRPC-web) answer: HTTP 200 with grpc-status and grpc-message, no message. */
function sendGrpcStatus(
  headers: Record<string, string | string[] | undefined>,
  reply: FastifyReply,
  code: Code,
  message: string,
) {
  const contentType = String(headers["content-type"] ?? "");
  return reply
    .code(200)
    .header("content-type", contentType.startsWith("application/grpc-web") ? contentType : "application/grpc")
    .header("grpc-status", String(code))
    .header("grpc-message", encodeURIComponent(message))
    .send();
}

/**
 * An error answer in the caller's protocol: a trailers-only gRPC status to gRPC and gRPC-web clients (as
 * `sendBlocked`), the rpcStatus JSON with its headers (e.g. Retry-After) to everyone else.
 */
function sendRpcStatus(
  headers: Record<string, string | string[] | undefined>,
  reply: FastifyReply,
  status: RpcStatusReply,
) {
  const contentType = String(headers["content-type"] ?? "");
  reply.headers(status.headers);
  if (contentType.startsWith("application/grpc")) {
    return reply
      .code(200)
      .header(
        "content-type",
        contentType.startsWith("application/grpc-web") ? contentType : "application/grpc",
      )
      .header("grpc-status", String(status.body.code))
      .header("grpc-message", encodeURIComponent(status.body.message))
      .send();
  }
  return reply.code(status.httpStatus).send(status.body);
}

/** Characters no host name contains. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point
const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f]/;

/**
 * The Fastify app: one port for HTTP/1.1 and h2c, request IDs, structured logs without secrets, health
 * probes, instance resolution from the Host header and security headers on HTML; a span per request while
 * tracing is on (src/tracing/http-server.ts). Feature plugins (API, OIDC, login UI) register on the
 * returned instance.
 */
export function buildServer({ config, db, instances, metrics, logDestination }: ServerDeps): FastifyInstance {
  const tracer = activeTracer();
  // Each request draws its arrival ticket: the embedded database serves its work in that order
  // (src/storage/fair-queue.ts).
  const serverFactory: FastifyServerFactory = (handler) =>
    createListener(inArrivalOrder(tracer ? tracingHandler(tracer, handler as never) : handler) as never, {
      tls: config.tls,
      limits: config.connections,
      graceMs: config.shutdownGraceSeconds * 1000,
      // Called later, once `app` exists.
      warn: (message) => app.log.warn(message),
    }) as never;
  const observer = new RequestObserver({ metrics, redactUrl: redactQuery });
  const app = Fastify({
    serverFactory,
    logger: {
      level: config.logLevel,
      stream: logDestination ?? logStream(config.logFormat),
      redact: {
        paths: ["req.headers.authorization", "req.headers.cookie", "res.headers['set-cookie']"],
        censor: "[redacted]",
      },
      serializers: {
        req: (request: FastifyRequest) => ({
          method: request.method,
          url: redactQuery(request.url),
          host: String(request.headers?.host ?? request.headers?.[":authority"] ?? ""),
        }),
      },
    },
    // Errors of the router itself (a malformed percent-encoding in the path, ...) answer rpcStatus too.
    frameworkErrors: (error, _request, reply) => {
      const message =
        error.code === "FST_ERR_BAD_URL" ? "malformed URL: invalid percent-encoding" : error.message;
      (reply as FastifyReply).code(400).send({ code: Code.INVALID_ARGUMENT, message, details: [] });
    },
    // One line per request instead of Fastify's two, with what a person needs, and its metrics.
    logController: observer,
    requestIdHeader: "x-request-id",
    genReqId: () => randomUUID(),
    // A request of a connection accepted before the stop is served (with `Connection: close`) within the
    // grace period, not refused: the listener decides what is accepted (src/server/listener.ts).
    return503OnClosing: false,
    trustProxy: config.trustProxy,
    // REST bodies; connect-protocol messages have the same limit as readMaxBytes (src/api/register.ts).
    bodyLimit: config.maxRequestBodyBytes,
    // IDs are up to 200 characters; percent-encoded execution IDs (`request.%2Fplatform...`) are longer.
    routerOptions: { maxParamLength: 1000 },
  });

  app.decorateRequest("scope", null as unknown as RequestScope);
  observer.register(app);

  if (tracer) {
    // before the instance is resolved, so that requests it answers (404, blocked) are named too
    app.addHook("onRequest", nameRequestSpan);
    app.addHook("onResponse", annotateRequestSpan);
  }

  app.addHook("onRequest", async (request, reply) => {
    reply.header("x-request-id", request.id);
    const path = request.url.split("?", 1)[0];
    const host = requestHost(request.headers, config.trustProxy);
    request.scope = { requestId: request.id, host, authorization: request.headers.authorization };
    if (HOSTLESS_PATHS.has(path)) return;
    // No domain contains control characters (PostgreSQL refuses NUL in text): not found, without a lookup.
    const instance = CONTROL_CHARACTERS.test(host) ? undefined : await instances.byHost(host);
    if (!instance) {
      // gRPC clients read the status from grpc-status, not from the HTTP status.
      if (isGrpc(request.headers))
        return sendGrpcStatus(request.headers, reply, Code.NOT_FOUND, "instance not found");
      return reply.code(404).send({ code: 5, message: "instance not found", details: [] });
    }
    request.scope.instanceId = instance.id;
    if (instance.blocked && !BLOCK_EXEMPT_PREFIXES.some((prefix) => path.startsWith(prefix))) {
      return sendBlocked(request.headers, reply);
    }
  });

  app.addHook("onSend", async (request, reply, payload) => {
    reply.header("x-content-type-options", "nosniff");
    const type = String(reply.getHeader("content-type") ?? "");
    if (type.startsWith("text/html")) {
      // A page may set a stricter policy of its own (the login UI's pages do).
      if (!reply.hasHeader("content-security-policy"))
        reply.header(
          "content-security-policy",
          "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'; form-action 'self' https: http:; base-uri 'none'",
        );
      reply.header("x-frame-options", "DENY");
      reply.header("referrer-policy", "no-referrer");
      reply.header("cache-control", "no-store");
    }
    if ((app.server as unknown as DualProtocolServer).closing && request.raw.httpVersionMajor === 1) {
      reply.header("connection", "close");
    }
    return payload;
  });

  app.setErrorHandler((error, request, reply) => {
    if (error instanceof PlatformError) {
      return reply
        .code(error.httpStatus)
        .headers(headersFor(error.code))
        .send({ code: error.code, message: error.message, details: [] });
    }
    const status = (error as { statusCode?: number }).statusCode;
    if (status === 413)
      return sendRpcStatus(request.headers, reply, bodyTooLarge(config.maxRequestBodyBytes));
    if (status && status >= 400 && status < 500) {
      return reply
        .code(status)
        .send({ code: status === 404 ? 5 : 3, message: (error as Error).message, details: [] });
    }
    // INTERNAL, or UNAVAILABLE with Retry-After when the database cannot be reached (api/status.ts)
    return sendRpcStatus(request.headers, reply, toRpcStatus(error, request.log, "request failed"));
  });

  // Unknown routes answer like every other error: rpcStatus NOT_FOUND naming the method and path (without
  // the query, which may hold secrets), or UNIMPLEMENTED to gRPC clients, their status for an unknown method.
  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split("?", 1)[0].slice(0, 200);
    if (isGrpc(request.headers))
      return sendGrpcStatus(request.headers, reply, Code.UNIMPLEMENTED, `unknown method ${path}`);
    const message = `no such route: ${request.method} ${path}`;
    return reply.code(404).send({ code: Code.NOT_FOUND, message, details: [] });
  });

  app.get("/healthz", async () => ({ status: "ok" }));

  let migrated = false;
  app.get("/ready", async (_request, reply) => {
    // A probe answers within its own bound, however long the database takes: a load balancer's check
    // usually gives up after 2–5 s, and a late "ready" is no answer to it.
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<"late">((resolve) => {
      timer = setTimeout(() => resolve("late"), READY_CHECK_MS);
    });
    try {
      const checked = (async () => {
        await db.query("SELECT 1");
        migrated ||= await migrationsComplete(db);
      })();
      checked.catch(() => {});
      if ((await Promise.race([checked, late])) === "late")
        return reply.code(503).send({ status: "unavailable", reason: "database not answering" });
    } catch {
      return reply.code(503).send({ status: "unavailable", reason: "database unreachable" });
    } finally {
      clearTimeout(timer);
    }
    if (!migrated) return reply.code(503).send({ status: "unavailable", reason: "migrations pending" });
    // e.g. the embedded database's disk is full: reads are served, changes refused (507)
    const storageProblem = db.storageProblem?.();
    if (storageProblem) return reply.code(503).send({ status: "unavailable", reason: storageProblem });
    return { status: "ready" };
  });

  registerMetricsRoute(app, metrics, config.metrics);

  return app;
}

/** Query parameters whose values are secrets: never logged. */
const SECRET_PARAMS =
  /^(session_token|token|code|code_verifier|client_secret|refresh_token|id_token_hint|assertion|client_assertion|password|subject_token|actor_token)$/i;

/** A URL for the logs: values of secret query parameters replaced. */
export function redactQuery(url: string): string {
  const q = url.indexOf("?");
  if (q < 0) return url;
  const params = new URLSearchParams(url.slice(q + 1));
  for (const key of new Set(params.keys())) if (SECRET_PARAMS.test(key)) params.set(key, "[redacted]");
  return `${url.slice(0, q)}?${params.toString().replaceAll("%5Bredacted%5D", "[redacted]")}`;
}

/** The host a request addressed: Host (HTTP/1.1), :authority (HTTP/2), X-Forwarded-Host behind a trusted proxy. */
export function requestHost(
  headers: Record<string, string | string[] | undefined>,
  trustProxy: boolean,
): string {
  const first = (value: string | string[] | undefined) =>
    (Array.isArray(value) ? value[0] : value)?.split(",")[0]?.trim();
  return (
    (trustProxy ? first(headers["x-forwarded-host"]) : undefined) ??
    first(headers[":authority"]) ??
    first(headers.host) ??
    ""
  );
}
