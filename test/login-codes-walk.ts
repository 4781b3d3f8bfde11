/**
 * Chromium walk through the login pages of e-mailed codes (password reset, e-mail verification,
 * invitation, a new address on the account page), for test/login-codes-browser.test.ts (axe-core on each) and `npm run screenshots`. The
 * codes arrive as they do in production: the platform's outbox sends them through an active SMTP provider
 * to a real SMTP server here (test/smtp-receiver.ts), and the walk opens the links of the messages.
 */
import assert from "node:assert/strict";
import type { Browser, Page } from "playwright-core";
import { addMachineUser, type RestCall, restClient } from "./helpers.ts";
import { createAuthRequest, type LoginTestPlatform } from "./login.ts";
import { type ClientApp, PASSWORD, watchProblems } from "./login-browser.ts";
import { type SmtpReceiver, startSmtpReceiver } from "./smtp-receiver.ts";
import { testTime } from "./time.ts";

export const SMTP_PROVIDERS = "/resources/v3alpha/smtp_providers";
export const NEW_PASSWORD = "N3w-Secret-Passw0rd!";

/** A login page of the codes reached by the walk. */
export type CodePageName =
  | "password-reset"
  | "password-reset-sent"
  | "password-reset-set"
  | "password-reset-set-error"
  | "password-reset-done"
  | "verify-email"
  | "verify-email-done"
  | "invite"
  | "account-email-code"
  | "email-unavailable";

/** Mail for the walk and the tests: an SMTP server, an active provider sending to it, an administrator. */
export interface WalkMail {
  smtp: SmtpReceiver;
  /** REST calls as an IAM_OWNER. */
  rest: RestCall;
  providerId: string;
  /** The link (path and query) of the `skip`-th message to `address` linking to `path`, waited for. */
  linkTo(address: string, path: string, skip?: number): Promise<{ url: string; code: string }>;
  close(): Promise<void>;
}

export async function addWalkMail(platform: LoginTestPlatform): Promise<WalkMail> {
  const smtp = await startSmtpReceiver({});
  const { token } = await addMachineUser(platform, {
    username: "walk-admin",
    membership: { contextType: "instance", roles: ["IAM_OWNER"] },
  });
  const rest = restClient(platform, () => token);
  const created = await rest("POST", SMTP_PROVIDERS, {
    json: { description: "mail", sender_address: "noreply@example.com", host: `127.0.0.1:${smtp.port}` },
  });
  assert.equal(created.status, 201, created.text);
  const providerId = created.json.details.id as string;
  assert.equal((await rest("POST", `${SMTP_PROVIDERS}/${providerId}/_activate`)).status, 200);
  const linkTo = async (address: string, path: string, skip = 0) => {
    for (let i = 0; i < testTime(400); i++) {
      const mails = smtp.received.filter(
        (m) => m.envelope.to.includes(address) && (m.mail.text ?? "").includes(`${path}?`),
      );
      if (mails.length > skip) {
        const found = new RegExp(`https?://\\S+${path}\\?\\S+`).exec(mails[skip].mail.text ?? "");
        assert.ok(found, "the message carries the link");
        const url = new URL(found[0]);
        return { url: `${url.pathname}${url.search}`, code: url.searchParams.get("code") ?? "" };
      }
      await new Promise((r) => setTimeout(r, 25));
    }
    assert.fail(`no message to ${address} linking to ${path}`);
  };
  return { smtp, rest, providerId, linkTo, close: () => smtp.close() };
}

/** A user without a password, invited (an INIT e-mail); answers its ID. */
export async function inviteUser(mail: WalkMail, username: string): Promise<string> {
  const created = await mail.rest("POST", "/resources/v3alpha/users", {
    json: {
      username,
      human: {
        profile: { given_name: "Olga", family_name: "Novak" },
        email: { address: `${username}@example.com`, is_verified: true },
      },
    },
  });
  assert.equal(created.status, 201, created.text);
  const id = created.json.details.id as string;
  assert.equal((await mail.rest("POST", `/resources/v3alpha/users/${id}/_invite`, { json: {} })).status, 200);
  return id;
}

/**
 * Walks through the pages of the codes in fresh contexts of `browser` with `options` and calls `visit`
 * on each: a reset of `resetUser` (a user with PASSWORD and an e-mail address `<name>@example.com`; its
 * password ends as NEW_PASSWORD), a registration of `newUser` with its verification, an invitation of
 * `invitedUser` who then gives a new e-mail address on the account page, and a reset while no SMTP
 * provider is active.
 */
