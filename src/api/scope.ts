import { createContextKey } from "@connectrpc/connect";

/**
 * What the transport knows about a request before any RPC runs: filled by the server's onRequest hook
 * (src/server.ts) and handed to every RPC implementation, whatever the protocol, through the connect
 * HandlerContext values under `scopeKey`.
 */
export interface RequestScope {
  requestId: string;
  /** Host the instance was resolved from (Host / :authority, or X-Forwarded-Host behind a trusted proxy). */
  host: string;
  /** The instance of the Host header; undefined when the host is unknown (system-only calls still work). */
  instanceId?: string;
  /** Raw `Authorization` header value, verified lazily by the auth layer. */
  authorization?: string;
}

export const scopeKey = createContextKey<RequestScope | undefined>(undefined, {
  description: "platform request scope",
});
