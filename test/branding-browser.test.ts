/**
 * Branding in Debian's Chromium (playwright-core): an organization's sign-in page in its colours (computed
 * styles) with its logo, the forced dark theme, an SVG with a script that runs neither in the page (<img>)
 * nor opened directly at its URL (the sandboxing CSP), and screenshots of a branded login in light and dark
 * (PLATFORM_SCREENSHOTS_DIR, e.g. docs/images; default .test-tmp).
 *
 * Needs Chromium (`apt-get install -y chromium`, or CHROMIUM_PATH).
 */
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import type { Browser, Page } from "playwright-core";
import { image, patchBranding, solidPng, svgLogo, svgWithScript } from "./branding.ts";
import { addMachineUser, addOrg, restClient, testTime } from "./helpers.ts";
import { createAuthRequest, type LoginTestPlatform, startLoginPlatform } from "./login.ts";
import { axeViolations, launchChromium, watchProblems } from "./login-browser.ts";

const shotsDir = path.resolve(
  process.env.PLATFORM_SCREENSHOTS_DIR ??
    process.env.PLATFORM_TEST_TMP ??
    path.join(import.meta.dirname, "..", ".test-tmp"),
);

/** A local server counting the requests to `/beacon` and serving `svg` at `/plain.svg` without any policy. */
async function startBeaconServer(svg: () => Buffer) {
  const hits: string[] = [];
  const server = http.createServer((request, response) => {
    if (request.url?.startsWith("/beacon")) hits.push(request.url);
    if (request.url === "/plain.svg") {
      response.writeHead(200, { "content-type": "image/svg+xml" });
      response.end(svg());
      return;
    }
    response.writeHead(204, { "access-control-allow-origin": "*" });
    response.end();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    hits,
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

describe("branding in Chromium", () => {
  let platform: LoginTestPlatform;
  let browser: Browser;
  let owner: string;
  let beacon: Awaited<ReturnType<typeof startBeaconServer>>;
  const rest = restClient(
    () => platform,
    () => owner,
  );
  const scriptSvg = () => svgWithScript(`${beacon.url}/beacon`);

  before(async () => {
    [platform, browser, beacon] = await Promise.all([
      startLoginPlatform(),
      launchChromium(),
      startBeaconServer(() => scriptSvg()),
    ]);
    ({ token: owner } = await addMachineUser(platform, {
      username: "owner",
      membership: { contextType: "instance", roles: ["IAM_OWNER"] },
    }));
  });
  after(async () => {
    await browser?.close();
    await beacon?.close();
    await platform?.stop();
  });

  /** The sign-in page of an auth request for `orgId` in a fresh browser profile. */
  async function signInPage(orgId: string, colorScheme: "light" | "dark" = "light") {
    const context = await browser.newContext({ colorScheme, viewport: { width: 1200, height: 820 } });
    const page = await context.newPage();
    const problems = watchProblems(page);
    const authRequest = await createAuthRequest(platform, {
      orgId,
      scope: ["openid", `urn:platform:iam:org:id:${orgId}`],
    });
    await page.goto(`${platform.url}/ui/login?authRequest=${authRequest.id}`);
    await page.waitForLoadState("networkidle");
    return { page, problems, close: () => context.close() };
  }

  const style = (page: Page, selector: string, property: string) =>
    page.evaluate(
      `getComputedStyle(document.querySelector(${JSON.stringify(selector)})).getPropertyValue(${JSON.stringify(property)})`,
    ) as Promise<string>;

  it("an organization's page shows its colours, logo and title (computed styles, a loaded image, no CSP violation)", async () => {
    const orgId = await addOrg(platform, "Acme");
    await patchBranding(
      rest,
      {
        primary_color: { set: "#b71c1c" },
        background_color: { set: "#fff8e1" },
        font_color: { set: "#3e2723" },
        disable_watermark: { set: true },
        logo: image(solidPng("#b71c1c", 120, 30), "image/png"),
      },
      `?ctx.org_id=${orgId}`,
    );
    const texts = await rest("PATCH", `/settings/v3alpha/texts/en?ctx.org_id=${orgId}`, {
      json: { texts: { "login.loginname.title": { set: "Sign in to Acme" } } },
    });
    assert.equal(texts.status, 200, texts.text);
    const { page, problems, close } = await signInPage(orgId);
    try {
      assert.equal(await page.locator("h1").textContent(), "Sign in to Acme");
      assert.equal(await style(page, "button[type=submit]", "background-color"), "rgb(183, 28, 28)");
      assert.equal(await style(page, ".card", "background-color"), "rgb(255, 248, 225)");
      assert.equal(await style(page, "h1", "color"), "rgb(62, 39, 35)");
      const logo = await page.evaluate(
        `(() => { const img = document.querySelector("img.brand-logo"); return img && { w: img.naturalWidth, h: img.naturalHeight, complete: img.complete }; })()`,
      );
      assert.deepEqual(logo, { w: 120, h: 30, complete: true });
      assert.equal(await page.locator("footer", { hasText: "Secured by" }).count(), 0, "no watermark");
      assert.deepEqual(problems, []);
      assert.deepEqual(await axeViolations(page), [], "the branded page keeps its contrast and semantics");
    } finally {
      await close();
    }
  });

  it("theme_mode DARK shows the dark colours even to a browser preferring light", async () => {
    const orgId = await addOrg(platform, "Nightly");
    await patchBranding(
      rest,
      { theme_mode: { set: "THEME_MODE_DARK" }, background_color_dark: { set: "#1a1033" } },
      `?ctx.org_id=${orgId}`,
    );
    const { page, problems, close } = await signInPage(orgId, "light");
    try {
      assert.equal(await style(page, ".card", "background-color"), "rgb(26, 16, 51)");
      assert.equal(await style(page, "html", "color-scheme"), "dark");
      assert.deepEqual(problems, []);
    } finally {
      await close();
    }
  });

  it("an SVG's script runs neither in the login page nor opened directly at its URL", async () => {
    // the detection works: the same SVG served without the policy runs its script
    const control = await (await browser.newContext()).newPage();
    await control.goto(`${beacon.url}/plain.svg`);
    await control.waitForFunction("window.svgRan === true");
    await control.context().close();
    const deadline = Date.now() + testTime(5_000);
    while (beacon.hits.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    assert.ok(beacon.hits.length > 0, "the control SVG made its request");
    beacon.hits.length = 0;

    const orgId = await addOrg(platform, "Scripted");
    await patchBranding(rest, { logo: image(scriptSvg(), "image/svg+xml") }, `?ctx.org_id=${orgId}`);
    const { settings } = (await rest("GET", `/settings/v3alpha/branding?ctx.org_id=${orgId}`)).json as {
      settings: Record<string, { value: string }>;
    };
    const url = `${platform.url}${settings.logo_url.value}`;

    const { page, close } = await signInPage(orgId);
    try {
      assert.equal(
        await page.evaluate(`document.querySelector("img.brand-logo").naturalWidth`),
        10,
        "the logo is shown",
      );
      // opened directly, as a document
      const requests: string[] = [];
      page.on("request", (r) => requests.push(r.url()));
      const answer = await page.goto(url);
      assert.equal(answer?.status(), 200);
      assert.equal(
        answer?.headers()["content-security-policy"],
        "default-src 'none'; style-src 'unsafe-inline'; sandbox",
      );
      await page.waitForTimeout(500);
      assert.equal(await page.evaluate("typeof window.svgRan"), "undefined");
      assert.deepEqual(
        requests.filter((r) => r.startsWith(beacon.url)),
        [],
        "no request was even attempted",
      );
      assert.equal(
        await page.evaluate(`document.documentElement.localName`),
        "svg",
        "the document is the SVG",
      );
    } finally {
      await close();
    }
    assert.deepEqual(beacon.hits, [], "the beacon heard nothing");
  });

  it("screenshots of a branded login in light and dark", async () => {
    const orgId = await addOrg(platform, "Acme Shots");
    await patchBranding(
      rest,
      {
        primary_color: { set: "#b23c17" },
        background_color: { set: "#fffaf5" },
        font_color: { set: "#2b1d16" },
        warn_color: { set: "#a61b1b" },
        primary_color_dark: { set: "#ff9e7a" },
        background_color_dark: { set: "#1f1a17" },
        font_color_dark: { set: "#f5ece6" },
        logo: image(svgLogo("#b23c17", "Acme"), "image/svg+xml"),
        logo_dark: image(svgLogo("#ff9e7a", "Acme"), "image/svg+xml"),
        icon: image(solidPng("#b23c17", 16, 16), "image/png"),
      },
      `?ctx.org_id=${orgId}`,
    );
    mkdirSync(shotsDir, { recursive: true });
    for (const scheme of ["light", "dark"] as const) {
      const { page, problems, close } = await signInPage(orgId, scheme);
      try {
        assert.deepEqual(problems, []);
        const expected = scheme === "light" ? "rgb(178, 60, 23)" : "rgb(255, 158, 122)";
        assert.equal(await style(page, "button[type=submit]", "background-color"), expected);
        const shown = await page.evaluate(`document.querySelector("img.brand-logo").currentSrc`);
        assert.match(String(shown), /\.svg$/);
        await page.evaluate("document.activeElement && document.activeElement.blur()");
        await page.screenshot({ path: path.join(shotsDir, `branding-login-${scheme}.png`), fullPage: true });
      } finally {
        await close();
      }
    }
  });
});
