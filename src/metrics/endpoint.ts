/**
 * Where `GET /metrics` is served (docs/operations.md "Metrics"). Metrics reveal the traffic of every tenant,
 * so nothing is served unless the operator chose how:
 *
 * - PLATFORM_METRICS_PORT: a listener of its own (plain HTTP/1.1) serving only `/metrics`, for a network
 *   that only the monitoring reaches; the main port does not serve them.
 * - PLATFORM_METRICS_TOKEN: `/metrics` requires `Authorization: Bearer <token>`; without a port of its own
 *   it is served on the main port (whatever the Host header, like the health probes).
 *
 * Loopback clients get no exemption: behind a reverse proxy on the same host every client is loopback.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import type { FastifyBaseLogger, FastifyInstance } from "fastify";
import type { MetricsConfig } from "../config.ts";
import { constantTimeEqual, sha256 } from "../crypto/tokens.ts";
import { Code } from "../errors.ts";
import type { Metrics } from "./metrics.ts";

export const METRICS_PATH = "/metrics";

interface Answer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

const json = (status: number, code: number, message: string, headers: Record<string, string> = {}) => ({
  status,
  headers: { "content-type": "application/json; charset=utf-8", ...headers },
  body: JSON.stringify({ code, message, details: [] }),
});

/** Whether the Authorization header carries the token (compared in constant time, by their hashes). */
function bearerMatches(authorization: string | undefined, token: string): boolean {
  const match = /^Bearer +(\S+) *$/i.exec(authorization ?? "");
  return match !== null && constantTimeEqual(sha256(match[1]), sha256(token));
}

/** The answer to a scrape: the exposition, or 401 without the token when one is configured. */
async function scrape(metrics: Metrics, token: string | undefined, authorization: string | undefined) {
  if (token !== undefined && !bearerMatches(authorization, token)) {
    return json(401, Code.UNAUTHENTICATED, "metrics need the bearer token of PLATFORM_METRICS_TOKEN", {
      "www-authenticate": 'Bearer realm="metrics"',
    });
  }
  return {
    status: 200,
    headers: { "content-type": metrics.contentType, "cache-control": "no-store" },
    body: await metrics.text(),
  } satisfies Answer;
}

/** Whether the main port serves `/metrics`: only with a token and no port of their own. */
export function metricsOnMainPort(config: MetricsConfig): boolean {
  return config.port === undefined && config.token !== undefined;
}

/** `GET /metrics` on the main port: the exposition (with the token), else 404 saying how to turn it on. */
export function registerMetricsRoute(app: FastifyInstance, metrics: Metrics, config: MetricsConfig): void {
  app.get(METRICS_PATH, async (request, reply) => {
    const answer = metricsOnMainPort(config)
      ? await scrape(metrics, config.token, request.headers.authorization)
      : json(
          404,
          Code.NOT_FOUND,
          "metrics are not served on this port (PLATFORM_METRICS_PORT, PLATFORM_METRICS_TOKEN)",
        );
    return reply.code(answer.status).headers(answer.headers).send(answer.body);
  });
}

export interface MetricsListener {
  port: number;
  close(): Promise<void>;
}

/** The listener of PLATFORM_METRICS_PORT (all interfaces, IPv4 and IPv6): `/metrics` only. */
export async function listenForMetrics(
  metrics: Metrics,
  config: MetricsConfig & { port: number },
  log: FastifyBaseLogger,
): Promise<MetricsListener> {
  const server = http.createServer((request, response) => {
    const started = performance.now();
    const path = (request.url ?? "").split("?", 1)[0];
    const answered = (answer: Answer) => {
      response.writeHead(answer.status, answer.headers);
      response.end(request.method === "HEAD" ? undefined : answer.body);
      log.debug(
        { route: METRICS_PATH, method: request.method, status: answer.status, durationMs: since(started) },
        "metrics scrape",
      );
    };
    if (path !== METRICS_PATH)
      return answered(json(404, Code.NOT_FOUND, `no such route: ${path.slice(0, 200)}`));
    if (request.method !== "GET" && request.method !== "HEAD") {
      return answered(json(405, Code.UNIMPLEMENTED, "only GET", { allow: "GET, HEAD" }));
    }
    scrape(metrics, config.token, request.headers.authorization).then(answered, (error) => {
      log.error({ err: error }, "metrics scrape failed");
      answered(json(500, Code.INTERNAL, "internal error"));
    });
  });
  // Scrapers keep their connection; an idle one is closed after the usual keep-alive time.
  server.keepAliveTimeout = 65_000;
  try {
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen({ port: config.port, host: "::" }, () => {
        server.off("error", reject);
        resolve();
      });
    });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "EADDRINUSE")
      throw new Error(`PLATFORM_METRICS_PORT: port ${config.port} is already in use`);
    if (code === "EACCES")
      throw new Error(`PLATFORM_METRICS_PORT: not allowed to listen on port ${config.port}`);
    throw error;
  }
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

function since(started: number): number {
  return Math.round((performance.now() - started) * 100) / 100;
}
