/**
 * The login UI in Debian's Chromium (playwright-core): the flows a person goes through, ending at the
 * test completer (src/login/testing.ts) with the right session, and an accessibility check of every page
 * (axe-core in the page, in light and dark mode, plus the keyboard order). One Chromium for the file.
 *
 * Needs Chromium (`apt-get install -y chromium`, or CHROMIUM_PATH).
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { changeSettings } from "../src/domain/settings/commands.ts";
import { LOGIN } from "../src/domain/settings/login.ts";
import type { AuthRequestInput } from "../src/login/index.ts";
import { TestCompleter } from "../src/login/testing.ts";
import { addHuman, createAuthRequest, type LoginTestPlatform, startLoginPlatform } from "./login.ts";
import {
  addWalkUsers,
  axeViolations,
  type ClientApp,
  keyboardOrder,
  launchChromium,
  PASSWORD,
  requirePasswordChange,
  startClientApp,
  visitLoginPages,
  watchProblems,
} from "./login-browser.ts";

let platform: LoginTestPlatform;
let browser: Browser;
let client: ClientApp;

before(async () => {
  [platform, browser, client] = await Promise.all([
    startLoginPlatform({ PLATFORM_MAX_PASSWORD_ATTEMPTS: "3" }),
    launchChromium(),
    startClientApp(),
  ]);
  await addWalkUsers(platform); // alice, bob
});

after(async () => {
  await browser?.close();
  await client?.close();
  await platform?.stop();
});

/** An auth request of the client application (its redirect URI is the local client). */
const authRequest = (overrides: Partial<AuthRequestInput> = {}) =>
  createAuthRequest(platform, { redirectUri: client.callback, ...overrides });

/** A fresh browser profile (cookies). */
async function newPage(options: Parameters<Browser["newContext"]>[0] = {}) {
  const context: BrowserContext = await browser.newContext(options);
  const page = await context.newPage();
  const problems = watchProblems(page);
  return { context, page, problems };
}

/** The auth request's completion: the page is at the client with its code, the completer saw `username`. */
async function assertCompleted(page: Page, authRequestId: string, username: string) {
  await page.waitForURL(`${client.callback}?**`);
  const url = new URL(page.url());
  assert.equal(url.searchParams.get("code"), TestCompleter.codeFor(authRequestId));
  const completion = platform.completer.completionOf(authRequestId);
  assert.ok(completion, "the completer was called");
  assert.equal(completion.session.username, username);
  return completion;
}

async function signIn(page: Page, loginName: string, password = PASSWORD) {
  await page.getByLabel("Login name").fill(loginName);
  await page.getByRole("button", { name: "Next" }).click();
  await page.getByLabel("Password", { exact: true }).fill(password);
  await page.getByRole("button", { name: "Sign in" }).click();
}

const heading = async (page: Page) => (await page.locator("h1").textContent())?.trim();
const alert = async (page: Page) => (await page.locator('[role="alert"]').textContent())?.trim();

