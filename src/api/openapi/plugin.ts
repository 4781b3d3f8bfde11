/**
 * API documentation routes (no authentication):
 *
 * - `GET /openapi.json`: the OpenAPI 3.1 document of the services (./build.ts), built once at
 *   registration; `servers` is the URL the request came to (`<protocol>://<Host>`; relative when the Host
 *   header is unusable), so "Try it out" and generated clients talk to the instance that served it.
 * - `GET /docs`: an HTML page rendering that document with Swagger UI. Every asset is served from
 *   `/docs/assets/` (Swagger UI from the `swagger-ui-dist` npm package, our ./assets/docs.{js,css}); nothing
 *   is loaded from the internet. The page uses no inline script (the configuration is in data attributes
 *   read by docs.js), so it works under the server's CSP `default-src 'self'; img-src 'self' data:;
 *   style-src 'self' 'unsafe-inline'` (Swagger UI sets inline styles, which that policy allows).
 *
 * Usage: `registerDocs(app, { services: [PlatformLanguageSettings, PlatformFeatureSettings, ...] })`.
 */
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { gzipSync } from "node:zlib";
import type { DescService } from "@bufbuild/protobuf";
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { buildOpenApi, DEFAULT_INFO, type JsonObject } from "./build.ts";
import type { Comments } from "./comments.ts";

export interface DocsOptions {
  /** The services whose REST routes are documented. */
  services: DescService[];
  /** `info.title` and page title; default "Platform API". */
  title?: string;
  /** `info.version`; default the package version. */
  version?: string;
  /** Proto comments; default the committed src/api/openapi/comments.json. */
  comments?: Comments;
}

/** The routes registerDocs serves. */
export const DOCS_ROUTES = { openapi: "/openapi.json", page: "/docs", assets: "/docs/assets/" } as const;

interface Asset {
  body: Buffer;
  gzip?: Buffer;
  contentType: string;
  /** Short content hash, used as cache buster in the page's URLs. */
  hash: string;
}

const JS = "text/javascript; charset=utf-8";
const CSS = "text/css; charset=utf-8";

function loadAssets(): Map<string, Asset> {
  const swaggerDir = path.dirname(createRequire(import.meta.url).resolve("swagger-ui-dist/package.json"));
  const ownDir = path.join(import.meta.dirname, "assets");
  const files: [string, string, string][] = [
    ["swagger-ui-bundle.js", path.join(swaggerDir, "swagger-ui-bundle.js"), JS],
    ["swagger-ui.css", path.join(swaggerDir, "swagger-ui.css"), CSS],
    ["docs.js", path.join(ownDir, "docs.js"), JS],
    ["docs.css", path.join(ownDir, "docs.css"), CSS],
  ];
  const assets = new Map<string, Asset>();
  for (const [name, file, contentType] of files) {
    // source maps are not shipped: drop the reference so developer tools do not ask for them
    const text = readFileSync(file, "utf8").replace(/\n\/[/*]# sourceMappingURL=\S+(?: \*\/)?\s*$/, "\n");
    const body = Buffer.from(text, "utf8");
    const hash = createHash("sha256").update(body).digest("hex").slice(0, 12);
    assets.set(name, { body, contentType, hash });
  }
  return assets;
}

function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function page(title: string, assets: Map<string, Asset>): string {
  const url = (name: string) => `${DOCS_ROUTES.assets}${name}?v=${assets.get(name)?.hash ?? ""}`;
  const t = escapeHtml(title);
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${t} reference</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="${url("swagger-ui.css")}">
<link rel="stylesheet" href="${url("docs.css")}">
</head>
<body>
<header class="docs-header">
<h1>${t} reference</h1>
<p>REST/JSON mapping of every API operation; the same operations are served over gRPC, gRPC-web and Connect.
OpenAPI 3.1 document: <a href="${DOCS_ROUTES.openapi}">${DOCS_ROUTES.openapi}</a>.</p>
</header>
<noscript><p class="docs-header">This page needs JavaScript. The OpenAPI document is at
<a href="${DOCS_ROUTES.openapi}">${DOCS_ROUTES.openapi}</a>.</p></noscript>
<main id="api-reference" data-spec-url="${DOCS_ROUTES.openapi}"></main>
<script src="${url("swagger-ui-bundle.js")}"></script>
<script src="${url("docs.js")}"></script>
</body>
</html>
`;
}

/** `<protocol>://<host>` of the request, or undefined when the Host header is not a plain host[:port]. */
function requestOrigin(request: FastifyRequest): string | undefined {
  const host = request.host;
  if (!/^(?:[A-Za-z0-9](?:[A-Za-z0-9.-]{0,252})|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?$/.test(host))
    return undefined;
  const protocol = request.protocol === "https" ? "https" : "http";
  return `${protocol}://${host}`;
}

function acceptsGzip(request: FastifyRequest): boolean {
  const ae = request.headers["accept-encoding"];
  return typeof ae === "string" && /\bgzip\b/.test(ae);
}

/** Registers `GET /openapi.json`, `GET /docs` and `GET /docs/assets/*` on the app. */
export function registerDocs(app: FastifyInstance, options: DocsOptions): void {
  const title = options.title ?? DEFAULT_INFO.title;
  const doc: JsonObject = buildOpenApi(options.services, {
    title,
    version: options.version ?? DEFAULT_INFO.version,
    comments: options.comments,
  });
  const assets = loadAssets();
  const html = page(title, assets);
  const relative = JSON.stringify({ ...doc, servers: [{ url: "/" }] });
  const byOrigin = new Map<string, string>();

  app.get(DOCS_ROUTES.openapi, async (request, reply) => {
    const origin = requestOrigin(request);
    let body = relative;
    if (origin !== undefined) {
      body = byOrigin.get(origin) ?? JSON.stringify({ ...doc, servers: [{ url: origin }] });
      if (byOrigin.size < 64) byOrigin.set(origin, body);
    }
    return reply
      .header("content-type", "application/json; charset=utf-8")
      .header("cache-control", "no-cache")
      .send(body);
  });

  app.get(DOCS_ROUTES.page, async (_request, reply) => {
    return reply
      .header("content-type", "text/html; charset=utf-8")
      .header("cache-control", "no-cache")
      .send(html);
  });

  app.get<{ Params: { name: string } }>(
    `${DOCS_ROUTES.assets}:name`,
    async (request: FastifyRequest<{ Params: { name: string } }>, reply: FastifyReply) => {
      const asset = assets.get(request.params.name);
      if (!asset) {
        return reply.code(404).header("content-type", "text/plain; charset=utf-8").send("not found");
      }
      reply
        .header("content-type", asset.contentType)
        .header("cache-control", "public, max-age=86400")
        .header("etag", `"${asset.hash}"`)
        .header("vary", "accept-encoding");
      if (request.headers["if-none-match"] === `"${asset.hash}"`) return reply.code(304).send();
      if (acceptsGzip(request) && asset.body.length > 1024) {
        asset.gzip ??= gzipSync(asset.body);
        return reply.header("content-encoding", "gzip").send(asset.gzip);
      }
      return reply.send(asset.body);
    },
  );
}
