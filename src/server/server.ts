import { randomUUID } from "node:crypto";
import Fastify, { type FastifyInstance, type FastifyServerFactory } from "fastify";
import type { RequestScope } from "../api/scope.ts";
import type { Config } from "../config.ts";
import { PlatformError } from "../errors.ts";
import type { InstanceDirectory } from "../query/instances.ts";
import type { Database } from "../storage/database.ts";
import { migrationsComplete } from "../storage/migrate.ts";
import { DualProtocolServer } from "./listener.ts";

declare module "fastify" {
  interface FastifyRequest {
    scope: RequestScope;
  }
}

export interface ServerDeps {
  config: Config;
  db: Database;
  instances: InstanceDirectory;
}

/** Paths served whatever the Host header says (probes of orchestrators use IPs or pod names). */
const HOSTLESS_PATHS = new Set(["/healthz", "/ready"]);

/**
 * The Fastify app: one port for HTTP/1.1 and h2c, request IDs, structured logs without secrets, health
 * probes, instance resolution from the Host header and security headers on HTML. Feature plugins (API,
 * OIDC, login UI) register on the returned instance.
 */
export function buildServer({ config, db, instances }: ServerDeps): FastifyInstance {
  const serverFactory: FastifyServerFactory = (handler) => new DualProtocolServer(handler as never) as never;
  const app = Fastify({
    serverFactory,
    logger: {
      level: config.logLevel,
      redact: {
        paths: ["req.headers.authorization", "req.headers.cookie", "res.headers['set-cookie']"],
        censor: "[redacted]",
      },
    },
    requestIdHeader: "x-request-id",
    genReqId: () => randomUUID(),
    return503OnClosing: true,
    trustProxy: config.trustProxy,
    bodyLimit: 1024 * 1024,
    // IDs are up to 200 characters; percent-encoded execution IDs (`request.%2Fplatform...`) are longer.
    routerOptions: { maxParamLength: 1000 },
  });

  app.decorateRequest("scope", null as unknown as RequestScope);

  app.addHook("onRequest", async (request, reply) => {
    reply.header("x-request-id", request.id);
    const path = request.url.split("?", 1)[0];
    const host = requestHost(request.headers, config.trustProxy);
    request.scope = { requestId: request.id, host, authorization: request.headers.authorization };
    if (HOSTLESS_PATHS.has(path)) return;
    const instance = await instances.byHost(host);
    if (!instance) {
      return reply.code(404).send({ code: 5, message: "instance not found", details: [] });
    }
    request.scope.instanceId = instance.id;
  });

  app.addHook("onSend", async (request, reply, payload) => {
    reply.header("x-content-type-options", "nosniff");
    const type = String(reply.getHeader("content-type") ?? "");
    if (type.startsWith("text/html")) {
      reply.header(
        "content-security-policy",
        "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'; form-action 'self' https: http:; base-uri 'none'",
      );
      reply.header("x-frame-options", "DENY");
      reply.header("referrer-policy", "no-referrer");
      reply.header("cache-control", "no-store");
    }
    if ((app.server as unknown as DualProtocolServer).closing && request.raw.httpVersionMajor === 1) {
      reply.header("connection", "close");
    }
    return payload;
  });

  app.setErrorHandler((error, request, reply) => {
    if (error instanceof PlatformError) {
      return reply.code(error.httpStatus).send({ code: error.code, message: error.message, details: [] });
    }
    const status = (error as { statusCode?: number }).statusCode;
    if (status && status >= 400 && status < 500) {
      return reply
        .code(status)
        .send({ code: status === 404 ? 5 : 3, message: (error as Error).message, details: [] });
    }
    request.log.error({ err: error }, "request failed");
    return reply.code(500).send({ code: 13, message: "internal error", details: [] });
  });

  app.get("/healthz", async () => ({ status: "ok" }));

  let migrated = false;
  app.get("/ready", async (_request, reply) => {
    try {
      await db.query("SELECT 1");
      migrated ||= await migrationsComplete(db);
    } catch {
      return reply.code(503).send({ status: "unavailable", reason: "database unreachable" });
    }
    if (!migrated) return reply.code(503).send({ status: "unavailable", reason: "migrations pending" });
    return { status: "ready" };
  });

  return app;
}

/** The host a request addressed: Host (HTTP/1.1), :authority (HTTP/2), X-Forwarded-Host behind a trusted proxy. */
export function requestHost(
  headers: Record<string, string | string[] | undefined>,
  trustProxy: boolean,
): string {
  const first = (value: string | string[] | undefined) =>
    (Array.isArray(value) ? value[0] : value)?.split(",")[0]?.trim();
  return (
    (trustProxy ? first(headers["x-forwarded-host"]) : undefined) ??
    first(headers[":authority"]) ??
    first(headers.host) ??
    ""
  );
}
