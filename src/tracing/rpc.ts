/**
 * A span per RPC, for every protocol (gRPC, gRPC-web, Connect and REST run the same interceptor chain,
 * src/api/interceptors.ts), named `<service>/<method>` and a child of the request's HTTP span. It is an
 * INTERNAL span: the request already has its SERVER span, and one per request keeps service graphs right.
 */
import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { type Span, SpanKind, SpanStatusCode, type Tracer } from "@opentelemetry/api";

/** Codes that mean the server failed (the OpenTelemetry RPC conventions); the others are the caller's. */
const SERVER_ERRORS = new Set([
  Code.Unknown,
  Code.DeadlineExceeded,
  Code.Unimplemented,
  Code.Internal,
  Code.Unavailable,
  Code.DataLoss,
]);

/** The outermost interceptor of the chain while tracing is on. */
export function tracingInterceptor(tracer: Tracer): Interceptor {
  return (next) => (req) => {
    const service = req.method.parent.typeName;
    const method = req.method.name;
    const path = `/${service}/${method}`;
    const contentType = req.header.get("content-type") ?? "";
    const protocol = !req.url.includes(path)
      ? "rest"
      : contentType.startsWith("application/grpc-web")
        ? "grpc-web"
        : contentType.startsWith("application/grpc")
          ? "grpc"
          : "connect";
    return tracer.startActiveSpan(
      `${service}/${method}`,
      {
        kind: SpanKind.INTERNAL,
        attributes: {
          "rpc.system": "connect_rpc",
          "rpc.service": service,
          "rpc.method": method,
          "platform.api.protocol": protocol,
        },
      },
      async (span) => {
        try {
          const res = await next(req);
          if (!res.stream) {
            span.end();
            return res;
          }
          return { ...res, message: endWithStream(res.message, span) };
        } catch (error) {
          fail(span, error);
          span.end();
          throw error;
        }
      },
    );
  };
}

async function* endWithStream<T>(messages: AsyncIterable<T>, span: Span): AsyncIterable<T> {
  try {
    yield* messages;
  } catch (error) {
    fail(span, error);
    throw error;
  } finally {
    span.end();
  }
}

function fail(span: Span, error: unknown): void {
  const code = ConnectError.from(error).code;
  // rpc.connect_rpc.error_code takes the snake_case names: not_found, invalid_argument ...
  span.setAttribute(
    "rpc.connect_rpc.error_code",
    Code[code].replace(/[A-Z]/g, (c, i) => (i ? "_" : "") + c.toLowerCase()),
  );
  if (SERVER_ERRORS.has(code)) span.setStatus({ code: SpanStatusCode.ERROR, message: Code[code] });
}
