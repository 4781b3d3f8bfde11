/**
 * Sign-ins to a real application in Debian's Chromium (playwright-core): the authorization endpoint, the
 * login UI and the end-session endpoint together, with an OIDC app made through the apps API whose
 * redirect URI is a local HTTP server, and the tokens redeemed and verified by openid-client. Ends with
 * the demo relying party (demo/rp.ts) signing in end to end. One Chromium for the file.
 *
 * Needs Chromium (`apt-get install -y chromium`, or CHROMIUM_PATH).
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { startDemo } from "../demo/rp.ts";
import { authorizePath, createOidcApp, createProject } from "./authorize.ts";
import { startPlatform, type TestPlatform, tempDir } from "./helpers.ts";
import { addHuman } from "./login.ts";
import { type ClientApp, launchChromium, PASSWORD, startClientApp, watchProblems } from "./login-browser.ts";
import { client, discover, ownerToken } from "./oidc.ts";

let platform: TestPlatform;
let browser: Browser;
let app: ClientApp;
let owner: string;
let clientId: string;
let config: client.Configuration;
let aliceId: string;

before(async () => {
  [platform, browser, app] = await Promise.all([
    startPlatform({ listen: true }),
    launchChromium(),
    startClientApp(),
  ]);
  owner = await ownerToken(platform);
  const projectId = await createProject(platform, owner, "Shop");
  const created = await createOidcApp(platform, owner, projectId, "shop", {
    redirect_uris: [app.callback],
    post_logout_redirect_uris: [app.callback.replace("/callback", "/signed-out")],
    response_types: ["OIDC_RESPONSE_TYPE_CODE"],
    grant_types: ["OIDC_GRANT_TYPE_AUTHORIZATION_CODE", "OIDC_GRANT_TYPE_REFRESH_TOKEN"],
    app_type: "OIDC_APP_TYPE_WEB",
    auth_method: "OIDC_AUTH_METHOD_TYPE_BASIC",
  });
  clientId = created.clientId;
  config = await discover(platform.url, clientId, client.ClientSecretBasic(created.clientSecret!));
  aliceId = await addHuman(platform, "alice", PASSWORD, { givenName: "Alice", familyName: "Martin" });
  await addHuman(platform, "bob", PASSWORD, { givenName: "Bob", familyName: "Keller" });
});

after(async () => {
  await browser?.close();
  await app?.close();
  await platform?.stop();
});

/** An authorization request of the app with PKCE, state and nonce (`extra` added). */
async function authorization(extra: Record<string, string> = {}) {
  const verifier = client.randomPKCECodeVerifier();
  const state = client.randomState();
  const nonce = client.randomNonce();
  const path = authorizePath({
    client_id: clientId,
    redirect_uri: app.callback,
    response_type: "code",
    scope: "openid profile email offline_access",
    state,
    nonce,
    code_challenge: await client.calculatePKCECodeChallenge(verifier),
    code_challenge_method: "S256",
    ...extra,
  });
  return {
    url: `${platform.url}${path}`,
    /** The page is back at the app: redeem its code (openid-client checks iss, state, nonce, the ID token). */
    redeem: async (page: Page) => {
      await page.waitForURL(`${app.callback}?**`);
      return client.authorizationCodeGrant(config, new URL(page.url()), {
        pkceCodeVerifier: verifier,
        expectedState: state,
        expectedNonce: nonce,
        idTokenExpected: true,
      });
    },
  };
}

async function newPage(options: Parameters<Browser["newContext"]>[0] = {}) {
  const context: BrowserContext = await browser.newContext(options);
  const page = await context.newPage();
  return { context, page, problems: watchProblems(page) };
}

async function signIn(page: Page, loginName: string) {
  await page.getByLabel("Login name").fill(loginName);
  await page.getByRole("button", { name: "Next" }).click();
  await page.getByLabel("Password", { exact: true }).fill(PASSWORD);
  await page.getByRole("button", { name: "Sign in" }).click();
}

const heading = async (page: Page) => (await page.locator("h1").textContent())?.trim();

