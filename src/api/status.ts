/**
 * The one mapping from thrown errors to API errors (contract.md §1 "Errors"):
 * - `PlatformError` (src/errors.ts) keeps its gRPC code and message;
 * - `ConnectError` keeps its code and message;
 * - anything else is INTERNAL "internal error", the real error only goes to the log, so stacks, SQL or
 *   driver messages never reach a client.
 * Connect protocols answer the resulting `ConnectError`; REST answers the rpcStatus JSON
 * `{"code": <gRPC code number>, "message": "...", "details": []}` with `httpStatusFor(code)`.
 */
import { Code as ConnectCode, ConnectError } from "@connectrpc/connect";
import type { FastifyBaseLogger } from "fastify";
import { Code, httpStatusFor, PlatformError } from "../errors.ts";

export interface RpcStatus {
  code: number;
  message: string;
  details: unknown[];
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
    if (err.code === Code.INTERNAL || err.code === Code.UNKNOWN || err.code === Code.DATA_LOSS) {
      // deliberate, but may wrap a cause worth logging
      logError(log, err, what);
    }
    return new ConnectError(err.message, err.code as number as ConnectCode, undefined, undefined, err);
  }
  logError(log, err, what);
  return new ConnectError("internal error", ConnectCode.Internal);
}

/** The rpcStatus body and HTTP status of any thrown value. */
export function toRpcStatus(
  err: unknown,
  log: ErrorLogger | undefined,
  what?: string,
): { httpStatus: number; body: RpcStatus } {
  const ce = toConnectError(err, log, what);
  const code = ce.code as number;
  // A PlatformError may answer another REST status than its code's (errors.ts), also once wrapped.
  const platformError = [err, ce.cause].find((e) => e instanceof PlatformError);
  const httpStatus = platformError?.httpStatus ?? httpStatusFor(code);
  return { httpStatus, body: { code, message: ce.rawMessage, details: [] } };
}

/** An rpcStatus for a code and message (for transport-level failures such as unknown REST paths). */
export function rpcStatus(code: Code, message: string): { httpStatus: number; body: RpcStatus } {
  return { httpStatus: httpStatusFor(code), body: { code, message, details: [] } };
}

function logError(log: ErrorLogger | undefined, err: unknown, what: string): void {
  if (log) log.error({ err }, what);
  else console.error(what, err);
}
