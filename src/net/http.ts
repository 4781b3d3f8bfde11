/**
 * One outbound HTTP request (action targets, identity providers, domain validation): cancelled after a
 * timeout, with the answer's body read up to a size limit, under an outbound-address guard
 * (./outbound.ts): the host is checked before the request and resolved by the guard's lookup, so the
 * connection goes to exactly the addresses that were checked (the URL's host still goes out as `Host` and
 * as TLS SNI) and a DNS answer that changes between a check and the connection cannot reach a refused
 * address. Redirects are never followed (a 3xx is an answer like any other; its `Location` is not
 * requested). Connections are kept alive between calls, in agents of this caller only: a socket opened
 * under one guard is never reused under another. While tracing is on, each request is a span and carries
 * the W3C `traceparent` (src/tracing/outbound.ts).
 */
import http from "node:http";
import https from "node:https";
import { tracedOutbound } from "../tracing/outbound.ts";
import { activeTracer } from "../tracing/tracing.ts";
import type { OutboundGuard } from "./outbound.ts";

/** Why a call did not get an answer. */
export type CallFailureKind = "timeout" | "unreachable" | "denied" | "too_large" | "cancelled";

export class CallFailure extends Error {
  constructor(
    readonly kind: CallFailureKind,
    message: string,
  ) {
    super(message);
    this.name = "CallFailure";
  }
}

export interface CallAnswer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
  /** The address the answer came from (undefined when the socket does not say). */
  remoteAddress?: string;
}

export interface HttpCallerOptions {
  /** Where the calls may go: the guard of the level that configured them. */
  guard: OutboundGuard;
  /** Largest answer body read; a larger answer is a failure ("too_large"). */
  maxResponseBytes: number;
  /** `User-Agent` of the calls (default `Platform-Execution/1`). */
  userAgent?: string;
  /** Keep connections open between calls (default true; false for rare calls of a caller never closed). */
  keepAlive?: boolean;
}

const USER_AGENT = "Platform-Execution/1";

/** Makes the calls of one guard; one per process and use (it holds the keep-alive connections). */
export class HttpCaller {
  private readonly httpAgent: http.Agent;
  private readonly httpsAgent: https.Agent;

  constructor(private readonly options: HttpCallerOptions) {
    // Idle connections are closed after 4 s, before the 5 s keep-alive timeout of common servers (Node's
    // included), so a call rarely lands on a connection the target is closing.
    const agentOptions = {
      keepAlive: options.keepAlive ?? true,
      maxSockets: 64,
      timeout: 4_000,
      scheduling: "lifo" as const,
    };
    this.httpAgent = new http.Agent(agentOptions);
    this.httpsAgent = new https.Agent(agentOptions);
  }

  /** Closes the kept-alive connections. */
  close(): void {
    this.httpAgent.destroy();
    this.httpsAgent.destroy();
  }

  /**
   * POSTs the JSON `body` to `url`. Resolves with any answer (the caller judges its status); rejects with a
   * CallFailure when there is none in time, the address is refused, or the answer is too large.
   */
  post(
    url: string,
    body: string,
    headers: Record<string, string>,
    timeoutMs: number,
    signal?: AbortSignal,
  ): Promise<CallAnswer> {
    return this.send(
      "POST",
      url,
      body,
      { "content-type": "application/json", ...headers },
      timeoutMs,
      signal,
    );
  }

  /** Any request, under the same rules as `post` (the guard, timeout, size limit, no redirects followed). */
  send(
    method: string,
    url: string,
    body: string | undefined,
    headers: Record<string, string>,
    timeoutMs: number,
    signal?: AbortSignal,
  ): Promise<CallAnswer> {
    let target: URL;
    try {
      target = new URL(url);
    } catch {
      return Promise.reject(new CallFailure("unreachable", "its URL cannot be parsed"));
    }
    if (target.protocol !== "http:" && target.protocol !== "https:")
      return Promise.reject(new CallFailure("unreachable", `its URL is not http(s) but ${target.protocol}`));
    const tracer = activeTracer();
    if (!tracer) return this.request(method, target, body, headers, timeoutMs, signal);
    return tracedOutbound(tracer, method, target, (traceHeaders) =>
      this.request(method, target, body, { ...headers, ...traceHeaders }, timeoutMs, signal),
    );
  }

