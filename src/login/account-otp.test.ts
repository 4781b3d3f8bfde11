/**
 * The account page's one-time-password section over HTTP (src/login/steps/account/security-otp.ts): an
 * authenticator app added with its QR code and verified, e-mail codes turned on and off, recovery codes
 * shown once and counted, and an account with a second factor changing its factors only from a session
 * that passed one.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { generate } from "otplib";
import {
  type Answer,
  addHuman,
  formOf,
  HttpBrowser,
  type LoginTestPlatform,
  startLoginPlatform,
} from "../../test/login.ts";
import { userFactor } from "../query/user-factors.ts";

const PASSWORD = "Secret-Passw0rd!";

describe("account page: authenticator app, e-mail and SMS codes, recovery codes", () => {
  let platform: LoginTestPlatform;
  let instanceId: string;

  before(async () => {
    platform = await startLoginPlatform();
    instanceId = platform.bootstrapResult!.instanceId;
  });
  after(() => platform.stop());

  async function signedIn(loginName: string) {
    const browser = new HttpBrowser(platform.url);
    const loginPage = await browser.follow("/ui/login/loginname");
    const passwordPage = await browser.submit(loginPage, "/ui/login/loginname", { loginName });
    const page = await browser.submit(passwordPage, "/ui/login/password", { password: PASSWORD });
    assert.equal(page.status, 200, page.text);
    return { browser, page };
  }
  /** The section of the page. */
  const sectionOf = (page: Answer) => {
    const start = page.text.indexOf('<section aria-labelledby="otp-title">');
    assert.ok(start >= 0, "the page has the section");
    return page.text.slice(start, page.text.indexOf("</section>", start));
  };
  const notice = (page: Answer) =>
    /<div class="notice" role="status">([^<]*)<\/div>/.exec(sectionOf(page))?.[1];

  it("adds an authenticator app: the QR code and key after the post, a wrong code is a field error, the right one activates it", async () => {
    const id = await addHuman(platform, "acct-totp", PASSWORD);
    const { browser, page } = await signedIn("acct-totp");
    assert.match(sectionOf(page), /<h2 id="otp-title">Two-step verification<\/h2>/);
    assert.match(sectionOf(page), /No authenticator app is set up./);
    const added = await browser.submit(page, "/ui/login/account/otp/totp", {});
    assert.equal(notice(added), "Scan the QR code and enter the code to finish.");
    assert.match(sectionOf(added), /<svg width="200" height="200"/);
    const key = /<code class="totp-secret">([A-Z2-7 ]+)<\/code>/.exec(added.text)![1].replaceAll(" ", "");
    assert.equal((await userFactor(platform.db, instanceId, id, "totp"))?.active, false, "pending");

    const wrong = await browser.submit(added, "/ui/login/account/otp/totp/verify", {
      code: "000000" === (await generate({ secret: key })) ? "111111" : "000000",
    });
    assert.match(
      sectionOf(wrong),
      /<p class="field-error" id="code-error">The code is wrong. Check the time on your phone and try the current code.<\/p>/,
    );
    assert.match(sectionOf(wrong), /aria-invalid="true"/);
    assert.equal((await userFactor(platform.db, instanceId, id, "totp"))?.active, false);

    const verified = await browser.submit(wrong, "/ui/login/account/otp/totp/verify", {
      code: await generate({ secret: key }),
    });
    assert.equal(notice(verified), "Your authenticator app is set up.");
    assert.match(sectionOf(verified), /An authenticator app is set up./);
    assert.doesNotMatch(sectionOf(verified), /totp-secret/, "the key is never shown again");
    assert.equal((await userFactor(platform.db, instanceId, id, "totp"))?.active, true);
  });

  it("an account with a second factor changes its factors only from a session that passed it", async () => {
    const id = await addHuman(platform, "acct-guard", PASSWORD);
    const { browser, page } = await signedIn("acct-guard");
    const added = await browser.submit(page, "/ui/login/account/otp/totp", {});
    const key = /<code class="totp-secret">([A-Z2-7 ]+)<\/code>/.exec(added.text)![1].replaceAll(" ", "");
    await browser.submit(added, "/ui/login/account/otp/totp/verify", {
      code: await generate({ secret: key }),
    });

    // a new sign-in with the password alone stops at the second factor: it is not signed in to the account
    const other = await signedIn("acct-guard");
    assert.match(other.page.text, /Enter the code from your authenticator app/);
    const home = await other.browser.follow("/");
    assert.equal(home.text.indexOf('<section aria-labelledby="otp-title">'), -1, "no account page");
    const [pending] = await platform.db.query<{ id: string }>(
      "SELECT id FROM sessions WHERE user_id = $1 ORDER BY created_at DESC LIMIT 1",
      [id],
    );
    const forced = await other.browser.post("/ui/login/account/otp/totp/remove", {
      ...formOf(other.page.text, "/ui/login/mfa/totp"),
      session: pending.id,
    });
    assert.equal(forced.status, 403, "a session waiting for its second factor changes nothing");
    assert.equal((await userFactor(platform.db, instanceId, id, "totp"))?.active, true, "not removed");

    // the session that verified the app passed it: it may remove it
    const first = await browser.follow("/");
    assert.doesNotMatch(sectionOf(first), /To change these settings/);
    const removed = await browser.submit(first, "/ui/login/account/otp/totp/remove", {});
    assert.equal(notice(removed), "The authenticator app was removed.");
    assert.equal(await userFactor(platform.db, instanceId, id, "totp"), undefined);
  });

  it("recovery codes: shown once after the post, counted; e-mail codes turned on, and off only with a second factor", async () => {
    const id = await addHuman(platform, "acct-codes", PASSWORD);
    const { browser, page } = await signedIn("acct-codes");
    assert.match(sectionOf(page), /You have no recovery codes./);
    const made = await browser.submit(page, "/ui/login/account/otp/recovery", {});
    const codes = [...sectionOf(made).matchAll(/<li><code>([A-Z2-9]{5}-[A-Z2-9]{5})<\/code><\/li>/g)].map(
      (m) => m[1],
    );
    assert.equal(codes.length, 10);
    assert.match(sectionOf(made), /10 recovery codes left./);
    assert.match(sectionOf(made), /they are shown only this once/);
    const reload = await browser.follow("/");
    assert.doesNotMatch(sectionOf(reload), /<li><code>/, "not shown again");

    assert.match(sectionOf(reload), /Turn on codes by e-mail/);
    assert.match(sectionOf(reload), /Add and verify a phone number to use codes by SMS./);
    const on = await browser.submit(reload, "/ui/login/account/otp/email", {});
    assert.equal(notice(on), "Codes by e-mail are on.");
    // codes by e-mail are now a second factor of the account: this session passed only the password, so it
    // neither changes the factors any more nor turns the codes off (sign in again with them to do so)
    assert.match(sectionOf(on), /To change these settings, sign in again with your second factor./);
    const off = await browser.post("/ui/login/account/otp/email", {
      ...formOf(on.text, "/ui/login/account/profile"),
      action: "disable",
    });
    assert.equal(off.status, 303);
    const refused = await browser.follow("/");
    assert.match(sectionOf(refused), /To change these settings, sign in again with your second factor./);
    assert.ok(await userFactor(platform.db, instanceId, id, "otp_email"), "still on");
  });
});
