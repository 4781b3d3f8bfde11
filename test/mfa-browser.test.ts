/**
 * Second factors in Debian's Chromium (playwright-core), for an organization whose login policy forces
 * MFA: the registration prompt without "Skip", enrolling an authenticator app from its QR code page (the
 * key read off the page, the code computed with otplib), the TOTP page of a later sign-in with a wrong and
 * a right code, recovery codes made on the account page and used once, and the choice page of a user with
 * two factors with the e-mail code's page, and the registration prompt with "Skip" where the instance's policy
 * asks for it without forcing it. Each sign-in is an OpenID Connect relying party's (openid-client) and its ID token says how
 * (`amr`, `acr`). Every page passes axe (WCAG 2 A/AA) and runs under the login UI's CSP: any console error
 * (a CSP violation is one) fails the test.
 *
 * Needs Chromium (`apt-get install -y chromium`, or CHROMIUM_PATH).
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { generate } from "otplib";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { authorizePath, createOidcApp, createProject } from "./authorize.ts";
import { addOrg, restClient, startPlatform, type TestPlatform } from "./helpers.ts";
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
/** The settings API as the instance's owner. */
let rest: ReturnType<typeof restClient>;
/** Console errors and failed requests of every page of the file. */
const problems: string[] = [];
const contexts: BrowserContext[] = [];

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
  // the organization forces a second factor; the instance's policy (no prompt) stays as it is
  const orgId = await addOrg(platform, "Acme");
  rest = restClient(platform, () => owner);
  const policy = await rest("PATCH", `/settings/v3alpha/login?ctx.org_id=${orgId}`, {
    json: { force_mfa: { set: true } },
  });
  assert.equal(policy.status, 200, policy.text);
  userId = await addHuman(platform, "dora", PASSWORD, { orgId, givenName: "Dora", familyName: "Brun" });
});

after(async () => {
  for (const context of contexts) await context.close();
  await browser?.close();
  await app?.close();
  await platform?.stop();
});

/** A fresh browser (no session) with its problems watched. */
async function freshPage(): Promise<Page> {
  const context = await browser.newContext({ locale: "en-US" });
  contexts.push(context);
  const page = await context.newPage();
  const watched = watchProblems(page);
  page.on("close", () => problems.push(...watched));
  return page;
}

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
      const tokens = await client.authorizationCodeGrant(config, new URL(page.url()), {
        pkceCodeVerifier: verifier,
        expectedState: state,
        expectedNonce: nonce,
        idTokenExpected: true,
      });
      return tokens.claims()!;
    },
  };
}

/** Starts an application's sign-in in `page` and gets past the login name and the password. */
async function signInWithPassword(page: Page, loginName = "dora") {
  const request = await authorization();
  await page.goto(request.url);
  await page.getByLabel("Login name").fill(loginName);
  await page.getByRole("button", { name: "Next" }).click();
  await page.getByLabel("Password", { exact: true }).fill(PASSWORD);
  await page.getByRole("button", { name: "Sign in" }).click();
  return request;
}

const heading = async (page: Page) => (await page.locator("h1").textContent())?.trim();
const alertText = async (page: Page) => (await page.getByRole("alert").textContent())?.trim();
const nowSeconds = () => Math.floor(Date.now() / 1000);

/** The key shown at enrolment (the TOTP secret, base32). */
let secret = "";
/** The code that activated the app (its time step is used up). */
let enrolmentCode = "";
/** The recovery codes shown on the account page. */
let recoveryCodes: string[] = [];
/** The signed-in browser of the second sign-in (a session that passed the TOTP). */
let signedIn: Page;