  private request(
    method: string,
    target: URL,
    body: string | undefined,
    headers: Record<string, string>,
    timeoutMs: number,
    signal?: AbortSignal,
  ): Promise<CallAnswer> {
    const { guard, maxResponseBytes } = this.options;
    const refusal = guard.refusalOfHost(target.hostname);
    if (refusal) return Promise.reject(new CallFailure("denied", refusal));
    const secure = target.protocol === "https:";

    if (signal?.aborted) return Promise.reject(new CallFailure("cancelled", "cancelled"));
    return new Promise<CallAnswer>((resolve, reject) => {
      let settled = false;
      const fail = (failure: CallFailure) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
        request.destroy();
        reject(failure);
      };
      const request = (secure ? https : http).request(target, {
        method,
        agent: secure ? this.httpsAgent : this.httpAgent,
        // Node looks up names only: IP literals were checked above.
        lookup: guard.lookup,
        headers: {
          ...(body === undefined ? {} : { "content-length": String(Buffer.byteLength(body)) }),
          "user-agent": this.options.userAgent ?? USER_AGENT,
          ...headers,
        },
      });
      const timer = setTimeout(
        () => fail(new CallFailure("timeout", `timed out after ${formatMs(timeoutMs)}`)),
        timeoutMs,
      );
      const onAbort = () => fail(new CallFailure("cancelled", "cancelled"));
      signal?.addEventListener("abort", onAbort, { once: true });
      request.on("error", (error: NodeJS.ErrnoException) => {
        if (error.code === "EOUTBOUNDREFUSED") fail(new CallFailure("denied", error.message));
        else fail(new CallFailure("unreachable", `could not be reached (${error.code ?? error.message})`));
      });
      request.on("response", (response) => {
        // read now: by the end of the answer the socket may be handed back or closed
        const remoteAddress = response.socket?.remoteAddress;
        const chunks: Buffer[] = [];
        let size = 0;
        const declared = Number(response.headers["content-length"]);
        if (declared > maxResponseBytes) {
          fail(new CallFailure("too_large", `answered more than ${maxResponseBytes} bytes`));
          return;
        }
        response.on("data", (chunk: Buffer) => {
          size += chunk.length;
          if (size > maxResponseBytes) {
            fail(new CallFailure("too_large", `answered more than ${maxResponseBytes} bytes`));
            return;
          }
          chunks.push(chunk);
        });
        response.on("error", (error: NodeJS.ErrnoException) =>
          fail(new CallFailure("unreachable", `answer broken off (${error.code ?? error.message})`)),
        );
        response.on("end", () => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          signal?.removeEventListener("abort", onAbort);
          resolve({
            status: response.statusCode ?? 0,
            headers: response.headers,
            body: Buffer.concat(chunks),
            remoteAddress,
          });
        });
      });
      request.end(body);
    });
  }
}

/**
 * A Fetch API function over `caller` (for libraries that take one, such as openid-client's `customFetch`):
 * the same guard, timeout and size limit as the caller's other calls. Failures reject as fetch does (a TypeError
 * whose `cause` is the CallFailure).
 */
export function fetchThrough(
  caller: HttpCaller,
  timeoutMs: number,
): (
  url: string,
  init: { method: string; headers: Record<string, string>; body?: unknown; signal?: AbortSignal },
) => Promise<Response> {
  return async (url, init) => {
    const body =
      init.body === undefined || init.body === null
        ? undefined
        : typeof init.body === "string"
          ? init.body
          : init.body instanceof URLSearchParams
            ? init.body.toString()
            : undefined;
    if (init.body != null && body === undefined) throw new TypeError("unsupported request body");
    const headers = Object.fromEntries(new Headers(init.headers).entries());
    let answer: CallAnswer;
    try {
      answer = await caller.send(init.method, url, body, headers, timeoutMs, init.signal);
    } catch (error) {
      throw new TypeError(`fetch failed: ${(error as Error).message}`, { cause: error });
    }
    const responseHeaders = new Headers();
    for (const [name, value] of Object.entries(answer.headers)) {
      for (const one of Array.isArray(value) ? value : value === undefined ? [] : [value])
        responseHeaders.append(name, one);
    }
    const empty = answer.status === 204 || answer.status === 304 || init.method === "HEAD";
    return new Response(empty ? null : answer.body, { status: answer.status, headers: responseHeaders });
  };
}

/** `2s`, `1.5s`, `250ms`. */
export function formatMs(ms: number): string {
  return ms >= 1000 ? `${Number((ms / 1000).toFixed(3))}s` : `${ms}ms`;
}
