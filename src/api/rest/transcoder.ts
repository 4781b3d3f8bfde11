/**
 * REST transcoder: serves every RPC that has a `google.api.http` rule as a Fastify route, calling the same
 * implementation through the same interceptor chain (error mapping, extra interceptors, validation) as the
 * connect protocols.
 *
 * - Routes come from the descriptors at start-up (`getOption(method, http)`), additional bindings included.
 * - The request message is built by ./request.ts (body field, path variables, query parameters).
 * - Success: proto3 JSON with snake_case names (`useProtoFieldName`), status 200, 201 for RPCs whose name
 *   starts with `Create`, or what the implementation chose with `setHttpStatus(ctx, status)`
 *   (src/api/context.ts). Response headers the implementation set are copied to the response.
 * - Errors: rpcStatus JSON `{"code", "message", "details": []}` with the grpc-gateway HTTP status
 *   (src/api/status.ts). Unknown paths below a REST prefix and body errors answer rpcStatus JSON too.
 * - Bodies: `application/json` (UTF-8) only, else 415; larger than the server's bodyLimit, 413 naming it.
 *
 * Routes are grouped by their first two literal path segments (e.g. `/settings/v3alpha`); each group is an
 * encapsulated Fastify plugin with that prefix, its own catch-all body parser (raw text, parsed here so
 * malformed JSON is a proper INVALID_ARGUMENT), not-found handler and error handler, so nothing leaks into
 * the rest of the server.
 */
import {
  create,
  type DescMessage,
  type DescMethod,
  type DescService,
  getOption,
  isMessage,
  type MessageInitShape,
  type Registry,
  toJson,
} from "@bufbuild/protobuf";
import {
  Code as ConnectCode,
  ConnectError,
  type ContextValues,
  type HandlerContext,
  type Interceptor,
  type UnaryRequest,
  type UnaryResponse,
} from "@connectrpc/connect";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { Code } from "../../errors.ts";
import { http } from "../../gen/google/api/annotations_pb.ts";
import type { HttpRule } from "../../gen/google/api/http_pb.ts";
import { httpStatusKey } from "../context.ts";
import { applyInterceptors } from "../interceptors.ts";
import type { RpcRouteConfig } from "../scope.ts";
import {
  bodyTooLarge,
  type RpcStatusReply,
  rpcStatus,
  toRpcStatus,
  unsupportedMediaType,
} from "../status.ts";
import { buildRequestMessage, findField, type RequestBinding } from "./request.ts";
import { type PathVariable, parsePathTemplate } from "./template.ts";

/** A method implementation as registered (`Partial<ServiceImpl<...>>` values). */
// biome-ignore lint/suspicious/noExplicitAny: implementations are typed per service by the caller
type AnyImpl = (req: any, ctx: HandlerContext) => unknown;

export interface RestRoute {
  service: DescService;
  method: DescMethod;
  /** HTTP method (GET, POST, PUT, PATCH, DELETE or a custom one). */
  httpMethod: string;
  /** The google.api.http path template. */
  template: string;
  /** The Fastify route path. */
  path: string;
  variables: PathVariable[];
  /** "" (no body), "*" or the body field's proto name. */
  body: string;
  /** "" (whole response) or the response field's proto name. */
  responseBody: string;
}

export interface RestOptions {
  /** The full interceptor chain (see interceptors.ts `apiInterceptors`). */
  interceptors: Interceptor[];
  /** Context values of one call (scope, logger, ...). */
  contextValues: (req: FastifyRequest) => ContextValues;
  /** Registry for google.protobuf.Any in JSON. */
  registry?: Registry;
}

/** All REST routes of the services, from their `google.api.http` options. Throws on invalid rules. */
export function collectRestRoutes(services: DescService[]): RestRoute[] {
  const routes: RestRoute[] = [];
  for (const service of services) {
    for (const method of service.methods) {
      const rule = getOption(method, http);
      if (rule.pattern.case === undefined) continue;
      for (const r of [rule, ...rule.additionalBindings]) routes.push(toRoute(service, method, r));
    }
  }
  return routes;
}