describe("second factors in Chromium", () => {
  it("forced MFA: the prompt without Skip, enrolling an authenticator app, a token with mfa", async () => {
    const page = await freshPage();
    const request = await signInWithPassword(page);

    assert.equal(await heading(page), "Set up a second factor");
    assert.match(
      (await page.locator(".intro").textContent()) ?? "",
      /Your organization requires a second factor/,
    );
    assert.equal(await page.getByRole("button", { name: "Skip for now" }).count(), 0);
    assert.deepEqual(await axeViolations(page), []);
    await page.getByRole("link", { name: "Authenticator app" }).click();

    assert.equal(await heading(page), "Set up an authenticator app");
    assert.equal(await page.locator(".totp-qr svg").count(), 1);
    assert.ok(await page.locator(".totp-qr svg").isVisible());
    secret = ((await page.locator(".totp-secret").textContent()) ?? "").replaceAll(/\s/g, "");
    assert.match(secret, /^[A-Z2-7]{16,}$/);
    assert.deepEqual(await axeViolations(page), []);
    enrolmentCode = await generate({ secret });
    await page.getByLabel("Authenticator code").fill(enrolmentCode);
    await page.getByRole("button", { name: "Activate" }).click();

    const claims = await request.redeem(page);
    assert.equal(claims.sub, userId);
    for (const method of ["pwd", "otp", "mfa"]) assert.ok((claims.amr as string[]).includes(method), method);
    assert.equal(claims.acr, "urn:platform:acr:mfa");
    // the enrolment counts as the session's TOTP check: the account page lets it change the factors
    await page.goto(`${platform.url}/`);
    const section = page.getByRole("region", { name: "Two-step verification" });
    assert.match((await section.textContent()) ?? "", /An authenticator app is set up\./);
    assert.equal(await section.getByRole("button", { name: "Create recovery codes" }).count(), 1);
    await page.close();
  });

  it("a later sign-in asks for the code: the used one is refused in an alert, a later step's completes", async () => {
    const page = await freshPage();
    const request = await signInWithPassword(page);

    // TOTP is the only factor: its page directly (no recovery codes yet)
    assert.equal(await heading(page), "Enter the code from your authenticator app");
    assert.equal(await page.getByRole("link", { name: "Use a recovery code" }).count(), 0);
    assert.deepEqual(await axeViolations(page), []);
    // the enrolment's code again: its time step is used up (or past)
    await page.getByLabel("Authenticator code").fill(enrolmentCode);
    await page.getByRole("button", { name: "Verify" }).click();
    assert.equal(await alertText(page), "The code is wrong or has expired.");
    assert.equal(await heading(page), "Enter the code from your authenticator app");
    const field = page.getByLabel("Authenticator code");
    assert.match((await field.getAttribute("aria-describedby")) ?? "", /form-error/);
    assert.deepEqual(await axeViolations(page), []);

    // the code of the step after the current one (±1 step is accepted), so surely after the enrolment's
    await field.fill(await generate({ secret, epoch: nowSeconds() + 30 }));
    await page.getByRole("button", { name: "Verify" }).click();
    const claims = await request.redeem(page);
    assert.equal(claims.sub, userId);
    assert.equal(claims.acr, "urn:platform:acr:mfa");
    for (const method of ["pwd", "otp", "mfa"]) assert.ok((claims.amr as string[]).includes(method), method);
    signedIn = page;
  });

  it("the account page makes recovery codes (shown once) and turns on codes by e-mail", async () => {
    const page = signedIn;
    await page.goto(`${platform.url}/`);
    const section = page.getByRole("region", { name: "Two-step verification" });
    assert.match((await section.textContent()) ?? "", /An authenticator app is set up\./);
    assert.ok(await page.getByRole("region", { name: "Passkeys and security keys" }).isVisible());
    assert.deepEqual(await axeViolations(page), []);

    await section.getByRole("button", { name: "Create recovery codes" }).click();
    recoveryCodes = (await page.locator(".recovery-codes code").allTextContents()).map((c) => c.trim());
    assert.equal(recoveryCodes.length, 10);
    assert.equal(new Set(recoveryCodes).size, 10);
    assert.match((await section.textContent()) ?? "", /10 recovery codes left\./);
    assert.deepEqual(await axeViolations(page), []);

    await section.getByRole("button", { name: "Turn on codes by e-mail" }).click();
    assert.match((await section.textContent()) ?? "", /On: a code is e-mailed to your address/);
    // shown once: a reload lists none
    assert.equal(await page.locator(".recovery-codes code").count(), 0);
    assert.deepEqual(await axeViolations(page), []);
    await page.reload();
    assert.equal(await page.locator(".recovery-codes code").count(), 0);
  });

  it("with two factors the choice page; a recovery code signs in once", async () => {
    const page = await freshPage();
    const request = await signInWithPassword(page);

    assert.equal(await heading(page), "Confirm it's you");
    assert.ok(await page.getByRole("link", { name: "Code from an authenticator app" }).isVisible());
    assert.ok(await page.getByRole("link", { name: "Code by e-mail" }).isVisible());
    assert.deepEqual(await axeViolations(page), []);
    // the e-mail code's page (showing it sends a code), then back to the choice
    await page.getByRole("link", { name: "Code by e-mail" }).click();
    assert.equal(await heading(page), "Enter the code from your e-mail");
    assert.ok(await page.getByLabel("Code", { exact: true }).isVisible());
    assert.ok(await page.getByRole("button", { name: "Send a new code" }).isVisible());
    assert.deepEqual(await axeViolations(page), []);
    await page.getByRole("link", { name: "Choose another method" }).click();
    assert.equal(await heading(page), "Confirm it's you");
    await page.getByRole("link", { name: "Use a recovery code" }).click();

    assert.equal(await heading(page), "Use a recovery code");
    assert.deepEqual(await axeViolations(page), []);
    await page.getByLabel("Recovery code", { exact: true }).fill(recoveryCodes[0]);
    await page.getByRole("button", { name: "Verify" }).click();
    const claims = await request.redeem(page);
    assert.equal(claims.sub, userId);
    assert.equal(claims.acr, "urn:platform:acr:mfa");
    for (const method of ["pwd", "otp", "mfa"]) assert.ok((claims.amr as string[]).includes(method), method);
    await page.close();

    // the same code again: refused; another one (typed in lower case, without its dash) works
    const again = await freshPage();
    const second = await signInWithPassword(again);
    assert.equal(await heading(again), "Confirm it's you");
    await again.getByRole("link", { name: "Use a recovery code" }).click();
    await again.getByLabel("Recovery code", { exact: true }).fill(recoveryCodes[0]);
    await again.getByRole("button", { name: "Verify" }).click();
    assert.equal(await alertText(again), "The code is wrong or has expired.");
    assert.deepEqual(await axeViolations(again), []);
    await again
      .getByLabel("Recovery code", { exact: true })
      .fill(recoveryCodes[1].replace("-", "").toLowerCase());
    await again.getByRole("button", { name: "Verify" }).click();
    assert.equal((await second.redeem(again)).sub, userId);
    await again.close();

    await signedIn.close();
    assert.deepEqual(problems, []);
  });

  it("not forced: the prompt with Skip (the instance's skip lifetime); skipped, a password sign-in", async () => {
    const policy = await rest("PATCH", "/settings/v3alpha/login", {
      json: { mfa_init_skip_lifetime: { set: "3600s" } },
    });
    assert.equal(policy.status, 200, policy.text);
    const ellaId = await addHuman(platform, "ella", PASSWORD, { givenName: "Ella", familyName: "Roth" });
    const page = await freshPage();
    const request = await signInWithPassword(page, "ella");

    assert.equal(await heading(page), "Set up a second factor");
    assert.match((await page.locator(".intro").textContent()) ?? "", /Protect your account/);
    assert.ok(await page.getByRole("link", { name: "Authenticator app" }).isVisible());
    assert.deepEqual(await axeViolations(page), []);
    await page.getByRole("button", { name: "Skip for now" }).click();
    const claims = await request.redeem(page);
    assert.equal(claims.sub, ellaId);
    assert.deepEqual(claims.amr, ["pwd"]);
    await page.close();
    assert.deepEqual(problems, []);
  });
});
