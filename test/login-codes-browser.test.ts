/**
 * The login pages of e-mailed codes in Debian's Chromium (playwright-core), with a real SMTP server
 * receiving what the outbox sends: forgot password end to end (request → e-mail → its link → a wrong
 * code → the new password → signed in with it), registration → verification e-mail → its link → verified
 * (the users API says so), an invitation end to end, no active provider said honestly, an unknown name
 * answered with the identical page and no e-mail, and hide_password_reset. Every page passes axe-core in
 * light and dark mode, in keyboard order with visible focus.
 *
 * Needs Chromium (`apt-get install -y chromium`, or CHROMIUM_PATH).
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { Browser, Page } from "playwright-core";
import { changeSettings } from "../src/domain/settings/commands.ts";
import { LOGIN } from "../src/domain/settings/login.ts";
import { addHuman, createAuthRequest, type LoginTestPlatform, startLoginPlatform } from "./login.ts";
import {
  axeViolations,
  type ClientApp,
  keyboardOrder,
  launchChromium,
  PASSWORD,
  startClientApp,
  watchProblems,
} from "./login-browser.ts";
import { addWalkMail, type CodePageName, visitCodePages, type WalkMail } from "./login-codes-walk.ts";

let platform: LoginTestPlatform;
let browser: Browser;
let client: ClientApp;
let mail: WalkMail;

before(async () => {
  [platform, browser, client] = await Promise.all([startLoginPlatform(), launchChromium(), startClientApp()]);
  mail = await addWalkMail(platform);
});

after(async () => {
  await browser?.close();
  await client?.close();
  await platform?.stop();
  await mail?.close();
});

describe("login pages of e-mailed codes in Chromium", () => {
  it("reset, verification and invitation end to end; every page passes axe-core in light and dark mode", async () => {
    await addHuman(platform, "rosa", PASSWORD);
    const failures: string[] = [];
    const seen = new Set<CodePageName>();
    await visitCodePages(
      platform,
      client,
      browser,
      mail,
      { resetUser: "rosa", newUser: "nina", invitedUser: "olga" },
      { colorScheme: "light", viewport: { width: 1280, height: 900 } },
      async (name, page) => {
        seen.add(name);
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
        for (const stop of order.tabbed) assert.ok(stop.visible, `${name}: ${stop.element} shows its focus`);
      },
    );
    assert.deepEqual(failures, []);
    assert.equal(seen.size, 10, "every page of the walk");

    // the registration's link verified the address: the users API says so
    const [nina] = await platform.db.query<{ id: string }>("SELECT id FROM users WHERE username = 'nina'");
    const user = await mail.rest("GET", `/resources/v3alpha/users/${nina.id}`);
    assert.equal(user.json.user.human.email.is_verified, true);
    // the invitation's password signs in
    const [olga] = await platform.db.query<{ password_hash: string | null }>(
      "SELECT password_hash FROM users WHERE username = 'olga'",
    );
    assert.ok(olga.password_hash);
  });

  it("an unknown name gets the identical page and no e-mail", async () => {
    await addHuman(platform, "sara", PASSWORD);
    const sentPage = async (loginName: string) => {
      const context = await browser.newContext();
      const page: Page = await context.newPage();
      const problems = watchProblems(page);
      const request = await createAuthRequest(platform, { redirectUri: client.callback });
      await page.goto(`${platform.url}/ui/login/password-reset?authRequest=${request.id}`);
      await page.getByLabel("Login name").fill(loginName);
      await page.getByRole("button", { name: "Send link" }).click();
      await page.locator("h1", { hasText: "Check your e-mail" }).waitFor();
      const text = (await page.locator("main").innerHTML())
        .replaceAll(loginName, "NAME")
        .replace(/authRequest=[\w-]+/g, "authRequest=ID");
      assert.deepEqual(problems, []);
      await context.close();
      return text;
    };
    assert.equal(await sentPage("nobody"), await sentPage("sara"));
    await mail.linkTo("sara@example.com", "/ui/login/password-reset");
    await new Promise((r) => setTimeout(r, 700));
    assert.equal(mail.smtp.received.filter((m) => m.envelope.to.includes("nobody@example.com")).length, 0);
  });

  it("hide_password_reset hides the link on the password page", async () => {
    await addHuman(platform, "tina", PASSWORD);
    const instanceId = platform.bootstrapResult!.instanceId;
    const owner = { type: 2 as const, id: instanceId };
    const passwordPageHasLink = async () => {
      const context = await browser.newContext();
      const page = await context.newPage();
      const request = await createAuthRequest(platform, { redirectUri: client.callback });
      await page.goto(`${platform.url}/ui/login?authRequest=${request.id}`);
      await page.getByLabel("Login name").fill("tina");
      await page.getByRole("button", { name: "Next" }).click();
      await page.locator("h1", { hasText: "Enter your password" }).waitFor();
      const count = await page.getByRole("link", { name: "Forgot password?" }).count();
      await context.close();
      return count > 0;
    };
    assert.equal(await passwordPageHasLink(), true);
    await changeSettings(platform.eventStore, {
      category: LOGIN,
      owner,
      instanceId,
      creator: "test",
      set: { hide_password_reset: true },
      reset: [],
    });
    try {
      assert.equal(await passwordPageHasLink(), false);
    } finally {
      await changeSettings(platform.eventStore, {
        category: LOGIN,
        owner,
        instanceId,
        creator: "test",
        set: {},
        reset: ["hide_password_reset"],
      });
    }
  });
});