function toRoute(service: DescService, method: DescMethod, rule: HttpRule): RestRoute {
  const where = `${service.typeName}.${method.name}`;
  let httpMethod: string;
  let template: string;
  switch (rule.pattern.case) {
    case "get":
    case "put":
    case "post":
    case "delete":
    case "patch":
      httpMethod = rule.pattern.case.toUpperCase();
      template = rule.pattern.value;
      break;
    case "custom":
      httpMethod = rule.pattern.value.kind.toUpperCase();
      template = rule.pattern.value.path;
      break;
    default:
      throw new Error(`${where}: google.api.http rule without a pattern`);
  }
  if (method.methodKind !== "unary")
    throw new Error(`${where}: REST mapping of streaming RPCs is not supported`);
  let parsed: ReturnType<typeof parsePathTemplate>;
  try {
    parsed = parsePathTemplate(template);
  } catch (e) {
    throw new Error(`${where}: ${(e as Error).message}`);
  }
  if (rule.body !== "" && rule.body !== "*" && !findField(method.input, rule.body)) {
    throw new Error(`${where}: body field "${rule.body}" does not exist in ${method.input.typeName}`);
  }
  if (rule.responseBody !== "" && !findField(method.output, rule.responseBody)) {
    throw new Error(`${where}: response_body field "${rule.responseBody}" does not exist`);
  }
  for (const v of parsed.variables) {
    let desc = method.input;
    for (const [i, n] of v.fieldPath.entries()) {
      const f = findField(desc, n);
      if (!f || (i < v.fieldPath.length - 1 && f.fieldKind !== "message")) {
        throw new Error(`${where}: path variable ${v.fieldPath.join(".")} does not exist`);
      }
      if (f.fieldKind === "message") desc = f.message;
    }
  }
  return {
    service,
    method,
    httpMethod,
    template,
    path: parsed.path,
    variables: parsed.variables,
    body: rule.body,
    responseBody: rule.responseBody,
  };
}

/** The group prefix of a route: its first two literal segments (fewer when a variable comes earlier). */
function prefixOf(template: string): string {
  const segs = template.split("/").slice(1);
  const lits: string[] = [];
  for (const s of segs.slice(0, -1)) {
    if (lits.length === 2 || /[{}*:]/.test(s) || s === "") break;
    lits.push(s);
  }
  return lits.length === 0 ? "" : `/${lits.join("/")}`;
}

/** Registers the REST routes of the services on the app. */
export function registerRest(
  app: FastifyInstance,
  services: { service: DescService; impl: Partial<Record<string, unknown>> }[],
  options: RestOptions,
): RestRoute[] {
  const routes = collectRestRoutes(services.map((s) => s.service));
  const implOf = new Map<DescService, Partial<Record<string, unknown>>>(
    services.map((s) => [s.service, s.impl]),
  );
  const groups = new Map<string, RestRoute[]>();
  for (const r of routes) {
    const p = prefixOf(r.template);
    const list = groups.get(p);
    if (list) list.push(r);
    else groups.set(p, [r]);
  }
  for (const [prefix, group] of groups) {
    app.register(
      async (scope) => {
        scope.removeAllContentTypeParsers();
        // Bodies are JSON (UTF-8, RFC 8259): `application/json`, with or without `charset=utf-8`. Any
        // other type, or a body without a type, is 415 before it is read; an empty body needs no type.
        scope.addContentTypeParser("application/json", { parseAs: "string" }, (req, body, done) => {
          const charset = charsetOf(req.headers["content-type"]);
          if (charset !== undefined && charset !== "utf-8") {
            done(new UnsupportedMediaType(`charset ${charset} is not supported; send UTF-8 JSON`));
          } else done(null, body);
        });
        scope.addContentTypeParser("*", (req, _payload, done) => {
          if (req.headers["content-length"] === "0") done(null, undefined);
          else done(new UnsupportedMediaType(mediaTypeProblem(req.headers["content-type"])));
        });
        if (prefix !== "") {
          scope.setNotFoundHandler((req, reply) => {
            sendStatus(
              reply,
              rpcStatus(Code.NOT_FOUND, `no REST route for ${req.method} ${pathOf(req.url)}`),
            );
          });
        }
        scope.setErrorHandler((err, req, reply) => {
          sendStatus(reply, fastifyErrorStatus(err, req));
        });
        for (const r of group) {
          const impl = implOf.get(r.service)?.[r.method.localName] as AnyImpl | undefined;
          const config: RpcRouteConfig = {
            rpc: `${r.service.typeName}/${r.method.name}`,
            rest: true,
            httpRoute: r.template,
          };
          scope.route({
            method: r.httpMethod,
            url: r.path.slice(prefix.length) || "/",
            config,
            handler: createRouteHandler(r, impl, options),
          });
        }
      },
      prefix === "" ? {} : { prefix },
    );
  }
  return routes;
}

