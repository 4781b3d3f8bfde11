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
  /**
   * Who the call was authenticated as, once known (the request log): the user ID, `system:<id>` for a
   * system API user.
   */
  caller?: string;
  /** The status code (gRPC numbering) the RPC ended with, once the interceptor chain knows it. */
  rpcCode?: number;
}

/**
 * What a route of an RPC carries in its Fastify route config, so the request log and the metrics name the
 * RPC (`platform.resources.user.v3alpha.PlatformUsers/GetUser`) whatever the path or protocol.
 */
export interface RpcRouteConfig {
  /** The RPC's full name: `<package>.<Service>/<Method>`. */
  rpc?: string;
  /** The route is the REST mapping of the RPC (else one of the connect protocols: gRPC, gRPC-web, Connect). */
  rest?: boolean;
  /** A REST route's google.api.http template (`/resources/v3alpha/users/{id}`), as traces name it. */
  httpRoute?: string;
}

export const scopeKey = createContextKey<RequestScope | undefined>(undefined, {
  description: "platform request scope",
});

declare module "fastify" {
  interface FastifyContextConfig extends RpcRouteConfig {}
}
