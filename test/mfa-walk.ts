/**
 * Chromium walk through the second-factor pages of the login UI for `npm run screenshots`: the prompt to
 * register a second factor (forced, and with "Skip"), the authenticator app's setup with its QR code, the
 * choice of a user with several factors, the TOTP page (and its error), the e-mailed code's page, the
 * recovery code's page, "Sign in with a passkey", and the account page's security sections with fresh
 * recovery codes. Factors are set up through the users API; codes by e-mail go through `WalkMail`'s SMTP.
 */
import assert from "node:assert/strict";
import { generate } from "otplib";
import type { Browser, Page } from "playwright-core";
import { addOrg } from "./helpers.ts";
import { addHuman, createAuthRequest, type LoginTestPlatform } from "./login.ts";
import { type ClientApp, PASSWORD, watchProblems } from "./login-browser.ts";
import type { WalkMail } from "./login-codes-walk.ts";

/** A second-factor page reached by the walk. */
export type MfaPageName =
  | "mfa-setup-forced"
  | "mfa-setup"
  | "mfa-setup-totp"
  | "mfa-choose"
  | "mfa-totp"
  | "mfa-totp-error"
  | "mfa-otp-email"
  | "mfa-recovery"
  | "passkey"
  | "account-security";

/** The organizations of the walk: one forcing MFA, one prompting with "Skip" (call once per platform). */
export interface MfaWalkOrgs {
  forced: string;
  prompting: string;
}

export async function addMfaWalkOrgs(mail: WalkMail, platform: LoginTestPlatform): Promise<MfaWalkOrgs> {
  const forced = await addOrg(platform, "Acme");
  const prompting = await addOrg(platform, "Globex");
  const policy = async (orgId: string, set: Record<string, unknown>) => {
    const reply = await mail.rest("PATCH", `/settings/v3alpha/login?ctx.org_id=${orgId}`, { json: set });
    assert.equal(reply.status, 200, reply.text);
  };
  await policy(forced, { force_mfa: { set: true } });
  await policy(prompting, { mfa_init_skip_lifetime: { set: "2592000s" } });
  return { forced, prompting };
}

/**
 * Walks through the second-factor pages in fresh contexts of `browser` with `options`, calling `visit` on
 * each. `suffix` makes the walk's users new on each call (their factors and codes are used up).
 */
export async function visitMfaPages(
  platform: LoginTestPlatform,
  client: ClientApp,
  browser: Browser,
  mail: WalkMail,
  orgs: MfaWalkOrgs,
  suffix: string,
  options: Parameters<Browser["newContext"]>[0],
  visit: (name: MfaPageName, page: Page) => Promise<void>,
): Promise<void> {
  const forced = `fay${suffix}`;
  const prompted = `gus${suffix}`;
  const secured = `mia${suffix}`;
  await addHuman(platform, forced, PASSWORD, { orgId: orgs.forced, givenName: "Fay", familyName: "Moser" });
  await addHuman(platform, prompted, PASSWORD, {
    orgId: orgs.prompting,
    givenName: "Gus",
    familyName: "Roth",
  });
  const securedId = await addHuman(platform, secured, PASSWORD, { givenName: "Mia", familyName: "Frei" });
  // Mia: an authenticator app, codes by e-mail, recovery codes
  const user = `/resources/v3alpha/users/${securedId}`;
  const totp = await mail.rest("POST", `${user}/totp`);
  assert.equal(totp.status, 200, totp.text);
  const secret = totp.json.secret as string;
  const verified = await mail.rest("POST", `${user}/totp/_verify`, {
    json: { code: await generate({ secret }) },
  });
  assert.equal(verified.status, 200, verified.text);
  assert.equal((await mail.rest("POST", `${user}/otp_email`)).status, 200);
  const codes = await mail.rest("POST", `${user}/recovery_codes`);
  assert.equal(codes.status, 200, codes.text);
  const recoveryCode = codes.json.codes[0] as string;

  const context = await browser.newContext(options);
  const problems: string[] = [];
  const fresh = async () => {
    await context.clearCookies();
    const page = await context.newPage();
    const watched = watchProblems(page);
    page.on("close", () => problems.push(...watched));
    const request = await createAuthRequest(platform, { redirectUri: client.callback });
    await page.goto(`${platform.url}/ui/login?authRequest=${request.id}`);
    return page;
  };
  const heading = async (page: Page, expected: RegExp) =>
    assert.match((await page.locator("h1").textContent()) ?? "", expected);
  const password = async (page: Page, loginName: string) => {
    await page.getByLabel("Login name").fill(loginName);
    await page.getByRole("button", { name: "Next" }).click();
    await page.getByLabel("Password", { exact: true }).fill(PASSWORD);
    await page.getByRole("button", { name: "Sign in" }).click();
  };
  try {
    // forced: the prompt without "Skip", then the authenticator app's setup (left pending)
    let page = await fresh();
    await password(page, forced);
    await heading(page, /Set up a second factor/);
    await visit("mfa-setup-forced", page);
    await page.getByRole("link", { name: "Authenticator app" }).click();
    await heading(page, /Set up an authenticator app/);
    await page.locator(".totp-qr svg").waitFor();
    await visit("mfa-setup-totp", page);
    await page.close();

    // the prompt with "Skip" (not taken)
    page = await fresh();
    await password(page, prompted);
    await heading(page, /Set up a second factor/);
    await page.getByRole("button", { name: "Skip for now" }).waitFor();
    await visit("mfa-setup", page);
    await page.close();

    // "Sign in with a passkey"
    page = await fresh();
    await page.getByRole("link", { name: "Sign in with a passkey" }).click();
    await heading(page, /Sign in with a passkey/);
    await visit("passkey", page);
    await page.close();

    // several factors: the choice, each code page, then a recovery code signs in
    page = await fresh();
    await password(page, secured);
    await heading(page, /Confirm it's you/);
    await visit("mfa-choose", page);
    await page.getByRole("link", { name: "Code from an authenticator app" }).click();
    await heading(page, /authenticator app/);
    await visit("mfa-totp", page);
    const wrong = (await generate({ secret })) === "000000" ? "111111" : "000000";
    await page.getByLabel("Authenticator code").fill(wrong);
    await page.getByRole("button", { name: "Verify" }).click();
    await page.getByRole("alert").waitFor();
    await visit("mfa-totp-error", page);
    await page.getByRole("link", { name: "Choose another method" }).click();
    await page.getByRole("link", { name: "Code by e-mail" }).click();
    await heading(page, /Enter the code from your e-mail/);
    await visit("mfa-otp-email", page);
    await page.getByRole("link", { name: "Choose another method" }).click();
    await page.getByRole("link", { name: "Use a recovery code" }).click();
    await heading(page, /Use a recovery code/);
    await visit("mfa-recovery", page);
    await page.getByLabel("Recovery code", { exact: true }).fill(recoveryCode);
    await page.getByRole("button", { name: "Verify" }).click();
    await page.waitForURL(`${client.callback}?**`);

    // the account page's security sections, new recovery codes shown
    await page.goto(`${platform.url}/`);
    const section = page.getByRole("region", { name: "Two-step verification" });
    await section.getByRole("button", { name: "Create new recovery codes" }).click();
    await page.locator(".recovery-codes").waitFor();
    await visit("account-security", page);
    await page.close();
    assert.deepEqual(problems, []);
  } finally {
    await context.close();
  }
}
