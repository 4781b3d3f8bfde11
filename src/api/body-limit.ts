/**
 * The request size limit of the connect protocols. connect enforces `readMaxBytes` itself and raises
 * RESOURCE_EXHAUSTED, which is the gRPC convention (gRPC and gRPC-web clients get it as is, the message
 * naming the limit). The Connect protocol, though, sends RESOURCE_EXHAUSTED as HTTP 429, which clients and
 * proxies read as "retry later"; the same request will never fit. So a Connect unary answer of that
 * error becomes HTTP 413 with the message REST uses (`request body is larger than the limit of N bytes`),
 * the body staying a Connect error (`{"code": "resource_exhausted", ...}`) that Connect clients decode.
 */
import type { UniversalHandler, UniversalServerResponse } from "@connectrpc/connect/protocol";
import { bodyTooLargeMessage } from "./status.ts";

/** connect's messages for a request over readMaxBytes (before or after decompression). */
const READ_MAX_BYTES_EXCEEDED = /larger than configured readMaxBytes/;

/** Replaces each handler in place with one answering 413 to an oversized Connect unary request. */
export function answerOversizedConnectRequestsWith413(
  handlers: UniversalHandler[],
  limitBytes: number,
): void {
  for (const [i, handler] of handlers.entries()) {
    const limited = async (req: Parameters<UniversalHandler>[0]): Promise<UniversalServerResponse> => {
      const res = await handler(req);
      return res.status === 429 ? rewriteIfOversized(res, limitBytes) : res;
    };
    handlers[i] = Object.assign(limited, handler);
  }
}

/** A Connect unary error answer (JSON, 429) about readMaxBytes becomes 413; anything else is unchanged. */
async function rewriteIfOversized(
  res: UniversalServerResponse,
  limitBytes: number,
): Promise<UniversalServerResponse> {
  const header = res.header ?? new Headers();
  if (!header.get("content-type")?.startsWith("application/json") || header.has("content-encoding"))
    return res;
  const chunks: Uint8Array[] = [];
  for await (const chunk of res.body ?? []) chunks.push(chunk);
  const text = Buffer.concat(chunks).toString("utf8");
  let error: { code?: unknown; message?: unknown } | undefined;
  try {
    error = JSON.parse(text);
  } catch {
    // not an error body: answer it unchanged
  }
  const oversized =
    error?.code === "resource_exhausted" &&
    typeof error.message === "string" &&
    READ_MAX_BYTES_EXCEEDED.test(error.message);
  const body = oversized
    ? new TextEncoder().encode(
        JSON.stringify({ code: "resource_exhausted", message: bodyTooLargeMessage(limitBytes) }),
      )
    : new TextEncoder().encode(text);
  header.set("content-length", String(body.byteLength));
  return { ...res, status: oversized ? 413 : res.status, header, body: once(body) };
}

async function* once(body: Uint8Array): AsyncIterable<Uint8Array> {
  yield body;
}
