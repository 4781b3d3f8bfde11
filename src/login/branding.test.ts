/**
 * Branding in the login UI over HTTP: the stylesheet, logo, footer and login names of an organization's
 * pages, the cache that a change clears, and the assets' headers. The pages in Chromium:
 * test/branding-browser.test.ts.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { image, patchBranding, solidPng, svgLogo } from "../../test/branding.ts";
import { addMachineUser, addOrg, restClient } from "../../test/helpers.ts";
import {
  addHuman,
  createAuthRequest,
  HttpBrowser,
  type LoginTestPlatform,
  startLoginPlatform,
} from "../../test/login.ts";
import { SVG_POLICY } from "./branding-assets.ts";
import { contrast, MIN_CONTRAST, paletteVariables, readableOn } from "./branding-style.ts";

const PASSWORD = "Correct-horse-1";

describe("branding in the login UI", () => {
  let platform: LoginTestPlatform;
  let owner: string;
  let instanceId: string;
  let orgId: string;
  const rest = restClient(
    () => platform,
    () => owner,
  );
  const stylesheetOf = (html: string) =>
    /<link rel="stylesheet" href="(\/assets\/v3alpha\/[^"]+\.css)">/.exec(html)?.[1];
  const orgPage = async () => {
    const authRequest = await createAuthRequest(platform, {
      orgId,
      scope: ["openid", `urn:platform:iam:org:id:${orgId}`],
    });
    return new HttpBrowser(platform.url).follow(`/ui/login?authRequest=${authRequest.id}`);
  };

  before(async () => {
    platform = await startLoginPlatform();
    instanceId = platform.bootstrapResult!.instanceId;
    ({ token: owner } = await addMachineUser(platform, {
      username: "owner",
      membership: { contextType: "instance", roles: ["IAM_OWNER"] },
    }));
    orgId = await addOrg(platform, "Acme");
    await addHuman(platform, "carol", PASSWORD, { orgId });
  });
  after(() => platform.stop());

  it("an unbranded login links no branding stylesheet and shows the instance's mark and footer", async () => {
    const page = await new HttpBrowser(platform.url).follow("/ui/login/loginname");
    assert.equal(page.status, 200);
    assert.equal(stylesheetOf(page.text), undefined);
    assert.match(page.text, /<span class="brand-mark" aria-hidden="true">/);
    assert.match(page.text, /<footer class="footer">\n<p>Secured by /);
    assert.match(page.text, /<link rel="icon" href="data:,">/);
  });

  it("pages of an organization's sign-in show its colours, logo and icon; others the instance's", async () => {
    await patchBranding(rest, { primary_color: { set: "#6a1b9a" } });
    const logo = svgLogo("#e65100");
    await patchBranding(
      rest,
      {
        primary_color: { set: "#b71c1c" },
        background_color: { set: "#fff8e1" },
        disable_watermark: { set: true },
        logo: image(logo, "image/svg+xml"),
        icon: image(solidPng("#e65100"), "image/png"),
      },
      `?ctx.org_id=${orgId}`,
    );

    const instancePage = await new HttpBrowser(platform.url).follow("/ui/login/loginname");
    const instanceCss = stylesheetOf(instancePage.text);
    assert.match(
      instanceCss ?? "",
      new RegExp(`^/assets/v3alpha/instances/${instanceId}/branding/-/[0-9a-f]{16}\\.css$`),
    );
    assert.match(instancePage.text, /<footer class="footer">/);
    const css = await fetch(`${platform.url}${instanceCss}`);
    assert.equal(css.status, 200);
    assert.equal(css.headers.get("cache-control"), "public, max-age=31536000, immutable");
    assert.equal(css.headers.get("content-type"), "text/css; charset=utf-8");
    assert.match(await css.text(), /--accent: #6a1b9a;/);

    const page = await orgPage();
    assert.equal(page.status, 200, page.text);
    const orgCss = stylesheetOf(page.text);
    assert.match(orgCss ?? "", new RegExp(`/branding/${orgId}/[0-9a-f]{16}\\.css$`));
    const body = await (await fetch(`${platform.url}${orgCss}`)).text();
    assert.match(body, /--accent: #b71c1c;/);
    assert.match(body, /--card: #fff8e1;/);
    // the footer keeps the language picker, without the watermark
    assert.doesNotMatch(page.text, /Secured by/);
    assert.doesNotMatch(page.text, /brand-mark/);
    const logoUrl = /<img class="brand-logo" src="([^"]+)" alt="[^"]+">/.exec(page.text)?.[1];
    assert.match(logoUrl ?? "", /\/images\/[0-9a-f]{64}\.svg$/);
    assert.deepEqual(Buffer.from(await (await fetch(`${platform.url}${logoUrl}`)).arrayBuffer()), logo);
    assert.match(page.text, /<link rel="icon" href="\/assets\/v3alpha\/instances\/[^"]+\.png">/);
    // the page's policy is unchanged: styles from this origin only
    assert.match(page.headers.get("content-security-policy") ?? "", /style-src 'self';/);
  });

  it("a change shows on the next page (the cache is cleared); the old stylesheet is gone", async () => {
    const before = stylesheetOf((await orgPage()).text);
    await patchBranding(rest, { primary_color: { set: "#00695c" } }, `?ctx.org_id=${orgId}`);
    const after = stylesheetOf((await orgPage()).text);
    assert.notEqual(after, before);
    assert.match(await (await fetch(`${platform.url}${after}`)).text(), /--accent: #00695c;/);
    assert.equal((await fetch(`${platform.url}${before}`)).status, 404);
  });

  it("hide_login_name_suffix shows the user's login names without @domain", async () => {
    const signIn = async () => {
      const browser = new HttpBrowser(platform.url);
      const loginPage = await browser.follow("/ui/login/loginname");
      const passwordPage = await browser.submit(loginPage, "/ui/login/loginname", { loginName: "carol" });
      const account = await browser.submit(passwordPage, "/ui/login/password", { password: PASSWORD });
      assert.match(account.text, /<h1 id="page-title">Your account<\/h1>/);
      return account.text;
    };
    assert.match(await signIn(), /<span class="account-login">carol@acme\.[^<]+<\/span>/);
    await patchBranding(rest, { hide_login_name_suffix: { set: true } }, `?ctx.org_id=${orgId}`);
    const page = await signIn();
    assert.match(page, /<span class="account-login">carol<\/span>/);
    assert.doesNotMatch(page, /account-login">carol@/);
    // the account page is the user's organization's: its stylesheet
    assert.match(stylesheetOf(page) ?? "", new RegExp(`/branding/${orgId}/`));
  });

  it("serves images with their type, an immutable cache, nosniff, and SVG under a sandboxing policy", async () => {
    const png = solidPng("#0d47a1");
    await patchBranding(rest, {
      logo: image(png, "image/png"),
      logo_dark: image(svgLogo("#90caf9"), "image/svg+xml"),
    });
    const { settings } = (await rest("GET", "/settings/v3alpha/branding")).json as {
      settings: Record<string, { value: string }>;
    };
    const pngAnswer = await fetch(`${platform.url}${settings.logo_url.value}`);
    assert.equal(pngAnswer.status, 200);
    assert.equal(pngAnswer.headers.get("content-type"), "image/png");
    assert.equal(pngAnswer.headers.get("cache-control"), "public, max-age=31536000, immutable");
    assert.equal(pngAnswer.headers.get("x-content-type-options"), "nosniff");
    assert.equal(pngAnswer.headers.get("content-security-policy"), null);
    assert.deepEqual(Buffer.from(await pngAnswer.arrayBuffer()), png);

    const svgAnswer = await fetch(`${platform.url}${settings.logo_dark_url.value}`);
    assert.equal(svgAnswer.headers.get("content-type"), "image/svg+xml");
    assert.equal(svgAnswer.headers.get("content-security-policy"), SVG_POLICY);
    assert.equal(SVG_POLICY, "default-src 'none'; style-src 'unsafe-inline'; sandbox");
    assert.equal(svgAnswer.headers.get("x-content-type-options"), "nosniff");

    const [, sha, ext] = /\/images\/([0-9a-f]{64})\.(png)$/.exec(settings.logo_url.value)!;
    const unknown = await fetch(
      `${platform.url}/assets/v3alpha/instances/${instanceId}/images/${"0".repeat(64)}.png`,
    );
    assert.equal(unknown.status, 404);
    assert.equal(unknown.headers.get("cache-control"), "no-store");
    const wrongExtension = `/assets/v3alpha/instances/${instanceId}/images/${sha}.svg`;
    assert.equal((await fetch(`${platform.url}${wrongExtension}`)).status, 404);
    const otherInstance = `/assets/v3alpha/instances/123/images/${sha}.${ext}`;
    assert.equal((await fetch(`${platform.url}${otherInstance}`)).status, 404);
    const badCss = `/assets/v3alpha/instances/${instanceId}/branding/-/${"a".repeat(16)}.css`;
    assert.equal((await fetch(`${platform.url}${badCss}`)).status, 404);
    // no authentication needed
    const head = await fetch(`${platform.url}${settings.logo_url.value}`, { method: "HEAD" });
    assert.equal(head.status, 200);
  });
});

describe("branding contrast", () => {
  it("moves text colours that fail 4.5:1 toward black or white until they pass", () => {
    assert.equal(readableOn("#111827", "#ffffff"), "#111827", "a readable colour stays");
    for (const [font, background] of [
      ["#ffff00", "#ffffff"],
      ["#777777", "#888888"],
      ["#202020", "#000000"],
      ["#e65100", "#fff8e1"],
    ]) {
      const adjusted = readableOn(font, background);
      assert.notEqual(adjusted, font);
      assert.ok(contrast(adjusted, background) >= MIN_CONTRAST, `${font} on ${background} → ${adjusted}`);
    }
    const variables = paletteVariables({
      primary: "#ffeb3b",
      background: "#ffffff",
      warn: "#ffcdd2",
      font: "#eeeeee",
    });
    for (const name of ["--text", "--muted", "--accent", "--danger"])
      assert.ok(contrast(variables[name], "#ffffff") >= MIN_CONTRAST, `${name} ${variables[name]}`);
    assert.ok(contrast(variables["--accent-text"], variables["--accent"]) >= MIN_CONTRAST);
  });
});
