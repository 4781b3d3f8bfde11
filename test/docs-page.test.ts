/**
 * The /docs page in a real browser: a minimal Fastify app with registerDocs and the server's CSP on HTML,
 * opened in Debian's Chromium through playwright-core. The page must render the reference (operation
 * SetLanguages and its path) with no console error, no failed request and no request leaving the server.
 * Screenshot: .test-tmp/docs-page.png.
 *
 * Needs Chromium (`apt-get install -y chromium`, or CHROMIUM_PATH).
 */
import assert from "node:assert/strict";
import { existsSync, mkdirSync } from "node:fs";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { after, before, test } from "node:test";
import fastify, { type FastifyInstance } from "fastify";
import { type Browser, chromium, type Page } from "playwright-core";
import { registerDocs } from "../src/api/openapi/plugin.ts";
import { PlatformFeatureSettings } from "../src/gen/platform/settings/feature/v3alpha/feature_service_pb.ts";
import { PlatformLanguageSettings } from "../src/gen/platform/settings/language/v3alpha/language_service_pb.ts";
import { testTime, withScaledTimeouts } from "./time.ts";

// the policy src/server/server.ts sets on text/html responses
const CSP =
  "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'; form-action 'self' https: http:; base-uri 'none'";
const chromiumPath = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const outDir = process.env.PLATFORM_TEST_TMP ?? path.resolve(import.meta.dirname, "..", ".test-tmp");

let app: FastifyInstance;
let origin: string;
let browser: Browser;

before(async () => {
  app = fastify();
  registerDocs(app, { services: [PlatformLanguageSettings, PlatformFeatureSettings] });
  app.addHook("onSend", async (_req, reply, payload) => {
    const type = reply.getHeader("content-type");
    if (typeof type === "string" && type.startsWith("text/html"))
      reply.header("content-security-policy", CSP);
    return payload;
  });
  await app.listen({ host: "127.0.0.1", port: 0 });
  origin = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  assert.ok(
    existsSync(chromiumPath),
    `Chromium not found at ${chromiumPath}: install it (apt-get install -y chromium) or set CHROMIUM_PATH`,
  );
  browser = withScaledTimeouts(
    await chromium.launch({
      executablePath: chromiumPath,
      args: [
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
      ],
    }),
  );
});

after(async () => {
  await browser?.close();
  await app?.close();
});

test("GET /docs is HTML with a title and the CSP, GET /openapi.json names this server", async () => {
  const res = await fetch(`${origin}/docs`);
  assert.equal(res.status, 200);
  assert.match(res.headers.get("content-type") ?? "", /^text\/html/);
  assert.equal(res.headers.get("content-security-policy"), CSP);
  const html = await res.text();
  assert.match(html, /<title>[^<]+<\/title>/);
  assert.match(html, /<h1>[^<]+<\/h1>/);
  assert.doesNotMatch(html, /<script>|<script [^>]*>[^<]/, "no inline script");
  assert.doesNotMatch(html, /https?:\/\//, "no external URL");

  const doc = (await (await fetch(`${origin}/openapi.json`)).json()) as {
    openapi: string;
    servers: { url: string }[];
    paths: Record<string, unknown>;
  };
  assert.equal(doc.openapi, "3.1.0");
  assert.deepEqual(doc.servers, [{ url: origin }]);
  assert.ok(doc.paths["/settings/v3alpha/languages"]);

  const asset = await fetch(`${origin}${html.match(/src="([^"]*swagger-ui-bundle\.js[^"]*)"/)?.[1]}`);
  assert.equal(asset.status, 200);
  assert.match(asset.headers.get("content-type") ?? "", /javascript/);
  assert.equal((await fetch(`${origin}/docs/assets/nope.js`)).status, 404);
});

test("the /docs page renders the reference in Chromium, offline and under the CSP", async () => {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const problems: string[] = [];
  page.on("console", (m) => {
    if (m.type() === "error") problems.push(`console error: ${m.text()}`);
  });
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  page.on("requestfailed", (r) => problems.push(`request failed: ${r.url()} ${r.failure()?.errorText}`));
  page.on("response", (r) => {
    if (r.status() >= 400) problems.push(`HTTP ${r.status()}: ${r.url()}`);
  });
  // nothing may leave this server (no CDN, fonts, validator badge, telemetry)
  await page.route("**/*", (route) => {
    const url = route.request().url();
    if (url.startsWith(`${origin}/`) || url.startsWith("data:")) return route.continue();
    problems.push(`external request: ${url}`);
    return route.abort();
  });

  await page.goto(`${origin}/docs`, { waitUntil: "load" });
  assert.match(await page.title(), /Platform API/);
  assert.equal(await page.locator("h1").first().isVisible(), true);
  await waitForText(page, ["SetLanguages", "/settings/v3alpha/languages"]);
  await page.waitForLoadState("networkidle");
  // open SetLanguages: its query parameters, body example and schema render too
  await page.locator('[id$="SetLanguages"] .opblock-summary').first().click();
  await waitForText(page, ["Request body", "default_language", "ctx.instance_domain"]);

  mkdirSync(outDir, { recursive: true });
  await page.screenshot({ path: path.join(outDir, "docs-page.png"), fullPage: true });
  const text = await bodyText(page);
  assert.match(text, /Sets or unsets language settings in a context/);
  assert.match(text, /ResolveLanguages/);
  assert.deepEqual(problems, []);
  await page.close();
});

/** The page's text; Swagger UI breaks long paths with zero-width spaces, which are removed. */
async function bodyText(page: Page): Promise<string> {
  return ((await page.locator("body").textContent()) ?? "").replace(/\u200b/g, "");
}

/** Waits until the page's text contains every needle. */
async function waitForText(page: Page, needles: string[], timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + testTime(timeoutMs);
  for (;;) {
    const text = await bodyText(page);
    const missing = needles.filter((n) => !text.includes(n));
    if (missing.length === 0) return;
    if (Date.now() > deadline) assert.fail(`the page does not show ${missing.join(", ")}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}
