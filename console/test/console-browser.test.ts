/**
 * The administration console in Debian's Chromium (playwright-core): /ui/console sends the browser to the
 * instance's login UI (authorization code + PKCE as the instance's "Console" app), the first instance
 * admin signs in, lands on Home, whose counts are the public search RPCs' total_result, and signs out
 * through end_session. Also: the Content-Security-Policy and cache headers, no token in localStorage or
 * sessionStorage, every API call carrying the access token, the renewal with a rotated refresh token
 * before the access token expires (the page's clock moved on; no reload), and the tokens dead after
 * signing out. One server and one Chromium for the file.
 *
 * Needs Chromium (`apt-get install -y chromium`, or CHROMIUM_PATH).
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { Browser, Page } from "playwright-core";
import { createProject } from "../../test/authorize.ts";
import {
  ADMIN_PASSWORD,
  addOrg,
  type RestCall,
  restClient,
  startPlatform,
  type TestPlatform,
} from "../../test/helpers.ts";
import { axeViolations, launchChromium, watchProblems } from "../../test/login-browser.ts";
import { ownerToken } from "../../test/oidc.ts";
import { freePort } from "../../test/process.ts";

let platform: TestPlatform;
let browser: Browser;
let rest: RestCall;

before(async () => {
  // A fixed port: the Console app's redirect URI is made for the external URL at setup.
  const port = await freePort();
  [platform, browser] = await Promise.all([
    startPlatform({
      listen: true,
      env: { PLATFORM_PORT: String(port), PLATFORM_EXTERNAL_PORT: String(port) },
    }),
    launchChromium(),
  ]);
  const owner = await ownerToken(platform);
  rest = restClient(platform, () => owner);
  await addOrg(platform, "Acme");
  await createProject(platform, owner, "Shop");
  await createProject(platform, owner, "Blog");
});

after(async () => {
  await browser?.close();
  await platform?.stop();
});

async function waitUntil(condition: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function total(path: string): Promise<string> {
  const reply = await rest("POST", `/resources/v3alpha/${path}/_search?query.limit=1`, { json: [] });
  assert.equal(reply.status, 200, reply.text);
  return String(reply.json.details.total_result ?? reply.json.details.totalResult);
}

describe("console", () => {
  it("is served with a strict Content-Security-Policy, index.html not cached, assets immutable", async () => {
    const page = await fetch(`${platform.url}/ui/console/`);
    assert.equal(page.status, 200);
    const csp = page.headers.get("content-security-policy") ?? "";
    assert.match(csp, /default-src 'none'/);
    assert.match(csp, /script-src 'self'(;|$)/, "scripts of this origin only: no inline script, no eval");
    assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/);
    assert.match(page.headers.get("cache-control") ?? "", /no-store|no-cache/);
    const html = await page.text();
    assert.doesNotMatch(html, /<script(?![^>]*\bsrc=)/, "no inline script in index.html");
    const script = /<script type="module" src="([^"]+)"/.exec(html)?.[1];
    assert.ok(script, html);
    assert.match(script, /^\/ui\/console\/assets\/main-[A-Z0-9]+\.js$/);
    const asset = await fetch(`${platform.url}${script}`);
    assert.equal(asset.status, 200);
    assert.match(asset.headers.get("content-type") ?? "", /javascript/);
    assert.match(asset.headers.get("cache-control") ?? "", /immutable/);
    // a screen's path answers the same page (the router picks the screen in the browser)
    assert.equal((await fetch(`${platform.url}/ui/console/some/screen`)).status, 200);
    assert.equal((await fetch(`${platform.url}/ui/console/assets/main-NOPE.js`)).status, 404);
    assert.equal((await fetch(`${platform.url}/ui/console/assets/%2e%2e%2findex.html`)).status, 404);

    const config = (await (await fetch(`${platform.url}/ui/console/config.json`)).json()) as Record<
      string,
      string
    >;
    assert.equal(config.issuer, platform.url);
    assert.match(config.client_id, /@console$/);
  });

  it("signs in with PKCE, shows Home with the API's counts, keeps tokens out of storage, signs out", async () => {
    const context = await browser.newContext();
    const page: Page = await context.newPage();
    const problems = watchProblems(page);
    // a clock of the page's own, to reach the renewal a minute before the access token's 12 h run out
    await page.clock.install();
    const tokens: { access_token?: string; refresh_token?: string; id_token?: string }[] = [];
    const authorizations: string[] = [];
    const apiCalls: { url: string; authorization?: string }[] = [];
    let authorizeUrl = "";
    page.on("request", (request) => {
      const url = new URL(request.url());
      if (url.pathname === "/oauth/v2/authorize") authorizeUrl = request.url();
      if (url.pathname.startsWith("/platform.resources."))
        apiCalls.push({ url: url.pathname, authorization: request.headers().authorization });
      if (url.pathname === "/oidc/v1/end_session") authorizations.push(request.url());
    });
    page.on("response", async (response) => {
      if (new URL(response.url()).pathname === "/oauth/v2/token" && response.status() === 200)
        tokens.push(await response.json());
    });

    await page.goto(`${platform.url}/ui/console`);
    await page.getByLabel("Login name").waitFor({ timeout: 30_000 });
    const authorize = new URL(authorizeUrl);
    assert.equal(authorize.searchParams.get("code_challenge_method"), "S256");
    assert.ok(authorize.searchParams.get("code_challenge"));
    assert.equal(authorize.searchParams.get("redirect_uri"), `${platform.url}/ui/console/callback`);
    assert.match(authorize.searchParams.get("scope") ?? "", /urn:platform:iam:org:project:id:platform:aud/);
    assert.match(authorize.searchParams.get("scope") ?? "", /offline_access/);

    await page.getByLabel("Login name").fill("admin");
    await page.getByRole("button", { name: "Next" }).click();
    await page.getByLabel("Password", { exact: true }).fill(ADMIN_PASSWORD);
    await page.getByRole("button", { name: "Sign in" }).click();

    await page.waitForURL(`${platform.url}/ui/console/`, { timeout: 30_000 });
    await page.getByRole("heading", { name: "Home" }).waitFor();
    await page.getByTestId("count-users").locator("dd").waitFor({ timeout: 30_000 });
    assert.equal(await page.getByTestId("user-name").textContent(), "Platform Administrator");
    assert.deepEqual(await axeViolations(page), [], "the shell and Home are axe-clean");

    const [organizations, users, projects] = await Promise.all([
      total("organizations"),
      total("users"),
      total("projects"),
    ]);
    assert.equal(organizations, "2");
    assert.equal(projects, "3"); // the management project, Shop, Blog
    assert.equal(await page.getByTestId("count-organizations").locator("dd").textContent(), organizations);
    assert.equal(await page.getByTestId("count-users").locator("dd").textContent(), users);
    assert.equal(await page.getByTestId("count-projects").locator("dd").textContent(), projects);

    assert.equal(tokens.length, 1, "one code redeemed");
    const { access_token: accessToken, refresh_token: refreshToken, id_token: idToken } = tokens[0];
    assert.ok(accessToken && refreshToken && idToken, "access, refresh and ID token");
    assert.ok(apiCalls.length >= 3, JSON.stringify(apiCalls));
    for (const call of apiCalls) assert.equal(call.authorization, `Bearer ${accessToken}`, call.url);

    // a string: tsx would wrap a function's inner functions in a helper the page does not have
    const stored: { local: string[]; session: string[]; cookie: string } = await page.evaluate(`(() => {
      const all = (storage) => Array.from({ length: storage.length }, (_, i) => storage.key(i) + "=" + storage.getItem(storage.key(i)));
      return { local: all(localStorage), session: all(sessionStorage), cookie: document.cookie };
    })()`);
    const everything = JSON.stringify(stored);
    for (const token of [accessToken, refreshToken, idToken])
      assert.ok(!everything.includes(token), `a token is stored: ${everything}`);
    assert.deepEqual(stored.local, []);
    assert.deepEqual(stored.session, [], "the sign-in's verifier and state are gone after the callback");
    assert.doesNotMatch(page.url(), /code=|state=/);

    // the token is the administrator's, for the public API
    const me = await rest("POST", "/resources/v3alpha/users/_search?query.limit=1", {
      json: [],
      token: accessToken,
    });
    assert.equal(me.status, 200, me.text);

    // renewal: a minute before expiry, the refresh token is redeemed (and rotated), with no reload
    await page.evaluate("window.__sameDocument = true");
    await page.clock.fastForward("11:59:30");
    await waitUntil(() => tokens.length === 2, "the refresh-token grant");
    const renewed = tokens[1];
    assert.ok(renewed.access_token && renewed.access_token !== accessToken);
    assert.ok(renewed.refresh_token && renewed.refresh_token !== refreshToken, "the refresh token rotated");
    assert.equal(await page.evaluate("window.__sameDocument"), true, "no reload");
    assert.equal(page.url(), `${platform.url}/ui/console/`);
    const storedAfter = (await page.evaluate(
      "JSON.stringify([localStorage.length, sessionStorage.length])",
    )) as string;
    assert.equal(storedAfter, "[0,0]");

    await page.getByRole("button", { name: "Sign out" }).click();
    await page.getByText("You have signed out.").waitFor({ timeout: 30_000 });
    assert.equal(authorizations.length, 1);
    const endSession = new URL(authorizations[0]);
    assert.ok(
      [idToken, renewed.id_token].includes(endSession.searchParams.get("id_token_hint") ?? ""),
      "the ID token as id_token_hint",
    );
    assert.equal(endSession.searchParams.get("post_logout_redirect_uri"), `${platform.url}/ui/console/`);
    for (const token of [accessToken, renewed.access_token]) {
      const afterSignOut = await rest("POST", "/resources/v3alpha/users/_search?query.limit=1", {
        json: [],
        token,
      });
      assert.equal(afterSignOut.status, 401, "signing out ended the session and its tokens");
    }
    assert.deepEqual(problems, []);
    await context.close();
  });
});
