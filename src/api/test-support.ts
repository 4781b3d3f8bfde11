/**
 * Test support for the API transport tests (not used by the server): standalone Fastify apps serving
 * services through `registerApi`, one HTTP/2 cleartext app (gRPC) and one HTTP/1.1 app (REST, gRPC-web,
 * Connect), with `request.scope` decorated as the real server does, and a small in-memory language settings
 * implementation.
 */
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { HandlerContext, Interceptor } from "@connectrpc/connect";
import fastify, { type FastifyInstance, type FastifyRequest } from "fastify";
import { InvalidArgumentError, PermissionDeniedError } from "../errors.ts";
import { OwnerType } from "../gen/platform/object/v3alpha/object_pb.ts";
import {
  PlatformLanguageSettings,
  type ResolveLanguagesRequest,
  type SetLanguagesRequest,
} from "../gen/platform/settings/language/v3alpha/language_service_pb.ts";
import { type ApiService, apiService, registerApi } from "./register.ts";
import { type RequestScope, scopeKey } from "./scope.ts";

export interface TestServers {
  /** HTTP/1.1 base URL (REST, gRPC-web, Connect). */
  http1: string;
  /** HTTP/2 cleartext base URL (gRPC). */
  http2: string;
  /** Closes both apps. */
  close(): Promise<void>;
}

/** Decorates `request.scope` like the server's onRequest hook (request id from `x-request-id`). */
function decorateScope(app: FastifyInstance): void {
  let n = 0;
  app.decorateRequest("scope", null as unknown as RequestScope);
  app.addHook("onRequest", async (req: FastifyRequest) => {
    const header = req.headers["x-request-id"];
    const scope: RequestScope = {
      requestId: typeof header === "string" ? header : `req-${++n}`,
      host: req.host,
      instanceId: "instance-1",
      authorization: req.headers.authorization,
    };
    (req as FastifyRequest & { scope?: RequestScope }).scope = scope;
  });
}

export async function startServers(
  services: ApiService[],
  interceptors?: Interceptor[],
): Promise<TestServers> {
  const h1 = fastify({ logger: false, routerOptions: { maxParamLength: 1000 } });
  const h2 = fastify({ http2: true, logger: false, routerOptions: { maxParamLength: 1000 } });
  for (const app of [h1, h2] as FastifyInstance[]) {
    decorateScope(app);
    registerApi(app, services, { interceptors });
  }
  await h1.listen({ host: "127.0.0.1", port: 0 });
  await h2.listen({ host: "127.0.0.1", port: 0 });
  const url = (app: { server: { address(): unknown } }) => {
    const a = app.server.address() as { port: number };
    return `http://127.0.0.1:${a.port}`;
  };
  return {
    http1: url(h1),
    http2: url(h2),
    async close() {
      await Promise.all([h1.close(), h2.close()]);
    },
  };
}

interface StoredLanguages {
  defaultLanguage?: string;
  restricted?: string[];
  sequence: bigint;
}

/**
 * In-memory PlatformLanguageSettings keyed by context. Special org IDs: `deny` throws
 * PermissionDeniedError, `boom` throws a plain Error carrying SQL, `invalid` throws InvalidArgumentError.
 */
export function languageService(seen: RequestScope[] = []): ApiService {
  const store = new Map<string, StoredLanguages>();
  const changed = new Date("2024-05-06T07:08:09.123Z");
  const keyOf = (req: SetLanguagesRequest | ResolveLanguagesRequest, ctx: HandlerContext) => {
    const scope = ctx.values.get(scopeKey);
    if (scope) seen.push(scope);
    const c = req.ctx?.context;
    if (c?.case === "orgId") {
      if (c.value === "deny")
        throw new PermissionDeniedError("no permission for the settings of this context");
      if (c.value === "boom")
        throw new Error('relation "secret_settings" does not exist: SELECT * FROM secret');
      if (c.value === "invalid") throw new InvalidArgumentError("is not usable", "ctx.org_id");
    }
    return c?.case ? `${c.case}:${String(c.value)}` : `instance:${scope?.instanceId ?? ""}`;
  };
  const owner = (key: string) =>
    key.startsWith("orgId:")
      ? { type: OwnerType.ORG, id: key.slice(6) }
      : { type: OwnerType.INSTANCE, id: key.slice(key.indexOf(":") + 1) };
  return apiService(PlatformLanguageSettings, {
    setLanguages(req, ctx) {
      const key = keyOf(req, ctx);
      const cur = store.get(key) ?? { sequence: 0n };
      if (req.settings?.defaultLanguage) cur.defaultLanguage = req.settings.defaultLanguage.key;
      if (req.settings?.restrictedLanguages)
        cur.restricted = req.settings.restrictedLanguages.languages.map((l) => l.key);
      cur.sequence += 1n;
      store.set(key, cur);
      return {
        details: { sequence: cur.sequence, changeDate: timestampFromDate(changed), owner: owner(key) },
      };
    },
    resolveLanguages(req, ctx) {
      const key = keyOf(req, ctx);
      const cur = store.get(key) ?? { sequence: 0n };
      const system = { type: OwnerType.SYSTEM, id: "" };
      return {
        details: { sequence: cur.sequence, changeDate: timestampFromDate(changed), owner: owner(key) },
        settings: {
          defaultLanguage: cur.defaultLanguage
            ? { value: cur.defaultLanguage }
            : { value: "en", owner: system },
          restrictedLanguages: { value: (cur.restricted ?? ["en"]).map((k) => ({ key: k })) },
          supportedLanguages: { value: ["de", "en", "fr"].map((k) => ({ key: k })), owner: system },
        },
      };
    },
  });
}
