/**
 * A CLIENT span per outbound HTTP request (action targets, identity providers, domain validation: every
 * one goes through src/net/http.ts), and the W3C `traceparent` (with `tracestate`) sent with it, so that
 * a target or provider that traces continues the same trace.
 */
import { context, propagation, SpanKind, SpanStatusCode, type Tracer, trace } from "@opentelemetry/api";

export interface OutboundAnswer {
  status: number;
}

/**
 * Runs `send` in a span for `method` `url`; `send` gets the trace headers to add to the request. A
 * rejection is the call's failure: its `kind` (timeout, unreachable, denied ...) becomes `error.type`.
 */
export function tracedOutbound<A extends OutboundAnswer>(
  tracer: Tracer,
  method: string,
  url: URL,
  send: (traceHeaders: Record<string, string>) => Promise<A>,
): Promise<A> {
  const port = url.port ? Number(url.port) : url.protocol === "https:" ? 443 : 80;
  const span = tracer.startSpan(method, {
    kind: SpanKind.CLIENT,
    attributes: {
      "http.request.method": method,
      "server.address": url.hostname,
      "server.port": port,
      // without the query and credentials, which may be secrets
      "url.full": `${url.protocol}//${url.host}${url.pathname}`,
    },
  });
  const traceHeaders: Record<string, string> = {};
  propagation.inject(trace.setSpan(context.active(), span), traceHeaders);
  return send(traceHeaders).then(
    (answer) => {
      span.setAttribute("http.response.status_code", answer.status);
      if (answer.status >= 400) {
        span.setAttribute("error.type", String(answer.status));
        span.setStatus({ code: SpanStatusCode.ERROR });
      }
      span.end();
      return answer;
    },
    (error: unknown) => {
      const kind = (error as { kind?: unknown } | null)?.kind;
      span.setAttribute("error.type", typeof kind === "string" ? kind : "unreachable");
      span.setStatus({ code: SpanStatusCode.ERROR, message: (error as Error)?.message });
      span.end();
      throw error;
    },
  );
}
