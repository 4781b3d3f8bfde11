/**
 * The interceptor chain every RPC runs through, for every protocol (the connect router for gRPC, gRPC-web
 * and Connect; the REST transcoder builds the same chain around the implementation):
 *
 *   [tracing →] errorInterceptor → ...extra interceptors (e.g. auth) → validationInterceptor → ...inner
 *   interceptors (idempotency keys, then action executions: src/platform.ts) → implementation
 *
 * The tracing interceptor (a span per RPC, src/tracing/rpc.ts) is there only while tracing is on.
 */
import type { DescMessage } from "@bufbuild/protobuf";
import type { Interceptor } from "@connectrpc/connect";
import { Code } from "../errors.ts";
import { tracingInterceptor } from "../tracing/rpc.ts";
import { activeTracer } from "../tracing/tracing.ts";
import { loggerKey } from "./context.ts";
import { type RequestScope, scopeKey } from "./scope.ts";
import { toConnectError } from "./status.ts";
import { rejectNul, validate } from "./validate.ts";

/**
 * Maps whatever the rest of the chain throws to a ConnectError (see status.ts), logging unexpected errors,
 * and notes the call's status code in the request scope (the request log and metrics).
 */
export const errorInterceptor: Interceptor = (next) => async (req) => {
  const what = `rpc ${req.method.parent.typeName}/${req.method.name} failed`;
  const scope = req.contextValues.get(scopeKey);
  try {
    const res = await next(req);
    if (scope) scope.rpcCode = Code.OK;
    if (!res.stream) return res;
    const log = req.contextValues.get(loggerKey);
    return { ...res, message: mapStreamErrors(res.message, log, what, scope) };
  } catch (e) {
    const error = toConnectError(e, req.contextValues.get(loggerKey), what);
    if (scope) scope.rpcCode = error.code;
    throw error;
  }
};

async function* mapStreamErrors<T>(
  it: AsyncIterable<T>,
  log: Parameters<typeof toConnectError>[1],
  what: string,
  scope: RequestScope | undefined,
): AsyncIterable<T> {
  try {
    yield* it;
  } catch (e) {
    const error = toConnectError(e, log, what);
    if (scope) scope.rpcCode = error.code;
    throw error;
  }
}

/**
 * Validates every request message before the implementation (validate.ts): no string may contain NUL
 * (U+0000), then the declared rules.
 */
export const validationInterceptor: Interceptor = (next) => async (req) => {
  if (!req.stream) {
    validateRequest(req.method.input, req.message as never);
    return next(req);
  }
  return next({ ...req, message: validateStream(req.method.input, req.message) });
};

function validateRequest(schema: DescMessage, message: never): void {
  rejectNul(schema, message);
  validate(schema, message);
}

async function* validateStream<T>(schema: DescMessage, it: AsyncIterable<T>): AsyncIterable<T> {
  for await (const m of it) {
    validateRequest(schema, m as never);
    yield m;
  }
}

/**
 * The full chain for a list of extra interceptors (outermost first) and `inner` ones that run after
 * validation, right around the implementation (e.g. idempotency keys, which need a valid request).
 */
export function apiInterceptors(extra: Interceptor[] = [], inner: Interceptor[] = []): Interceptor[] {
  const tracer = activeTracer();
  // outermost, so that it sees the errors as the client gets them (mapped by errorInterceptor)
  const tracing = tracer ? [tracingInterceptor(tracer)] : [];
  return [...tracing, errorInterceptor, ...extra, validationInterceptor, ...inner];
}

/** Wraps `next` with interceptors, the first being the outermost (same order as connect's router). */
export function applyInterceptors<T>(next: T, interceptors: Interceptor[]): T {
  let fn = next as Parameters<Interceptor>[0];
  for (const i of [...interceptors].reverse()) fn = i(fn);
  return fn as T;
}
