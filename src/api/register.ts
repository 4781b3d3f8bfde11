/**
 * Serves API services over every protocol from one set of implementations:
 * - gRPC (application/grpc, HTTP/2), gRPC-web (application/grpc-web+proto) and Connect (application/json,
 *   application/proto) through `@connectrpc/connect-fastify`, at `/<package>.<Service>/<Method>`;
 * - REST/JSON through the transcoder of ./rest/transcoder.ts, at the paths of the `google.api.http` rules.
 *
 * Every call carries the same context values (`scopeKey` → the `RequestScope` of `request.scope`,
 * `loggerKey` → `request.log`) and runs through the same interceptor chain: error mapping (status.ts),
 * the caller's extra interceptors, then request validation (validate.ts), then the implementation.
 *
 * Usage (in the server, before `listen`):
 *
 *   registerApi(app, [
 *     { service: PlatformLanguageSettings, impl: languageSettingsImpl },
 *     { service: PlatformFeatureSettings, impl: featureSettingsImpl },
 *   ], { interceptors: [authInterceptor] });
 *
 * Implementations read the scope with `ctx.values.get(scopeKey)`, throw `PlatformError`s (src/errors.ts)
 * and may choose the REST success status with `setHttpStatus(ctx, 201)`.
 */
import { createRegistry, type DescFile, type DescService, type Registry } from "@bufbuild/protobuf";
import type { ContextValues, HandlerContext, Interceptor, ServiceImpl } from "@connectrpc/connect";
import { fastifyConnectPlugin } from "@connectrpc/connect-fastify";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { answerOversizedConnectRequestsWith413 } from "./body-limit.ts";
import { cannedResponseKey, createCallContextValues } from "./context.ts";
import { apiInterceptors } from "./interceptors.ts";
import { type RestRoute, registerRest } from "./rest/transcoder.ts";
import type { RpcRouteConfig } from "./scope.ts";

export { httpStatusKey, loggerKey, setHttpStatus } from "./context.ts";
export { scopeKey } from "./scope.ts";

/** connect's own default for readMaxBytes (0xffffffff bytes; its docs say "4 GiB"). */
const CONNECT_DEFAULT_READ_MAX_BYTES = 0xffffffff;

export interface ApiService {
  service: DescService;
  // biome-ignore lint/suspicious/noExplicitAny: one list holds implementations of different services
  impl: Partial<ServiceImpl<any>>;
}

/**
 * Pairs a service with its implementation, type-checking the implementation against that service
 * (methods left out answer UNIMPLEMENTED): `apiService(PlatformLanguageSettings, { setLanguages(req, ctx) {...} })`.
 */
export function apiService<S extends DescService>(service: S, impl: Partial<ServiceImpl<S>>): ApiService {
  return { service, impl };
}

export interface RegisterApiOptions {
  /**
   * Extra interceptors (e.g. authentication / authorization), outermost first. They run inside the error
   * mapping (so they may throw PlatformErrors) and before validation, for every protocol including REST.
   */
  interceptors?: Interceptor[];
  /** Interceptors that run after validation, right around the implementation (e.g. idempotency keys). */
  innerInterceptors?: Interceptor[];
  /** Adds the server's own context values to every call (after scopeKey and loggerKey are set). */
  contextValues?: (req: FastifyRequest, values: ContextValues) => void;
  /**
   * Maximum size of a connect-protocol request message in bytes (default: connect's maximum, 4 GiB). Larger
   * messages answer RESOURCE_EXHAUSTED (gRPC, gRPC-web) or HTTP 413 (Connect), see body-limit.ts.
   */
  readMaxBytes?: number;
  /** Serve REST routes (default true). */
  rest?: boolean;
}

export interface RegisteredApi {
  /** The REST routes, in registration order (e.g. for documentation or tests). */
  restRoutes: RestRoute[];
  /** The JSON registry used for both REST and Connect JSON (resolves google.protobuf.Any). */
  registry: Registry;
}

/**
 * Registers the services on the app (connect protocols + REST). Route tables are built synchronously, so
 * invalid `google.api.http` rules throw here; Fastify adds the routes when the app boots.
 */
export function registerApi(
  app: FastifyInstance,
  services: ApiService[],
  options: RegisterApiOptions = {},
): RegisteredApi {
  services = services.map(answeringCanned);
  const registry = registryOf(services.map((s) => s.service));
  const interceptors = apiInterceptors(options.interceptors, options.innerInterceptors);
  const contextValues = (req: FastifyRequest) => createCallContextValues(req, options.contextValues);
  const readMaxBytes = options.readMaxBytes ?? CONNECT_DEFAULT_READ_MAX_BYTES;

  const connectOptions: Parameters<typeof fastifyConnectPlugin>[1] = {
    routes(router) {
      for (const s of services) router.service(s.service, s.impl);
      answerOversizedConnectRequestsWith413(router.handlers, readMaxBytes);
    },
    interceptors,
    contextValues,
    grpc: true,
    grpcWeb: true,
    connect: true,
    // proto3 JSON (docs/api.md): unknown fields are errors, output uses the proto (snake_case) names
    jsonOptions: { ignoreUnknownFields: false, useProtoFieldName: true, alwaysEmitImplicit: true, registry },
    readMaxBytes,
  };
  // The connect routes are named by their RPC (the request log, metrics): their path is `/<RPC>`.
  const rpcPaths = new Set(
    services.flatMap((s) => s.service.methods.map((m) => `/${s.service.typeName}/${m.name}`)),
  );
  app.register(async (scope) => {
    scope.addHook("onRoute", (route) => {
      if (!rpcPaths.has(route.url)) return;
      const config: RpcRouteConfig = { rpc: route.url.slice(1) };
      route.config = { ...(route.config as object), ...config };
    });
    await scope.register(fastifyConnectPlugin, connectOptions);
  });

  const restRoutes =
    options.rest === false
      ? []
      : registerRest(
          app,
          services.map((s) => ({ service: s.service, impl: s.impl as Partial<Record<string, unknown>> })),
          { interceptors, contextValues, registry },
        );
  return { restRoutes, registry };
}

/** The service with every unary method answering `cannedResponseKey` when an interceptor set it (context.ts). */
function answeringCanned(s: ApiService): ApiService {
  const impl: Record<string, unknown> = { ...s.impl };
  for (const method of s.service.methods) {
    const fn = s.impl[method.localName] as ((req: unknown, ctx: HandlerContext) => unknown) | undefined;
    if (method.methodKind !== "unary" || typeof fn !== "function") continue;
    impl[method.localName] = (req: unknown, ctx: HandlerContext) =>
      ctx.values.get(cannedResponseKey) ?? fn.call(s.impl, req, ctx);
  }
  return { service: s.service, impl: impl as ApiService["impl"] };
}

/** A registry of every file the services use (directly or through imports). */
function registryOf(services: DescService[]): Registry {
  const files = new Map<string, DescFile>();
  const add = (f: DescFile) => {
    if (files.has(f.name)) return;
    files.set(f.name, f);
    f.dependencies.forEach(add);
  };
  for (const s of services) add(s.file);
  return createRegistry(...files.values());
}
