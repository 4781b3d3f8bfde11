/**
 * A SERVER span per HTTP request (HTTP/1.1 and HTTP/2, every protocol on the port), continuing the
 * caller's trace when the request carries a W3C `traceparent`. The span is started around the request
 * handler, not in a Fastify hook: a hook cannot make a context current for the phases after it, while
 * running the handler inside the context and binding the request's event listeners to it (as
 * OpenTelemetry's own HTTP instrumentation does) makes every span of the request (RPC, database, outbound
 * calls) its child, also after the body has been read.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import {
  context,
  propagation,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  type Tracer,
  trace,
} from "@opentelemetry/api";
import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from "fastify";

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

/** The span of each request being served (for the Fastify hooks, which get the raw request). */
const requestSpans = new WeakMap<IncomingMessage, Span>();

/** Methods named as they are; anything else is `_OTHER`, so a client cannot multiply span names. */
const KNOWN_METHODS = new Set([
  "GET",
  "HEAD",
  "POST",
  "PUT",
  "DELETE",
  "CONNECT",
  "OPTIONS",
  "TRACE",
  "PATCH",
]);

/** The request handler of the listener, each request in a span of its own. */
export function tracingHandler(tracer: Tracer, handler: Handler): Handler {
  return (req, res) => {
    const known = KNOWN_METHODS.has(req.method ?? "");
    const method = known ? (req.method as string) : "_OTHER";
    const parent = propagation.extract(ROOT_CONTEXT, req.headers);
    const userAgent = req.headers["user-agent"];
    const span = tracer.startSpan(
      known ? method : "HTTP",
      {
        kind: SpanKind.SERVER,
        attributes: {
          "http.request.method": method,
          "url.path": (req.url ?? "/").split("?", 1)[0], // never the query: it may hold codes and tokens
          "url.scheme": (req.socket as { encrypted?: boolean } | undefined)?.encrypted ? "https" : "http",
          "network.protocol.version": req.httpVersion,
          ...(req.socket?.remoteAddress ? { "client.address": req.socket.remoteAddress } : {}),
          ...(typeof userAgent === "string" ? { "user_agent.original": userAgent } : {}),
        },
      },
      parent,
    );
    const active = trace.setSpan(parent, span);
    // The request's listeners (its body) run in the request's context; the response's need none.
    context.bind(active, req);
    requestSpans.set(req, span);
    res.once("close", () => {
      const status = res.statusCode;
      span.setAttribute("http.response.status_code", status);
      if (status >= 500) {
        span.setAttribute("error.type", String(status));
        span.setStatus({ code: SpanStatusCode.ERROR });
      }
      span.end();
    });
    context.with(active, handler, undefined, req, res);
  };
}

/**
 * Fastify `onRequest` hook: names the request's span after its route template (`POST /oauth/v2/token`,
 * `GET /resources/v3alpha/users/{id}` as the API reference writes REST routes), never after the raw
 * path with its IDs.
 */
export function nameRequestSpan(
  request: FastifyRequest,
  _reply: FastifyReply,
  done: HookHandlerDoneFunction,
) {
  const route = request.routeOptions.config?.httpRoute ?? request.routeOptions.url;
  const span = requestSpans.get(request.raw);
  if (span && route) {
    span.updateName(`${KNOWN_METHODS.has(request.method) ? request.method : "HTTP"} ${route}`);
    span.setAttribute("http.route", route);
  }
  done();
}

/** Fastify `onResponse` hook: the request ID (as in the logs) and the instance served. */
export function annotateRequestSpan(
  request: FastifyRequest,
  _reply: FastifyReply,
  done: HookHandlerDoneFunction,
) {
  const span = requestSpans.get(request.raw);
  if (span) {
    span.setAttribute("platform.request_id", request.id);
    if (request.scope?.instanceId) span.setAttribute("platform.instance_id", request.scope.instanceId);
  }
  done();
}
