/**
 * Chromium support of the login UI's browser tests and of `npm run screenshots`: launching Debian's
 * Chromium through playwright-core, axe-core run inside the page, the keyboard order of a page, and a
 * walk through every login page (`visitLoginPages`) that both the accessibility test and the screenshot
 * script use, and one through the pages of external identity providers (`visitIdpPages`).
 */
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import http from "node:http";
import { createRequire } from "node:module";
import type { AddressInfo } from "node:net";
import { type Browser, type BrowserContext, chromium, type Page } from "playwright-core";
import { hashPassword } from "../src/crypto/password.ts";
import { foldUser, userEvent } from "../src/domain/user/commands.ts";
import { USER, UserEvent } from "../src/domain/user/events.ts";
import type { AuthRequestInput } from "../src/login/index.ts";
import { giveMemberData } from "./account-data.ts";
import type { Federation } from "./idp-federation.ts";
import { addHuman, createAuthRequest, type LoginTestPlatform } from "./login.ts";
import { withScaledTimeouts } from "./time.ts";

export const chromiumPath = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";

export async function launchChromium(): Promise<Browser> {
  assert.ok(
    existsSync(chromiumPath),
    `Chromium not found at ${chromiumPath}: install it (apt-get install -y chromium) or set CHROMIUM_PATH`,
  );
  return withScaledTimeouts(
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
        "--font-render-hinting=none",
      ],
    }),
  );
}

/** The client application: a local HTTP server whose redirect URI answers a page and records form posts. */
export interface ClientApp {
  /** `http://127.0.0.1:<port>/callback`: the redirect URI of the test auth requests. */
  callback: string;
  /** Bodies of the form posts received (response_mode=form_post). */
  posts: string[];
  close(): Promise<void>;
}

