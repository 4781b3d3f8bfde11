/**
 * Context values every RPC implementation receives through `HandlerContext.values`, whatever the protocol
 * (gRPC, gRPC-web, Connect or REST), and the HTTP status override for REST.
 */
import type { Message } from "@bufbuild/protobuf";
import {
  type ContextValues,
  createContextKey,
  createContextValues,
  type HandlerContext,
} from "@connectrpc/connect";
import type { FastifyBaseLogger, FastifyRequest } from "fastify";
import { type RequestScope, scopeKey } from "./scope.ts";

/** The request's logger (Fastify's `request.log`, carries the request id). */
export const loggerKey = createContextKey<FastifyBaseLogger | undefined>(undefined, {
  description: "platform request logger",
});

/**
 * HTTP status a REST response should answer with instead of the default (200, or 201 for `Create*`
 * RPCs). Set it with `setHttpStatus`; the connect protocols ignore it.
 */
export const httpStatusKey = createContextKey<number | undefined>(undefined, {
  description: "platform REST status override",
});

/**
 * Lets an implementation choose the HTTP status of a successful REST response, e.g. PutExecution:
 * `setHttpStatus(ctx, created ? 201 : 200)`. It is stored in the call's context values (not in a
 * response header, so nothing leaks to gRPC clients) and read by the REST transcoder after the
 * implementation returns. gRPC, gRPC-web and Connect have no per-RPC HTTP status and ignore it.
 */
export function setHttpStatus(ctx: Pick<HandlerContext, "values">, status: number): void {
  if (!Number.isInteger(status) || status < 200 || status > 299) {
    throw new RangeError(`setHttpStatus: ${status} is not a success status`);
  }
  ctx.values.set(httpStatusKey, status);
}

/**
 * A response an interceptor answers the call with instead of the implementation's (e.g. a replayed answer,
 * src/api/idempotency.ts): set it and call `next`; registerApi then skips the implementation and returns
 * this message, so the response still goes out with the headers each protocol sets (content type etc.).
 */
export const cannedResponseKey = createContextKey<Message | undefined>(undefined, {
  description: "platform response given instead of the implementation's",
});

/** The request scope the server decorated the Fastify request with (`request.scope`), if any. */
export function scopeOf(req: FastifyRequest): RequestScope | undefined {
  return (req as FastifyRequest & { scope?: RequestScope }).scope;
}

/**
 * Fresh context values for one call: `scopeKey` (the RequestScope of `request.scope`) and `loggerKey`.
 * `extend` may add more (e.g. the server's own keys).
 */
export function createCallContextValues(
  req: FastifyRequest,
  extend?: (req: FastifyRequest, values: ContextValues) => void,
): ContextValues {
  const values = createContextValues().set(scopeKey, scopeOf(req)).set(loggerKey, req.log);
  extend?.(req, values);
  return values;
}
