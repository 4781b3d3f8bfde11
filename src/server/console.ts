/**
 * Serves the administration console (docs/console.md) at `/ui/console`: the bundle `npm run build` makes
 * (scripts/build-console.mjs, in dist/console-ui/), read once at the first request.
 *
 * - `index.html` for the console's own paths (`/ui/console/`, `/ui/console/callback`, every screen's path):
 *   the client-side router picks the screen. Its Content-Security-Policy allows scripts, styles and
 *   connections of this origin only: no inline script, no `eval`. Like every HTML page it is `no-store`.
 * - `assets/…`: scripts and stylesheets named by their content hash, `immutable` for a year.
 * - `config.json`: the issuer of the instance as the browser reached it and the client ID of its Console
 *   app: what the page would otherwise need an inline script for.
 */
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import type { FastifyInstance } from "fastify";
import type { Config } from "../config.ts";
import { CONSOLE_PATH } from "../domain/instance/console.ts";
import { issuerFor } from "../oidc/issuer.ts";
import { consoleClientId } from "../query/console.ts";
import type { Queryable } from "../storage/database.ts";

/** dist/console-ui/: src/server/ and dist/server/ are both two levels below the package root. */
const BUNDLE_DIR = path.resolve(import.meta.dirname, "..", "..", "dist", "console-ui");

export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "form-action 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
].join("; ");

const TYPES: Record<string, string> = {
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
  ".woff2": "font/woff2",
};

interface Bundle {
  index: string;
  /** Path below assets/ → content. */
  assets: Map<string, { body: Buffer; type: string }>;
}

function readBundle(dir: string): Bundle {
  const assets = new Map<string, { body: Buffer; type: string }>();
  const walk = (sub: string) => {
    for (const entry of readdirSync(path.join(dir, "assets", sub), { withFileTypes: true })) {
      const rel = sub ? `${sub}/${entry.name}` : entry.name;
      if (entry.isDirectory()) walk(rel);
      else
        assets.set(rel, {
          body: readFileSync(path.join(dir, "assets", rel)),
          type: TYPES[path.extname(entry.name)] ?? "application/octet-stream",
        });
    }
  };
  walk("");
  return { index: readFileSync(path.join(dir, "index.html"), "utf8"), assets };
}

export function registerConsole(
  app: FastifyInstance,
  deps: { config: Config; db: Queryable },
  options: { bundleDir?: string } = {},
): void {
  let bundle: Bundle | undefined;
  const load = (): Bundle | undefined => {
    try {
      bundle ??= readBundle(options.bundleDir ?? BUNDLE_DIR);
    } catch {
      // not built (a checkout before `npm run build`): answered below; read again at the next request
    }
    return bundle;
  };

  app.get(CONSOLE_PATH, (_request, reply) => reply.redirect(`${CONSOLE_PATH}/`, 302));

  app.get(`${CONSOLE_PATH}/config.json`, async (request, reply) => {
    const clientId = await consoleClientId(deps.db, request.scope.instanceId!);
    if (!clientId)
      return reply
        .code(503)
        .send({ code: 14, message: "the console's app is missing: restart the server", details: [] });
    return reply.header("cache-control", "no-store").send({
      issuer: issuerFor(deps.config, request.scope.host),
      client_id: clientId,
      base_path: CONSOLE_PATH,
    });
  });

  app.get(`${CONSOLE_PATH}/assets/*`, (request, reply) => {
    const name = (request.params as { "*": string })["*"];
    const asset = load()?.assets.get(name);
    if (!asset) return reply.code(404).send({ code: 5, message: "no such console asset", details: [] });
    return reply
      .header("cache-control", "public, max-age=31536000, immutable")
      .type(asset.type)
      .send(asset.body);
  });

  const page = (_request: unknown, reply: import("fastify").FastifyReply) => {
    const loaded = load();
    if (!loaded)
      return reply
        .code(503)
        .type("text/plain; charset=utf-8")
        .send("The console is not built: run `npm run build` (or `npm start`, which builds it).\n");
    return reply
      .header("content-security-policy", CONSOLE_CSP)
      .type("text/html; charset=utf-8")
      .send(loaded.index);
  };
  app.get(`${CONSOLE_PATH}/`, page);
  app.get(`${CONSOLE_PATH}/*`, page);
}