function pathOf(url: string): string {
  const q = url.indexOf("?");
  return q < 0 ? url : url.slice(0, q);
}

function sendStatus(reply: FastifyReply, s: RpcStatusReply): void {
  reply
    .code(s.httpStatus)
    .headers(s.headers)
    .header("content-type", "application/json; charset=utf-8")
    .send(JSON.stringify(s.body));
}

/** A body in a media type REST does not read (answered 415). */
class UnsupportedMediaType extends Error {}

/** The charset parameter of a Content-Type, lower-cased (undefined when absent). */
function charsetOf(contentType: string | undefined): string | undefined {
  const match = /;\s*charset\s*=\s*"?([^";\s]+)"?/i.exec(contentType ?? "");
  return match?.[1].toLowerCase();
}

function mediaTypeProblem(contentType: string | undefined): string {
  return contentType === undefined
    ? "a request body needs Content-Type: application/json"
    : `Content-Type ${contentType.split(";", 1)[0].trim()} is not supported; send application/json`;
}

/** Errors Fastify raises itself before our handler runs (body too large, aborted body, ...). */
function fastifyErrorStatus(err: unknown, req: FastifyRequest): RpcStatusReply {
  if (err instanceof UnsupportedMediaType) return unsupportedMediaType(err.message);
  const status = (err as { statusCode?: unknown }).statusCode;
  if (typeof status === "number" && status >= 400 && status < 500) {
    if (status === 404) return rpcStatus(Code.NOT_FOUND, "not found");
    if (status === 413) return bodyTooLarge(req.routeOptions.bodyLimit);
    if (status === 415) return unsupportedMediaType(mediaTypeProblem(req.headers["content-type"]));
    return rpcStatus(Code.INVALID_ARGUMENT, (err as Error).message || "bad request");
  }
  return toRpcStatus(err, req.log, "REST request failed");
}