export async function startClientApp(): Promise<ClientApp> {
  const posts: string[] = [];
  const server = http.createServer((request, response) => {
    let body = "";
    request.setEncoding("utf8");
    request.on("data", (chunk) => (body += chunk));
    request.on("end", () => {
      if (request.method === "POST") posts.push(body);
      response.writeHead(200, { "content-type": "text/html; charset=utf-8" });
      response.end("<!doctype html><html lang=en><title>Client</title><h1>Client application</h1></html>");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    callback: `http://127.0.0.1:${port}/callback`,
    posts,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Problems a page must not have: console errors (CSP violations are console errors), failed requests. */
export function watchProblems(page: Page): string[] {
  const problems: string[] = [];
  page.on("console", (m) => {
    if (m.type() === "error") problems.push(`console error on ${page.url()}: ${m.text()}`);
  });
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  page.on("requestfailed", (r) => problems.push(`request failed: ${r.url()} ${r.failure()?.errorText}`));
  return problems;
}

const axeSource = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");

export interface AxeViolation {
  id: string;
  impact: string;
  help: string;
  targets: string[];
}

/**
 * axe-core's WCAG 2.1 A/AA and best-practice rules, run in the page (evaluated through the DevTools
 * protocol, so the page's CSP, which allows no script, does not stop it).
 */
export async function axeViolations(page: Page): Promise<AxeViolation[]> {
  // axe-core's source (some 500 kB) once per document, not once per run (pages are checked in both schemes)
  if (!(await page.evaluate(`typeof window.axe === "object"`))) await page.evaluate(axeSource);
  return (await page.evaluate(`(async () => {
    const result = await window.axe.run(document, {
      runOnly: { type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"] },
    });
    return result.violations.map((v) => ({
      id: v.id,
      impact: v.impact,
      help: v.help,
      targets: v.nodes.map((n) => n.target.join(" ")),
    }));
  })()`)) as AxeViolation[];
}

export interface FocusStop {
  element: string;
  /** Whether the focused element shows a focus indicator (an outline). */
  visible: boolean;
}

/**
 * The elements Tab visits from the top of the page, and the elements that can take focus in document
 * order: they must be the same (no positive tabindex, nothing unreachable), each with a visible focus.
 */
export async function keyboardOrder(page: Page): Promise<{ tabbed: FocusStop[]; document: string[] }> {
  const describe = `(el) => el ? (el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") + (el.getAttribute("name") && el.tagName !== "A" ? "[" + el.getAttribute("name") + "]" : "") + (el.tagName === "A" ? "[" + el.getAttribute("href") + "]" : "") + (el.tagName === "BUTTON" ? "{" + el.textContent.trim().slice(0, 40) + "}" : "")) : "none"`;
  const documentOrder = await page.evaluate(`(() => {
    const describe = ${describe};
    return [...document.querySelectorAll("a[href], button, input:not([type=hidden]), select, textarea")]
      .filter((el) => !el.disabled && el.getClientRects().length > 0)
      .map(describe);
  })()`);
  // start from the top of the page: focus a (not tabbable) element placed first
  await page.evaluate(`(() => {
    const start = document.createElement("span");
    start.tabIndex = -1;
    document.body.prepend(start);
    start.focus();
  })()`);
  const tabbed: FocusStop[] = [];
  for (let i = 0; i < 40; i++) {
    await page.keyboard.press("Tab");
    const stop = (await page.evaluate(`(() => {
      const el = document.activeElement;
      if (!el || el === document.body) return undefined;
      const style = getComputedStyle(el);
      return { element: (${describe})(el), visible: style.outlineStyle !== "none" && parseFloat(style.outlineWidth) >= 2 };
    })()`)) as FocusStop | undefined;
    if (!stop || tabbed.some((t) => t.element === stop.element)) break;
    tabbed.push(stop);
  }
  return { tabbed, document: documentOrder as string[] };
}

export const PASSWORD = "Secret-Passw0rd!";

/** The users the page walk signs in with (call once per platform). */
export async function addWalkUsers(platform: LoginTestPlatform): Promise<void> {
  await addHuman(platform, "alice", PASSWORD, { givenName: "Alice", familyName: "Martin" });
  const bob = await addHuman(platform, "bob", PASSWORD, { givenName: "Bob", familyName: "Keller" });
  // the account page shows bob's custom data (a user schema's section)
  await giveMemberData(platform, bob);
  // the walk shows the password change it must make and leaves it pending
  const carla = await addHuman(platform, "carla.new", PASSWORD, { givenName: "Carla", familyName: "Rossi" });
  await requirePasswordChange(platform, carla, PASSWORD);
}

/** Sets `password` with `change_required`, as an administrator's `_set_password` does. */
export async function requirePasswordChange(
  platform: LoginTestPlatform,
  userId: string,
  password: string,
): Promise<void> {
  const passwordHash = await hashPassword(password);
  await platform.eventStore.push(
    { instanceId: platform.bootstrapResult!.instanceId, creator: "test" },
    async (tx) => [
      userEvent(foldUser(await tx.load(USER, userId))!, UserEvent.passwordChanged, {
        password_hash: passwordHash,
        change_required: true,
      }),
    ],
  );
}

/** A login page reached by the walk. */
export type LoginPageName =
  | "loginname"
  | "loginname-error"
  | "password"
  | "password-error"
  | "password-change"
  | "select"
  | "reauth"
  | "register"
  | "register-errors"
  | "logout"
  | "account"
  | "account-profile-errors"
  | "account-password-errors"
  | "account-saved"
  | "signedout"
  | "error"
  | "authorize-error"
  | "form-post";

/**
 * Walks through every login page in a fresh context of `browser` (with `options`, e.g. a colour scheme
 * and viewport) and calls `visit` on each. Uses the users of `addWalkUsers`; every step asserts it
 * reached the page it expects.
 */
export async function visitLoginPages(
  platform: LoginTestPlatform,
  client: ClientApp,
  browser: Browser,
  options: Parameters<Browser["newContext"]>[0],
  visit: (name: LoginPageName, page: Page) => Promise<void>,
): Promise<void> {
  const context = await browser.newContext(options);
  const page = await context.newPage();
  const authRequest = (overrides: Partial<AuthRequestInput> = {}) =>
    createAuthRequest(platform, { redirectUri: client.callback, ...overrides });
  const problems = watchProblems(page);
  const heading = async (expected: RegExp) =>
    assert.match((await page.locator("h1").textContent()) ?? "", expected);
  try {
    // login name, with and without an error
    let request = await authRequest();
    await page.goto(`${platform.url}/ui/login?authRequest=${request.id}`);
    await heading(/Sign in/);
    await visit("loginname", page);
    await page.getByRole("button", { name: "Next" }).click();
    await page.locator(".alert").waitFor();
    await visit("loginname-error", page);

    // password, with an error, then signed in
    await page.getByLabel("Login name").fill("alice");
    await page.getByRole("button", { name: "Next" }).click();
    await heading(/Enter your password/);
    await visit("password", page);
    await page.getByLabel("Password", { exact: true }).fill("wrong-Passw0rd!");
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.locator(".alert").waitFor();
    await visit("password-error", page);
    await page.getByLabel("Password", { exact: true }).fill(PASSWORD);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.waitForURL(`${client.callback}?**`);

    // a second account, then the account picker
    request = await authRequest({ prompt: ["login"] });
    await page.goto(`${platform.url}/ui/login?authRequest=${request.id}`);
    await heading(/Enter your password/);
    await visit("reauth", page);
    await page.getByRole("link", { name: "Use another account" }).click();
    await page.getByLabel("Login name").fill("bob");
    await page.getByRole("button", { name: "Next" }).click();
    await page.getByLabel("Password", { exact: true }).fill(PASSWORD);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.waitForURL(`${client.callback}?**`);
    request = await authRequest({ prompt: ["select_account"] });
    await page.goto(`${platform.url}/ui/login?authRequest=${request.id}`);
    await heading(/Choose an account/);
    await visit("select", page);

    // registration, with errors
    request = await authRequest({ prompt: ["create"] });
    await page.goto(`${platform.url}/ui/login?authRequest=${request.id}`);
    await heading(/Create your account/);
    await visit("register", page);
    await page.getByLabel("First name").fill("Dana");
    await page.getByLabel("E-mail address").fill("dana(at)example.com");
    await page.getByLabel("Password", { exact: true }).fill("short");
    await page.getByRole("button", { name: "Create account" }).click();
    await page.locator(".alert").waitFor();
    await visit("register-errors", page);

    // form_post: the page submits itself at once, so it is shown here with its submission held back
    request = await authRequest({ responseMode: "form_post", loginHint: "alice" });
    const formPost = await context.newPage();
    await formPost.route(`${platform.url}/ui/login?**`, async (route) => {
      const response = await route.fetch();
      // the script would navigate away at once: keep the page (its CSP stays as sent)
      const body = (await response.text()).replace(/<script>[^<]*<\/script>/, "");
      await route.fulfill({ response, body });
    });
    await formPost.goto(`${platform.url}/ui/login?authRequest=${request.id}`);
    assert.match((await formPost.locator("h1").textContent()) ?? "", /Continue to the application/);
    await visit("form-post", formPost);
    await formPost.close();

    // end_session without id_token_hint: the confirmation; Cancel leads to the account page
    await page.goto(`${platform.url}/oidc/v1/end_session`);
    await heading(/Sign out of .*\?/);
    await visit("logout", page);
    await page.getByRole("link", { name: "Cancel" }).click();
    await page.waitForURL(`${platform.url}/`);

    // the account page, then sign-out
    await heading(/Your account/);
    await visit("account", page);
    // its forms: a profile with an error, a password with errors, then a saved profile
    await page.getByLabel("First name").fill("");
    await page.getByRole("button", { name: "Save profile" }).click();
    await page.locator("#profile-error").waitFor();
    await visit("account-profile-errors", page);
    await page.locator("#currentPassword").fill("Wrong-Passw0rd!");
    await page.getByLabel("New password", { exact: true }).fill("short");
    await page.getByLabel("Confirm new password").fill("short");
    await page.getByRole("button", { name: "Change password" }).click();
    await page.locator("#password-error").waitFor();
    await visit("account-password-errors", page);
    await page.getByLabel("Nickname (optional)").fill("Bobby");
    await page.getByRole("button", { name: "Save profile" }).click();
    await page.locator(".notice").waitFor();
    await visit("account-saved", page);
    await page.getByRole("button", { name: "Sign out of every account" }).click();
    await heading(/You are signed out/);
    await visit("signedout", page);

    assert.deepEqual(problems, []);
    // an error page (a 404 document, which Chromium reports on the console)
    await page.goto(`${platform.url}/ui/login?authRequest=1`);
    await heading(/Sign-in not possible/);
    await visit("error", page);
    // the authorization endpoint's page for a request it cannot answer at the client (unknown client)
    await page.goto(
      `${platform.url}/oauth/v2/authorize?${new URLSearchParams({
        client_id: "unknown-app",
        redirect_uri: client.callback,
        response_type: "code",
        scope: "openid",
      })}`,
    );
    await heading(/Sign-in not possible/);
    await visit("authorize-error", page);

    // a password that must be changed (in a browser of its own: the other pages show alice and bob)
    const changing = await browser.newContext(options);
    try {
      const changePage = await changing.newPage();
      await changePage.goto(`${platform.url}/ui/login?authRequest=${(await authRequest()).id}`);
      await changePage.getByLabel("Login name").fill("carla.new");
      await changePage.getByRole("button", { name: "Next" }).click();
      await changePage.getByLabel("Password", { exact: true }).fill(PASSWORD);
      await changePage.getByRole("button", { name: "Sign in" }).click();
      assert.match((await changePage.locator("h1").textContent()) ?? "", /Change your password/);
      await visit("password-change", changePage);
    } finally {
      await changing.close();
    }
  } finally {
    await context.close();
  }
}

/** The providers and people the walk through the provider pages uses (call once per federation). */
export async function addIdpWalkSetup(federation: Federation): Promise<void> {
  const { platform } = federation;
  // proposes the local user with the same verified e-mail address, else creates one (or shows the form)
  await federation.addProvider("Example ID", {
    autoLinking: "email",
    isAutoCreation: true,
    isManualCreationAllowed: true,
  });
  // neither links nor creates
  await federation.addProvider("Partner SSO", {});
  // the same address as lena here: the link proposal
  await addHuman(platform, "lena", PASSWORD, { givenName: "Lena", familyName: "Martin" });
  await federation.addUpstreamHuman("lena.martin", {
    givenName: "Lena",
    familyName: "Martin",
    email: "lena@example.com",
  });
  // a username taken here: the registration form, prefilled, the provider's values read-only
  await addHuman(platform, "nora", PASSWORD, { givenName: "Nora", familyName: "Local" });
  await federation.addUpstreamHuman("nora", { givenName: "Nora", familyName: "Keller" });
  // created (first walk) or linked (later walks): signed in
  await federation.addUpstreamHuman("uma", { givenName: "Uma", familyName: "Weber" });
}

/** A page of sign-in through an external identity provider reached by `visitIdpPages`. */
export type IdpPageName = "idp-loginname" | "idp-link" | "idp-register" | "idp-continue" | "idp-no-account";

/**
 * Walks through the pages of sign-in with an external identity provider (a real OpenID Connect provider,
 * the second instance of `federation`), each sign-in in a fresh context of `browser` with `options`, and
 * calls `visit` on each. Uses the providers and people of `addIdpWalkSetup`; every step asserts it reached
 * the page it expects.
 */
export async function visitIdpPages(
  federation: Federation,
  browser: Browser,
  options: Parameters<Browser["newContext"]>[0],
  visit: (name: IdpPageName, page: Page) => Promise<void>,
): Promise<void> {
  const { platform } = federation;
  const heading = async (page: Page, expected: RegExp) =>
    assert.match((await page.locator("h1").textContent()) ?? "", expected);
  /** Each page's problems (filled as they happen). */
  const problems: string[][] = [];
  const contexts: BrowserContext[] = [];
  const fresh = async () => {
    const context = await browser.newContext(options);
    contexts.push(context);
    const page = await context.newPage();
    problems.push(watchProblems(page));
    await page.goto((await federation.authorization()).url);
    await heading(page, /Sign in/);
    return page;
  };
  /** A fresh browser (no session here or at the provider) continuing with `idp` as `loginName` there. */
  const continueWith = async (idp: string, loginName: string) => {
    const page = await fresh();
    await page.getByRole("link", { name: `Continue with ${idp}` }).click();
    await federation.signInUpstream(page, loginName);
    return page;
  };
  try {
    // the login-name page with the providers' buttons
    const start = await fresh();
    assert.equal(await start.locator(".idp-list a").count(), 2);
    await visit("idp-loginname", start);

    // the proposal to link the matching account, with its password
    const link = await continueWith("Example ID", "lena.martin");
    await link.waitForURL(`${platform.url}/ui/login/idp/link?**`);
    await heading(link, /Link your account/);
    await visit("idp-link", link);

    // the registration form prefilled from the provider (the username taken here)
    const register = await continueWith("Example ID", "nora");
    await register.waitForURL(`${platform.url}/ui/login/idp/register?**`);
    await heading(register, /Create your account/);
    assert.equal(await register.getByLabel("Last name").getAttribute("readonly"), "");
    await visit("idp-register", register);

    // signed in: the page that moves on by itself (meta refresh), held here. It comes at the end of redirects
    // (which a route does not see): at the provider, every redirect becomes a page that moves on, so that
    // each step is a navigation of its own; the page's refresh is removed (its CSP stays as sent).
    const signedIn = await fresh();
    await signedIn.getByRole("link", { name: "Continue with Example ID" }).click();
    await signedIn.waitForURL(`${federation.upstream.url}/ui/login/**`);
    await signedIn.route("**/*", async (route) => {
      const request = route.request();
      if (!request.isNavigationRequest()) return route.fallback();
      const response = await route.fetch({ maxRedirects: 0 });
      const location = response.headers().location;
      if (response.status() >= 300 && response.status() < 400 && location) {
        const next = new URL(location, request.url()).href.replaceAll("&", "&amp;").replaceAll('"', "&quot;");
        return route.fulfill({
          status: 200,
          contentType: "text/html; charset=utf-8",
          body: `<!doctype html><html lang="en"><title>Redirect</title><meta http-equiv="refresh" content="0;url=${next}"></html>`,
        });
      }
      if (!request.url().startsWith(`${platform.url}/ui/login/idp/callback?`))
        return route.fulfill({ response });
      const body = (await response.text()).replace(/<meta http-equiv="refresh"[^>]*>/, "");
      return route.fulfill({ response, body });
    });
    await federation.signInUpstream(signedIn, "uma");
    await signedIn.waitForURL(`${platform.url}/ui/login/idp/callback?**`);
    await heading(signedIn, /Signing you in/);
    await visit("idp-continue", signedIn);

    assert.deepEqual(problems.flat(), []);
    // no account linked, none to propose, none to create (a 403 document, which Chromium reports)
    const none = await continueWith("Partner SSO", "uma");
    await none.waitForURL(`${platform.url}/ui/login/idp/callback?**`);
    await none.getByRole("alert").waitFor();
    assert.match((await none.getByRole("alert").textContent()) ?? "", /No account here is linked/);
    await visit("idp-no-account", none);
  } finally {
    for (const context of contexts) await context.close();
  }
}