describe("login UI in Chromium", () => {
  it("login name → password → back to the client, by keyboard; the next request reuses the session without a page", async () => {
    const { context, page, problems } = await newPage();
    const first = await authRequest();
    await page.goto(`${platform.url}/ui/login?authRequest=${first.id}`);
    assert.equal(await heading(page), "Sign in");
    // the login name field has the focus; Enter submits
    await page.keyboard.type("alice");
    await page.keyboard.press("Enter");
    await page.waitForURL(/\/ui\/login\/password/);
    assert.equal(await heading(page), "Enter your password");
    await page.keyboard.type(PASSWORD);
    await page.keyboard.press("Enter");
    const completion = await assertCompleted(page, first.id, "alice");

    // a second request: straight back to the client, no login page rendered
    const second = await authRequest();
    const documents: string[] = [];
    page.on("response", (r) => {
      if (r.request().resourceType() === "document") documents.push(`${r.status()} ${r.url()}`);
    });
    await page.goto(`${platform.url}/ui/login?authRequest=${second.id}`);
    const reused = await assertCompleted(page, second.id, "alice");
    assert.equal(reused.session.id, completion.session.id);
    assert.deepEqual(
      documents.map((d) => d.replace(/\?.*/, "")),
      [`302 ${platform.url}/ui/login`, `200 ${client.callback}`],
      "one redirect, no page",
    );
    assert.deepEqual(problems, []);
    await context.close();
  });

  it("gives a wrong password, an unknown login name and a locked-out account the same message; with ignore_unknown_usernames off it says an unknown name is unknown", async () => {
    await addHuman(platform, "mallory", PASSWORD);
    const instanceId = platform.bootstrapResult!.instanceId;
    const setting = (set: Record<string, boolean>, reset: string[]) =>
      changeSettings(platform.eventStore, {
        category: LOGIN,
        owner: { type: 2 as const, id: instanceId },
        instanceId,
        creator: "test",
        set,
        reset,
      });
    const { context, page, problems } = await newPage();
    await setting({ ignore_unknown_usernames: false }, []);
    await page.goto(`${platform.url}/ui/login?authRequest=${(await authRequest()).id}`);
    await page.getByLabel("Login name").fill("no-such-user");
    await page.getByRole("button", { name: "Next" }).click();
    await page.locator(".alert").waitFor();
    assert.equal(await alert(page), "No account was found for this login name.");
    assert.equal(await page.getByLabel("Login name").getAttribute("aria-invalid"), "true");

    // the default (on): the login-name page tells nothing, the password page answers like a wrong password
    await setting({}, ["ignore_unknown_usernames"]);
    await page.goto(`${platform.url}/ui/login?authRequest=${(await authRequest()).id}`);
    await signIn(page, "no-such-user", "Wrong-Passw0rd!");
    const unknown = await alert(page);
    await page.goto(`${platform.url}/ui/login?authRequest=${(await authRequest()).id}`);
    await signIn(page, "mallory", "Wrong-Passw0rd!");
    assert.equal(await alert(page), unknown);
    assert.equal(unknown, "The login name or password is wrong.");
    // the error is announced and tied to the field
    assert.equal(await page.getByLabel("Password", { exact: true }).getAttribute("aria-invalid"), "true");
    assert.equal(
      await page.getByLabel("Password", { exact: true }).getAttribute("aria-describedby"),
      "form-error",
    );

    // the third wrong password (PLATFORM_MAX_PASSWORD_ATTEMPTS=3) locks the password checks out for a
    // while; then even the right password gets the same message
    for (const password of ["Wrong-Passw0rd!", "Wrong-Passw0rd!", PASSWORD]) {
      await page.getByLabel("Password", { exact: true }).fill(password);
      await page.getByRole("button", { name: "Sign in" }).click();
      await page.waitForURL(/\/ui\/login\/password/);
      assert.equal(await alert(page), unknown);
    }
    assert.deepEqual(problems, []);
    await context.close();
  });

  it("a password set with change_required asks for a new one, with the policy, before the sign-in completes", async () => {
    const userId = await addHuman(platform, "renate", PASSWORD);
    await requirePasswordChange(platform, userId, PASSWORD);
    const { context, page, problems } = await newPage();
    const request = await authRequest();
    await page.goto(`${platform.url}/ui/login?authRequest=${request.id}`);
    await signIn(page, "renate");
    assert.equal(await heading(page), "Change your password");
    assert.equal(platform.completer.completionOf(request.id), undefined, "not signed in yet");
    assert.match((await page.locator("#password-policy").textContent()) ?? "", /at least 8 characters/);
    // the new password field has the focus
    await page.keyboard.type("Renewed-Passw0rd!");
    await page.getByLabel("Confirm new password").fill("Renewed-Passw0rd?");
    await page.getByRole("button", { name: "Change password" }).click();
    assert.equal(await page.locator("#passwordConfirm-error").textContent(), "The passwords do not match.");
    await page.getByLabel("New password", { exact: true }).fill("Renewed-Passw0rd!");
    await page.getByLabel("Confirm new password").fill("Renewed-Passw0rd!");
    await page.getByRole("button", { name: "Change password" }).click();
    await assertCompleted(page, request.id, "renate");
    assert.deepEqual(problems, []);
    await context.close();

    // the new password is the one now, and no change is asked any more
    const next = await newPage();
    const again = await authRequest();
    await next.page.goto(`${platform.url}/ui/login?authRequest=${again.id}`);
    await signIn(next.page, "renate", "Renewed-Passw0rd!");
    await assertCompleted(next.page, again.id, "renate");
    await next.context.close();
  });

  it("prompt=login asks for the password again", async () => {
    const { context, page } = await newPage();
    const first = await authRequest();
    await page.goto(`${platform.url}/ui/login?authRequest=${first.id}`);
    await signIn(page, "bob");
    const before = await assertCompleted(page, first.id, "bob");

    const again = await authRequest({ prompt: ["login"] });
    await page.goto(`${platform.url}/ui/login?authRequest=${again.id}`);
    assert.equal(await heading(page), "Enter your password");
    assert.match((await page.locator(".account-chip").textContent()) ?? "", /Bob Keller/);
    await page.getByLabel("Password", { exact: true }).fill(PASSWORD);
    await page.getByRole("button", { name: "Sign in" }).click();
    const after = await assertCompleted(page, again.id, "bob");
    assert.equal(after.session.id, before.session.id);
    assert.ok(after.session.authTime! > before.session.authTime!, "a new auth_time");
    await context.close();
  });

  it("prompt=select_account with two signed-in people lets the person pick, or use another account", async () => {
    const { context, page } = await newPage();
    for (const name of ["alice", "bob"]) {
      await page.goto(
        `${platform.url}/ui/login?authRequest=${(await authRequest({ prompt: ["login"] })).id}`,
      );
      if ((await heading(page)) === "Enter your password")
        await page.getByRole("link", { name: "Use another account" }).click();
      await signIn(page, name);
      await page.waitForURL(`${client.callback}?**`);
    }
    const pick = await authRequest({ prompt: ["select_account"] });
    await page.goto(`${platform.url}/ui/login?authRequest=${pick.id}`);
    assert.equal(await heading(page), "Choose an account");
    const accounts = page.locator(".account-button");
    assert.equal(await accounts.count(), 2);
    await page.getByRole("button", { name: /Continue as Alice Martin/ }).click();
    await assertCompleted(page, pick.id, "alice");

    // "Use another account" leads to the login name, and a third person signs in
    await addHuman(platform, "carla", PASSWORD);
    const another = await authRequest({ prompt: ["select_account"] });
    await page.goto(`${platform.url}/ui/login?authRequest=${another.id}`);
    await page.getByRole("link", { name: "Use another account" }).click();
    assert.equal(await heading(page), "Sign in");
    await signIn(page, "carla");
    await assertCompleted(page, another.id, "carla");
    await context.close();
  });

  it("prompt=create registers a new person, who completes the flow", async () => {
    const { context, page, problems } = await newPage();
    const request = await authRequest({ prompt: ["create"] });
    await page.goto(`${platform.url}/ui/login?authRequest=${request.id}`);
    assert.equal(await heading(page), "Create your account");
    assert.match((await page.locator("#password-policy").textContent()) ?? "", /at least 8 characters/);
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
    const completion = await assertCompleted(page, request.id, "nina");
    assert.equal(completion.session.displayName, "Nina Weber");
    assert.equal(completion.session.email, "nina@example.com");
    assert.deepEqual(problems, []);
    await context.close();
  });

  it("shows German for ui_locales=de and for Accept-Language: de", async () => {
    const { context, page } = await newPage();
    const request = await authRequest({ uiLocales: ["de"] });
    await page.goto(`${platform.url}/ui/login?authRequest=${request.id}`);
    assert.equal(await page.locator("html").getAttribute("lang"), "de");
    assert.equal(await heading(page), "Anmelden");
    assert.ok(await page.getByRole("button", { name: "Weiter" }).isVisible());
    await context.close();

    const german = await newPage({ locale: "de-DE" });
    await german.page.goto(`${platform.url}/ui/login/loginname`);
    assert.equal(await german.page.locator("html").getAttribute("lang"), "de");
    assert.ok(await german.page.getByLabel("Anmeldename").isVisible());
    await german.page.getByLabel("Anmeldename").fill("alice");
    await german.page.getByRole("button", { name: "Weiter" }).click();
    assert.equal(await heading(german.page), "Passwort eingeben");
    await german.context.close();
  });

  it("the language picker switches the language, with and without JavaScript, and keeps it for later pages", async () => {
    for (const javaScriptEnabled of [true, false]) {
      const { context, page, problems } = await newPage({ javaScriptEnabled, locale: "en-US" });
      const request = await authRequest({ uiLocales: ["en"] });
      await page.goto(`${platform.url}/ui/login?authRequest=${request.id}`);
      assert.equal(await heading(page), "Sign in");
      const picker = page.getByRole("navigation", { name: "Language" });
      assert.equal(await picker.locator('[aria-current="true"]').textContent(), "English");
      await picker.getByRole("link", { name: "Italiano" }).click();
      assert.equal(await page.locator("html").getAttribute("lang"), "it");
      assert.equal(await heading(page), "Accedi");
      // back where it was: the entry, which shows the login-name page
      assert.match(page.url(), new RegExp(`/ui/login\\?authRequest=${request.id}$`));
      // the choice stays for the next page, over ui_locales=en
      await page.getByLabel("Nome di accesso").fill("alice");
      await page.getByRole("button", { name: "Avanti" }).click();
      assert.equal(await page.locator("html").getAttribute("lang"), "it");
      await page.getByRole("navigation", { name: "Lingua" }).getByRole("link", { name: "Deutsch" }).click();
      assert.equal(await heading(page), "Passwort eingeben");
      const cookie = (await context.cookies()).find((c) => c.name === "platform_lang");
      assert.equal(cookie?.value, "de");
      assert.equal(cookie?.sameSite, "Lax");
      assert.deepEqual(problems, []);
      await context.close();
    }
  });

  it("works without JavaScript, and signs out from the account page", async () => {
    const { context, page } = await newPage({ javaScriptEnabled: false });
    await page.goto(`${platform.url}/`);
    assert.equal(await heading(page), "Sign in");
    await signIn(page, "alice");
    assert.equal(await heading(page), "Your account");
    assert.equal(await page.locator("#email-status").textContent(), "Current: alice@example.com (verified)");
    await page.getByRole("button", { name: "Sign out of every account" }).click();
    assert.equal(await heading(page), "You are signed out");
    assert.equal((await context.cookies()).filter((c) => c.name === "platform_ua").length, 0);
    await page.goto(`${platform.url}/`);
    assert.equal(await heading(page), "Sign in");
    await context.close();
  });

  it("posts the code with response_mode=form_post: the script runs under the CSP, the button serves without JavaScript", async () => {
    for (const javaScriptEnabled of [true, false]) {
      const { context, page, problems } = await newPage({ javaScriptEnabled });
      client.posts.length = 0;
      const request = await authRequest({ responseMode: "form_post" });
      await page.goto(`${platform.url}/ui/login?authRequest=${request.id}`);
      await signIn(page, "bob");
      if (!javaScriptEnabled) {
        assert.equal(await heading(page), "Continue to the application");
        await page.getByRole("button", { name: "Continue" }).click();
      }
      await page.waitForURL(client.callback);
      assert.equal(new URLSearchParams(client.posts[0]).get("code"), TestCompleter.codeFor(request.id));
      assert.deepEqual(problems, [], "no CSP violation");
      await context.close();
    }
  });

  it("every page passes axe-core (WCAG 2.1 AA and best practices) in light and dark mode, in keyboard order with visible focus", async () => {
    const failures: string[] = [];
    const seen = new Set<string>();
    await visitLoginPages(
      platform,
      client,
      browser,
      { colorScheme: "light", viewport: { width: 1280, height: 900 } },
      async (name, page) => {
        seen.add(name);
        // both colour schemes on the same page (prefers-color-scheme emulated)
        for (const colorScheme of ["dark", "light"] as const) {
          await page.emulateMedia({ colorScheme });
          for (const v of await axeViolations(page))
            failures.push(
              `${name} (${colorScheme}): ${v.id} [${v.impact}] ${v.help} — ${v.targets.join(", ")}`,
            );
        }
        const order = await keyboardOrder(page);
        assert.deepEqual(
          order.tabbed.map((s) => s.element),
          order.document,
          `${name}: Tab follows the document order`,
        );
        assert.ok(order.tabbed.length > 0, `${name}: something to reach by keyboard`);
        for (const stop of order.tabbed) assert.ok(stop.visible, `${name}: ${stop.element} shows its focus`);
      },
    );
    assert.deepEqual(failures, []);
    assert.equal(seen.size, 18, `every page visited: ${[...seen].join(", ")}`);
  });
});