function createRouteHandler(route: RestRoute, impl: AnyImpl | undefined, options: RestOptions) {
  const { method, service } = route;
  const binding: RequestBinding = {
    schema: method.input,
    body: route.body,
    variables: route.variables,
    httpMethod: route.httpMethod,
  };
  const defaultStatus = method.name.startsWith("Create") ? 201 : 200;
  const responseField = route.responseBody === "" ? undefined : findField(method.output, route.responseBody);
  const what = `REST ${service.typeName}/${method.name} failed`;

  /** The innermost step of the chain: the implementation, called as connect's router calls it. */
  const callImpl = async (req: UnaryRequest, ctx: HandlerContext): Promise<UnaryResponse> => {
    if (!impl)
      throw new ConnectError(
        `${service.typeName}.${method.name} is not implemented`,
        ConnectCode.Unimplemented,
      );
    // the call as the interceptors left it; the signal is read only when asked for (CallAbort)
    const merged: HandlerContext = {
      method: ctx.method,
      service: req.service,
      protocolName: ctx.protocolName,
      requestMethod: ctx.requestMethod,
      url: ctx.url,
      get signal() {
        return req.signal;
      },
      timeoutMs: ctx.timeoutMs,
      requestHeader: req.header,
      responseHeader: ctx.responseHeader,
      responseTrailer: ctx.responseTrailer,
      values: req.contextValues,
    };
    const out = await impl(req.message, merged);
    const message = isMessage(out, method.output)
      ? out
      : create(method.output, out as MessageInitShape<DescMessage>);
    return {
      stream: false,
      service: req.service,
      method: method as UnaryResponse["method"],
      header: ctx.responseHeader,
      trailer: ctx.responseTrailer,
      message,
    };
  };

  return async function restHandler(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const abort = new CallAbort();
    const onClose = () => {
      if (!reply.raw.writableFinished) abort.abort(new Error("client closed the connection"));
    };
    reply.raw.once("close", onClose);
    try {
      let res: UnaryResponse;
      let values: ContextValues;
      try {
        values = options.contextValues(request);
        const header = headersOf(request);
        const url = `${request.protocol}://${request.host}${request.url}`;
        // The context connect's createHandlerContext would make, without what a REST call does not use: a
        // REST call has no deadline (no timer, no deadline signal), and the request headers are this call's
        // own (no copy). Its three AbortControllers linked by listeners and the header copy cost some 18 µs
        // of CPU per call, 2 % of a user create.
        const ctx: HandlerContext = {
          service,
          method,
          protocolName: "rest",
          requestMethod: request.method,
          url,
          get signal() {
            return abort.signal;
          },
          timeoutMs: noTimeout,
          requestHeader: header,
          responseHeader: new Headers(),
          responseTrailer: new Headers(),
          values,
        };
        const qi = request.url.indexOf("?");
        const message = buildRequestMessage(
          binding,
          request.params as Record<string, string | undefined>,
          qi < 0 ? "" : request.url.slice(qi + 1),
          typeof request.body === "string" ? request.body : undefined,
          options.registry,
        );
        const next = applyInterceptors((req: UnaryRequest) => callImpl(req, ctx), options.interceptors);
        res = await next({
          stream: false,
          service,
          method: method as UnaryRequest["method"],
          requestMethod: request.method,
          url,
          get signal() {
            return abort.signal;
          },
          header,
          contextValues: values,
          message,
        });
      } catch (e) {
        // headers an error carries (e.g. Idempotent-Replayed), as the connect protocols send them
        if (e instanceof ConnectError) e.metadata.forEach((v, k) => void reply.header(k, v));
        sendStatus(reply, toRpcStatus(e, request.log, what));
        return;
      }
      const status = values.get(httpStatusKey) ?? defaultStatus;
      res.header.forEach((v, k) => {
        if (k !== "content-type" && k !== "content-length") reply.header(k, v);
      });
      let out: unknown = toJson(method.output, res.message, {
        useProtoFieldName: true,
        // Scalars at their default (false, 0, "") are written too: clients need not know proto3 defaults.
        alwaysEmitImplicit: true,
        registry: options.registry,
      });
      if (responseField) {
        const v = (out as Record<string, unknown>)[responseField.name];
        out = v ?? (responseField.fieldKind === "list" ? [] : {});
      }
      reply.code(status).header("content-type", "application/json; charset=utf-8").send(JSON.stringify(out));
    } finally {
      reply.raw.off("close", onClose);
    }
  };
}

const noTimeout = () => undefined;

/**
 * A REST call's abort signal, aborted when the client closes the connection before the answer. Made when
 * first asked for: an AbortSignal costs some 3 µs of CPU to create, and most calls never look at it.
 */
class CallAbort {
  private controller: AbortController | undefined;
  private reason: Error | undefined;

  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.reason) this.controller.abort(this.reason);
    }
    return this.controller.signal;
  }

  abort(reason: Error): void {
    if (this.reason) return;
    this.reason = reason;
    this.controller?.abort(reason);
  }
}

function headersOf(request: FastifyRequest): Headers {
  const h = new Headers();
  for (const [k, v] of Object.entries(request.headers)) {
    if (k.startsWith(":") || v === undefined) continue;
    if (Array.isArray(v)) for (const x of v) h.append(k, x);
    else h.set(k, String(v));
  }
  return h;
}
