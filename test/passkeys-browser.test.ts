/**
 * Passkeys in Debian's Chromium (playwright-core) with the DevTools Protocol's virtual authenticator (a
 * platform authenticator with resident keys and user verification): registering a passkey on the account
 * page, signing out, then signing in to an OIDC application with the passkey alone (passwordless), the ID
 * token saying how (`amr`). The pages run under the login UI's CSP: any violation fails the test.
 *
 * Needs Chromium (`apt-get install -y chromium`, or CHROMIUM_PATH).
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { Browser, Page } from "playwright-core";
import { authorizePath, createOidcApp, createProject } from "./authorize.ts";
import { startPlatform, type TestPlatform } from "./helpers.ts";
import { addHuman } from "./login.ts";
import {
  axeViolations,
  type ClientApp,
  launchChromium,
  PASSWORD,
  startClientApp,
  watchProblems,
} from "./login-browser.ts";
import { client, discover, ownerToken } from "./oidc.ts";

let platform: TestPlatform;
let browser: Browser;
let app: ClientApp;
let clientId: string;
let config: client.Configuration;
let userId: string;

before(async () => {
  [platform, browser, app] = await Promise.all([
    startPlatform({ listen: true }),
    launchChromium(),
    startClientApp(),
  ]);
  const owner = await ownerToken(platform);
  const projectId = await createProject(platform, owner, "Shop");
  const created = await createOidcApp(platform, owner, projectId, "shop", {
    redirect_uris: [app.callback],
    response_types: ["OIDC_RESPONSE_TYPE_CODE"],
    grant_types: ["OIDC_GRANT_TYPE_AUTHORIZATION_CODE"],
    app_type: "OIDC_APP_TYPE_WEB",
    auth_method: "OIDC_AUTH_METHOD_TYPE_BASIC",
  });
  clientId = created.clientId;
  config = await discover(platform.url, clientId, client.ClientSecretBasic(created.clientSecret!));
  userId = await addHuman(platform, "carol", PASSWORD, { givenName: "Carol", familyName: "Weber" });
});

after(async () => {
  await browser?.close();
  await app?.close();
  await platform?.stop();
});

/** An authorization request of the app with PKCE, state and nonce, and the redemption of its code. */
async function authorization() {
  const verifier = client.randomPKCECodeVerifier();
  const state = client.randomState();
  const nonce = client.randomNonce();
  const path = authorizePath({
    client_id: clientId,
    redirect_uri: app.callback,
    response_type: "code",
    scope: "openid profile",
    state,
    nonce,
    code_challenge: await client.calculatePKCECodeChallenge(verifier),
    code_challenge_method: "S256",
  });
  return {
    url: `${platform.url}${path}`,
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

const heading = async (page: Page) => (await page.locator("h1").textContent())?.trim();

async function userFactorRows() {
  return platform.db.query<{ name: string; type: string; state: number }>(
    "SELECT name, type, state FROM user_factors WHERE user_id = $1 ORDER BY created_at",
    [userId],
  );
}

describe("passkeys in Chromium", () => {
  it("registers a passkey on the account page, then signs in to an application with it alone", async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    const problems = watchProblems(page);
    const cdp = await context.newCDPSession(page);
    await cdp.send("WebAuthn.enable");
    const { authenticatorId } = await cdp.send("WebAuthn.addVirtualAuthenticator", {
      options: {
        protocol: "ctap2",
        transport: "internal",
        hasResidentKey: true,
        hasUserVerification: true,
        isUserVerified: true,
        automaticPresenceSimulation: true,
      },
    });

    // Sign in with the password to the account page, then add a passkey there.
    await page.goto(`${platform.url}/ui/login/loginname`);
    await page.getByLabel("Login name").fill("carol");
    await page.getByRole("button", { name: "Next" }).click();
    await page.getByLabel("Password", { exact: true }).fill(PASSWORD);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.waitForURL(`${platform.url}/`);
    const section = page.getByRole("region", { name: "Passkeys and security keys" });
    assert.equal((await section.getByText("No passkeys or security keys yet.").count()) > 0, true);
    await section.getByRole("link", { name: "Add a passkey" }).click();
    assert.equal(await heading(page), "Add a passkey");
    assert.deepEqual(await axeViolations(page), []);
    await page.getByLabel("Name").fill("Laptop");
    await page.getByRole("button", { name: "Register" }).click();
    await page.waitForURL(`${platform.url}/?account=*`);
    assert.equal((await page.getByRole("status").textContent())?.trim(), "The key was added.");
    assert.ok(await section.getByRole("button", { name: "Remove Laptop" }).isVisible());
    const { credentials } = await cdp.send("WebAuthn.getCredentials", { authenticatorId });
    assert.equal(credentials.length, 1);
    assert.equal(credentials[0].isResidentCredential, true);
    const rows = await userFactorRows();
    assert.deepEqual(
      rows.filter((r) => Number(r.state) === 2).map((r) => [r.name, r.type]),
      [["Laptop", "passkey"]],
    );

    // Sign out of every account.
    await page.getByRole("button", { name: "Sign out of every account" }).click();
    assert.equal(await heading(page), "You are signed out");

    // An application's sign-in: the login-name page offers the passkey in the name's autofill
    // (conditional mediation), which the virtual authenticator answers at once: no password.
    const first = await authorization();
    await page.goto(first.url);
    const tokens = await first.redeem(page);
    const claims = tokens.claims()!;
    assert.equal(claims.sub, userId);
    // a device-bound key that verified the user: two factors, no password
    assert.deepEqual(claims.amr, ["hwk", "user", "mfa"]);

    // Signed out again; now the link "Sign in with a passkey" (the login-name page's script held back, so
    // that its conditional request does not answer first).
    await page.goto(`${platform.url}/`);
    await page.getByRole("button", { name: "Sign out of every account" }).click();
    const script = "**/ui/assets/webauthn.*.js";
    await page.route(script, (route) => route.abort());
    const second = await authorization();
    await page.goto(second.url);
    assert.equal(await heading(page), "Sign in");
    assert.equal(await page.getByLabel("Login name").getAttribute("autocomplete"), "username webauthn");
    await page.unroute(script);
    await page.getByRole("link", { name: "Sign in with a passkey" }).click();
    assert.equal(await heading(page), "Sign in with a passkey");
    assert.deepEqual(await axeViolations(page), []);
    await page.getByRole("button", { name: "Continue with a passkey" }).click();
    const again = await second.redeem(page);
    assert.equal(again.claims()!.sub, userId);
    assert.deepEqual(again.claims()!.amr, ["hwk", "user", "mfa"]);
    const used = await platform.db.query<{ last_used_at: Date | null; data: unknown }>(
      "SELECT last_used_at, data FROM user_factors WHERE user_id = $1 AND type = 'passkey' AND state = 2",
      [userId],
    );
    const data =
      typeof used[0].data === "string" ? JSON.parse(used[0].data) : (used[0].data as { counter: number });
    assert.ok(used[0].last_used_at);
    assert.ok(data.counter >= 2, "the counter of both sign-ins kept");

    // No console error (a CSP violation is one), no failed request but the script held back on purpose.
    const heldBack = (p: string) =>
      /webauthn\.[0-9a-f]+\.js net::ERR_FAILED/.test(p) ||
      /login(name)?\?authRequest=.*Failed to load resource: net::ERR_FAILED/.test(p);
    assert.deepEqual(
      problems.filter((p) => !heldBack(p)),
      [],
    );
    await context.close();
  });
});