export async function visitCodePages(
  platform: LoginTestPlatform,
  client: ClientApp,
  browser: Browser,
  mail: WalkMail,
  names: { resetUser: string; newUser: string; invitedUser: string },
  options: Parameters<Browser["newContext"]>[0],
  visit: (name: CodePageName, page: Page) => Promise<void>,
): Promise<void> {
  const context = await browser.newContext(options);
  const page = await context.newPage();
  const problems = watchProblems(page);
  const heading = async (expected: RegExp, on: Page = page) =>
    assert.match((await on.locator("h1").textContent()) ?? "", expected);
  const authRequest = (prompt: ("create" | "login")[] = []) =>
    createAuthRequest(platform, { redirectUri: client.callback, prompt });
  try {
    // "Forgot password?" on the password page, the request, the e-mail's link, a wrong code, the new one
    let request = await authRequest();
    await page.goto(`${platform.url}/ui/login?authRequest=${request.id}`);
    await page.getByLabel("Login name").fill(names.resetUser);
    await page.getByRole("button", { name: "Next" }).click();
    await page.getByRole("link", { name: "Forgot password?" }).click();
    await heading(/Reset your password/);
    assert.equal(await page.getByLabel("Login name").inputValue(), names.resetUser);
    await visit("password-reset", page);
    await page.getByRole("button", { name: "Send link" }).click();
    await heading(/Check your e-mail/);
    await visit("password-reset-sent", page);
    const reset = await mail.linkTo(`${names.resetUser}@example.com`, "/ui/login/password-reset");
    await page.goto(`${platform.url}${reset.url}`);
    await heading(/Choose a new password/);
    assert.equal(await page.getByLabel("Code").inputValue(), reset.code);
    await visit("password-reset-set", page);
    await page.getByLabel("Code").fill("WRONG234");
    await page.getByLabel("New password", { exact: true }).fill(NEW_PASSWORD);
    await page.getByLabel("Confirm new password").fill(NEW_PASSWORD);
    await page.getByRole("button", { name: "Change password" }).click();
    await page.locator("#code-error").waitFor();
    await visit("password-reset-set-error", page);
    await page.getByLabel("Code").fill(reset.code);
    await page.getByLabel("New password", { exact: true }).fill(NEW_PASSWORD);
    await page.getByLabel("Confirm new password").fill(NEW_PASSWORD);
    await page.getByRole("button", { name: "Change password" }).click();
    await heading(/Password changed/);
    await visit("password-reset-done", page);
    // on with the sign-in: the new password
    await page.getByRole("link", { name: "Continue to sign in" }).click();
    await page.getByLabel("Password", { exact: true }).fill(NEW_PASSWORD);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.waitForURL(`${client.callback}?**`);

    // registration, then the e-mail's code; its link verifies it
    request = await authRequest(["create"]);
    await page.goto(`${platform.url}/ui/login?authRequest=${request.id}`);
    await page.getByLabel("Username").fill(names.newUser);
    await page.getByLabel("First name").fill("Nina");
    await page.getByLabel("Last name").fill("Weber");
    await page.getByLabel("E-mail address").fill(`${names.newUser}@example.com`);
    await page.getByLabel("Password", { exact: true }).fill(PASSWORD);
    await page.getByLabel("Confirm password").fill(PASSWORD);
    await page.getByRole("button", { name: "Create account" }).click();
    await heading(/Verify your e-mail address/);
    await visit("verify-email", page);
    const verify = await mail.linkTo(`${names.newUser}@example.com`, "/ui/login/verify-email");
    const linkContext = await browser.newContext(options);
    try {
      const linkPage = await linkContext.newPage();
      await linkPage.goto(`${platform.url}${verify.url}`);
      assert.equal(await linkPage.getByLabel("Code").inputValue(), verify.code);
      await linkPage.getByRole("button", { name: "Verify" }).click();
      await heading(/E-mail address verified/, linkPage);
      await visit("verify-email-done", linkPage);
    } finally {
      await linkContext.close();
    }
    await page.getByRole("link", { name: "Skip for now" }).click();
    await page.waitForURL(`${client.callback}?**`);

    // an invitation: the first password, then signed in (the account page)
    await inviteUser(mail, names.invitedUser);
    const invite = await mail.linkTo(`${names.invitedUser}@example.com`, "/ui/login/invite");
    const inviteContext = await browser.newContext(options);
    try {
      const invitePage = await inviteContext.newPage();
      await invitePage.goto(`${platform.url}${invite.url}`);
      await heading(/Set up your account/, invitePage);
      await visit("invite", invitePage);
      await invitePage.getByLabel("New password", { exact: true }).fill(NEW_PASSWORD);
      await invitePage.getByLabel("Confirm new password").fill(NEW_PASSWORD);
      await invitePage.getByRole("button", { name: "Set password and sign in" }).click();
      await heading(/Your account/, invitePage);
      // there, a new e-mail address: unverified, its code mailed, the code's form shown
      await invitePage.getByLabel("E-mail address").fill(`${names.invitedUser}@new.example`);
      await invitePage.locator("#emailPassword").fill(NEW_PASSWORD);
      await invitePage.getByRole("button", { name: "Change e-mail address" }).click();
      await invitePage.locator("#email-title ~ .notice").waitFor();
      await mail.linkTo(`${names.invitedUser}@new.example`, "/ui/login/verify-email");
      await visit("account-email-code", invitePage);
    } finally {
      await inviteContext.close();
    }

    // no active SMTP provider: said honestly
    assert.equal((await mail.rest("POST", `${SMTP_PROVIDERS}/${mail.providerId}/_deactivate`)).status, 200);
    try {
      request = await authRequest();
      await page.goto(`${platform.url}/ui/login/password-reset?authRequest=${request.id}`);
      await page.getByLabel("Login name").fill(names.resetUser);
      await page.getByRole("button", { name: "Send link" }).click();
      await heading(/E-mail could not be sent/);
      await visit("email-unavailable", page);
    } finally {
      assert.equal((await mail.rest("POST", `${SMTP_PROVIDERS}/${mail.providerId}/_activate`)).status, 200);
    }
    assert.deepEqual(problems, []);
  } finally {
    await context.close();
  }
}
