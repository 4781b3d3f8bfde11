/**
 * The one mapping from thrown errors to API errors (docs/api.md "Errors"):
 * - `PlatformError` (src/errors.ts) keeps its gRPC code and message;
 * - `ConnectError` keeps its code and message;
 * - a database that cannot be reached (src/storage/availability.ts) is UNAVAILABLE "database unavailable",
 *   so clients and load balancers retry instead of giving up;
 * - anything else is INTERNAL "internal error", the real error only goes to the log, so stacks, SQL or
 *   driver messages never reach a client.
 * Connect protocols answer the resulting `ConnectError`; REST answers the rpcStatus JSON
 * `{"code": <gRPC code number>, "message": "...", "details": []}` with `httpStatusFor(code)`.
 * Every UNAVAILABLE answer carries `Retry-After: RETRY_AFTER_SECONDS` (an HTTP header for REST and Connect,
 * metadata for gRPC), and a RESOURCE_EXHAUSTED that knows when it ends (`retryAfterSeconds`) its seconds.
 */
import { Code as ConnectCode, ConnectError } from "@connectrpc/connect";
import type { FastifyBaseLogger } from "fastify";
import { Code, DatabaseFullError, httpStatusFor, PlatformError, ResourceExhaustedError } from "../errors.ts";
import { isConnectionFailure } from "../storage/availability.ts";

/** Seconds a client should wait before retrying an UNAVAILABLE answer (`Retry-After`). */
export const RETRY_AFTER_SECONDS = 5;

export interface RpcStatus {
  code: number;
  message: string;
  details: unknown[];
}

/** An rpcStatus answer: HTTP status, body and the headers that go with the code (Retry-After). */
export interface RpcStatusReply {
  httpStatus: number;
  body: RpcStatus;
  headers: Record<string, string>;
}

/** Headers an answer with this code carries: `Retry-After` for UNAVAILABLE. */
export function headersFor(code: number): Record<string, string> {
  return code === Code.UNAVAILABLE ? { "retry-after": String(RETRY_AFTER_SECONDS) } : {};
}

/** The headers of a PlatformError's answer: its code's, and the `Retry-After` of a limit that ends. */
function headersOf(err: PlatformError): Record<string, string> {
  const seconds = err instanceof ResourceExhaustedError ? err.retryAfterSeconds : undefined;
  return seconds === undefined
    ? headersFor(err.code)
    : { ...headersFor(err.code), "retry-after": String(Math.max(1, Math.ceil(seconds))) };
}

type ErrorLogger = Pick<FastifyBaseLogger, "error">;

/** Maps any thrown value to a ConnectError safe to send; unexpected errors are logged, not exposed. */
export function toConnectError(
  err: unknown,
  log: ErrorLogger | undefined,
  what = "request failed",
): ConnectError {
  if (err instanceof ConnectError) return err;
  if (err instanceof PlatformError) {
    if (
      err.code === Code.INTERNAL ||
      err.code === Code.UNKNOWN ||
      err.code === Code.DATA_LOSS ||
      err instanceof DatabaseFullError // the operator must free space
    ) {
      // deliberate, but may wrap a cause worth logging
      logError(log, err, what);
    }
    return new ConnectError(err.message, err.code as number as ConnectCode, headersOf(err), undefined, err);
  }
  logError(log, err, what);
  if (isConnectionFailure(err)) {
    return new ConnectError("database unavailable", ConnectCode.Unavailable, headersFor(Code.UNAVAILABLE));
  }
  return new ConnectError("internal error", ConnectCode.Internal);
}

/** The rpcStatus body and HTTP status of any thrown value. */
export function toRpcStatus(err: unknown, log: ErrorLogger | undefined, what?: string): RpcStatusReply {
  const ce = toConnectError(err, log, what);
  const status = rpcStatus(ce.code as number as Code, ce.rawMessage);
  // A PlatformError may answer another REST status than its code's (errors.ts), also once wrapped.
  const platformError = [err, ce.cause].find((e) => e instanceof PlatformError);
  return platformError
    ? { ...status, httpStatus: platformError.httpStatus, headers: headersOf(platformError) }
    : status;
}

/** An rpcStatus for a code and message (for transport-level failures such as unknown REST paths). */
export function rpcStatus(code: Code, message: string): RpcStatusReply {
  return { httpStatus: httpStatusFor(code), body: { code, message, details: [] }, headers: headersFor(code) };
}

/** The message of an oversized request body or message, naming the limit. */
export function bodyTooLargeMessage(limitBytes: number): string {
  return `request body is larger than the limit of ${limitBytes} bytes`;
}

/**
 * An oversized request body: HTTP 413 (not the 429 of RESOURCE_EXHAUSTED, which clients and proxies read
 * as "retry later"), with the code gRPC clients get for the same request, RESOURCE_EXHAUSTED.
 */
export function bodyTooLarge(limitBytes: number): RpcStatusReply {
  return { ...rpcStatus(Code.RESOURCE_EXHAUSTED, bodyTooLargeMessage(limitBytes)), httpStatus: 413 };
}

/** A request body in a media type the endpoint does not accept: HTTP 415, INVALID_ARGUMENT. */
export function unsupportedMediaType(message: string): RpcStatusReply {
  return { ...rpcStatus(Code.INVALID_ARGUMENT, message), httpStatus: 415 };
}

function logError(log: ErrorLogger | undefined, err: unknown, what: string): void {
  if (log) log.error({ err }, what);
  else console.error(what, err);
}