describe("signing in to an application in Chromium", () => {
  it("code + PKCE through the login UI; a second authorization reuses the session without a page", async () => {
    const { context, page, problems } = await newPage();
    const first = await authorization();
    await page.goto(first.url);
    assert.equal(await heading(page), "Sign in");
    await signIn(page, "alice");
    const tokens = await first.redeem(page);
    assert.equal(tokens.claims()!.sub, aliceId);
    assert.ok(tokens.refresh_token);
    const info = await client.fetchUserInfo(config, tokens.access_token, aliceId);
    assert.equal(info.name, "Alice Martin");

    const documents: string[] = [];
    page.on("response", (r) => {
      if (r.request().resourceType() === "document") documents.push(`${r.status()} ${r.url()}`);
    });
    const second = await authorization();
    await page.goto(second.url);
    const again = await second.redeem(page);
    assert.equal(again.claims()!.sid, tokens.claims()!.sid, "the same session");
    assert.deepEqual(
      documents.map((d) => d.replace(/\?.*/, "")),
      [`302 ${platform.url}/oauth/v2/authorize`, `200 ${app.callback}`],
      "one redirect, no page",
    );
    assert.deepEqual(problems, []);
    await context.close();
  });

  it("prompt=login asks for the password again; prompt=select_account lets the person pick between two", async () => {
    const { context, page } = await newPage();
    const first = await authorization();
    await page.goto(first.url);
    await signIn(page, "alice");
    const before = (await first.redeem(page)).claims()!;
    await new Promise((resolve) => setTimeout(resolve, 1100)); // auth_time counts whole seconds

    const login = await authorization({ prompt: "login" });
    await page.goto(login.url);
    assert.equal(await heading(page), "Enter your password");
    await page.getByLabel("Password", { exact: true }).fill(PASSWORD);
    await page.getByRole("button", { name: "Sign in" }).click();
    const after = (await login.redeem(page)).claims()!;
    assert.equal(after.sid, before.sid);
    assert.ok((after.auth_time as number) > (before.auth_time as number), "a new auth_time");

    // a second person in the same browser ("Use another account"), then the picker
    const other = await authorization({ prompt: "select_account" });
    await page.goto(other.url);
    assert.equal(await heading(page), "Choose an account");
    await page.getByRole("link", { name: "Use another account" }).click();
    await signIn(page, "bob");
    assert.equal((await other.redeem(page)).claims()!.sub !== aliceId, true);

    const pick = await authorization({ prompt: "select_account" });
    await page.goto(pick.url);
    assert.equal(await page.locator(".account-button").count(), 2);
    await page.getByRole("button", { name: /Continue as Alice Martin/ }).click();
    assert.equal((await pick.redeem(page)).claims()!.sub, aliceId);
    await context.close();
  });

  it("prompt=create registers a new person, who completes the flow", async () => {
    const { context, page, problems } = await newPage();
    const request = await authorization({ prompt: "create" });
    await page.goto(request.url);
    assert.equal(await heading(page), "Create your account");
    await page.getByLabel("Username").fill("nina");
    await page.getByLabel("First name").fill("Nina");
    await page.getByLabel("Last name").fill("Weber");
    await page.getByLabel("E-mail address").fill("nina@example.com");
    await page.getByLabel("Password", { exact: true }).fill(PASSWORD);
    await page.getByLabel("Confirm password").fill(PASSWORD);
    await page.getByRole("button", { name: "Create account" }).click();
    // the e-mail's code comes next (no SMTP provider here: the page says so); it may wait
    await page.getByRole("heading", { name: "Verify your e-mail address" }).waitFor();
    await page.getByRole("link", { name: "Skip for now" }).click();
    const tokens = await request.redeem(page);
    const info = await client.fetchUserInfo(config, tokens.access_token, tokens.claims()!.sub);
    assert.equal(info.preferred_username, "nina");
    assert.equal(info.email, "nina@example.com");
    assert.deepEqual(problems, []);
    await context.close();
  });

  it("shows German for ui_locales=de and for Accept-Language: de", async () => {
    const byParameter = await newPage();
    await byParameter.page.goto((await authorization({ ui_locales: "de" })).url);
    assert.equal(await byParameter.page.locator("html").getAttribute("lang"), "de");
    assert.equal(await heading(byParameter.page), "Anmelden");
    await byParameter.context.close();

    const byBrowser = await newPage({ locale: "de-DE" });
    await byBrowser.page.goto((await authorization()).url);
    assert.equal(await heading(byBrowser.page), "Anmelden");
    await byBrowser.page.getByLabel("Anmeldename").fill("alice");
    await byBrowser.page.getByRole("button", { name: "Weiter" }).click();
    assert.equal(await heading(byBrowser.page), "Passwort eingeben");
    await byBrowser.context.close();
  });

  it("end_session signs out and returns to the registered post-logout URI with state", async () => {
    const { context, page, problems } = await newPage();
    const request = await authorization();
    await page.goto(request.url);
    await signIn(page, "alice");
    const tokens = await request.redeem(page);
    const signedOut = app.callback.replace("/callback", "/signed-out");
    const logout = client.buildEndSessionUrl(config, {
      id_token_hint: tokens.id_token!,
      post_logout_redirect_uri: signedOut,
      state: "see-you",
    });
    await page.goto(logout.href);
    await page.waitForURL(`${signedOut}?state=see-you`);
    assert.equal((await client.tokenIntrospection(config, tokens.access_token)).active, false);
    // signed out: the next authorization shows the login, prompt=none answers login_required
    const silent = await authorization({ prompt: "none" });
    await page.goto(silent.url);
    await page.waitForURL(`${app.callback}?**`);
    assert.equal(new URL(page.url()).searchParams.get("error"), "login_required");
    assert.deepEqual(problems, []);
    await context.close();
  });

  it("end_session without id_token_hint asks first (without JavaScript): another site's form ends nothing, Cancel keeps the session, Sign out ends it", async () => {
    const { context, page, problems } = await newPage({ javaScriptEnabled: false });
    const request = await authorization();
    await page.goto(request.url);
    await signIn(page, "alice");
    const tokens = await request.redeem(page);

    // another site (127.0.0.1 is not localhost's site) posts a sign-out form with a made-up token: Chromium
    // sends no SameSite=Lax cookie with it, so the endpoint continues as a GET, which asks
    const otherSite = app.callback.replace("/callback", "/prize");
    await page.route(otherSite, (route) =>
      route.fulfill({
        contentType: "text/html; charset=utf-8",
        body: `<!doctype html><html lang="en"><title>Prize</title><form method="post" action="${platform.url}/oidc/v1/end_session"><input type="hidden" name="client_id" value="${clientId}"><input type="hidden" name="csrf" value="forged"><button>Claim your prize</button></form></html>`,
      }),
    );
    await page.goto(otherSite);
    await page.getByRole("button", { name: "Claim your prize" }).click();
    await page.waitForURL(`${platform.url}/oidc/v1/end_session?**`);
    assert.equal(await heading(page), "Sign out of Platform?");
    assert.match((await page.locator(".sessions").textContent()) ?? "", /Alice Martin/);
    assert.equal((await client.tokenIntrospection(config, tokens.access_token)).active, true);

    // the application's own request (no hint): Cancel goes back to it, nothing ended
    const signedOut = app.callback.replace("/callback", "/signed-out");
    const logout = client.buildEndSessionUrl(config, { post_logout_redirect_uri: signedOut, state: "later" });
    await page.goto(logout.href);
    assert.equal(await heading(page), "Sign out of Platform?");
    await page.getByRole("link", { name: "Cancel" }).click();
    await page.waitForURL(`${signedOut}?state=later`);
    assert.equal((await client.tokenIntrospection(config, tokens.access_token)).active, true);
    const silent = await authorization({ prompt: "none" });
    await page.goto(silent.url);
    assert.equal((await silent.redeem(page)).claims()!.sub, aliceId, "still signed in");

    // confirmed: signed out, back at the application with state
    await page.goto(logout.href);
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.waitForURL(`${signedOut}?state=later`);
    assert.equal((await client.tokenIntrospection(config, tokens.access_token)).active, false);
    const after = await authorization({ prompt: "none" });
    await page.goto(after.url);
    await page.waitForURL(`${app.callback}?**`);
    assert.equal(new URL(page.url()).searchParams.get("error"), "login_required");
    assert.deepEqual(problems, []);
    await context.close();
  });

  it("the demo relying party signs in end to end and shows the ID token claims and userinfo", async () => {
    const dir = tempDir("demo-");
    const demo = await startDemo({
      platformUrl: platform.url,
      port: 0,
      stateFile: `${dir}/client.json`,
      pat: owner,
    });
    try {
      const { context, page, problems } = await newPage();
      await page.goto(demo.url);
      await page.getByRole("link", { name: "Sign in with Platform" }).click();
      assert.equal(await heading(page), "Sign in");
      await signIn(page, "alice");
      await page.waitForURL(`${demo.url}/`);
      assert.equal(await heading(page), "Hello, Alice Martin");
      const claims = await page.locator("#claims").textContent();
      assert.match(claims ?? "", new RegExp(aliceId));
      assert.match((await page.locator("#userinfo").textContent()) ?? "", /alice@example\.com/);
      await page.getByRole("link", { name: "Sign out" }).click();
      await page.waitForURL(`${demo.url}/?state=*`);
      assert.ok(await page.getByRole("link", { name: "Sign in with Platform" }).isVisible());
      assert.deepEqual(problems, []);
      await context.close();
      // a second run finds its app in the state file and needs no token
      await demo.close();
      const rerun = await startDemo({
        platformUrl: platform.url,
        port: Number(new URL(demo.url).port),
        stateFile: `${dir}/client.json`,
      });
      assert.equal(rerun.clientId, demo.clientId);
      await rerun.close();
    } finally {
      await demo.close().catch(() => {});
    }
  });
});
