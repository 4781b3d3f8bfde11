import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { addHuman, HttpBrowser, type LoginTestPlatform, startLoginPlatform } from "../../test/login.ts";
import { sha256 } from "../crypto/tokens.ts";
import { USER_AGENT_COOKIE } from "./user-agent.ts";

const PASSWORD = "Secret-Passw0rd!";

/**
 * Session fixation: every sign-in gives the browser a new `platform_ua` value, and the browser's sessions
 * and auth requests move to it. A value an attacker planted in the victim's browser (or learned) before
 * the sign-in sees none of the victim's sessions afterwards.
 */
describe("login UI: a sign-in renews the browser cookie", () => {
  let platform: LoginTestPlatform;

  before(async () => {
    platform = await startLoginPlatform();
    await addHuman(platform, "vera", PASSWORD);
    await addHuman(platform, "walt", PASSWORD);
  });
  after(() => platform.stop());

  /** The attacker's own cookie value: any visit to the login UI hands one out. */
  const attackerValue = async () => {
    const attacker = new HttpBrowser(platform.url);
    await attacker.follow("/ui/login/loginname");
    const value = attacker.cookies.get(USER_AGENT_COOKIE);
    assert.ok(value, "the login UI set a cookie");
    return value;
  };

  /** A browser with `value` as its cookie (planted, or learned). */
  const browserWith = (value: string) => {
    const browser = new HttpBrowser(platform.url);
    browser.cookies.set(USER_AGENT_COOKIE, value);
    return browser;
  };

  const signIn = async (browser: HttpBrowser, loginName: string) => {
    const loginPage = await browser.follow("/ui/login/loginname");
    const passwordPage = await browser.submit(loginPage, "/ui/login/loginname", { loginName });
    const page = await browser.submit(passwordPage, "/ui/login/password", { password: PASSWORD });
    assert.match(page.text, /<h1 id="page-title">Your account<\/h1>/, page.text.slice(0, 300));
    return page;
  };

  it("a planted value sees neither the victim's session nor its account page", async () => {
    const planted = await attackerValue();
    const victim = browserWith(planted);
    const page = await signIn(victim, "vera");
    const renewed = victim.cookies.get(USER_AGENT_COOKIE);
    assert.ok(renewed && renewed !== planted, "the sign-in set a new value");
    assert.ok(
      victim.setCookieHeaders.some((h) => h.startsWith(`${USER_AGENT_COOKIE}=${renewed};`)),
      "in a Set-Cookie of the sign-in",
    );
    assert.match(page.text, /Vera Example/);

    // the attacker, with the value planted before the sign-in
    const attacker = browserWith(planted);
    const account = await attacker.get("/");
    assert.equal(account.status, 302, "no account page");
    assert.match(account.location ?? "", /^\/ui\/login\/loginname/);
    const rows = await platform.db.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM sessions WHERE user_agent_hash = $1",
      [sha256(planted)],
    );
    assert.equal(rows[0].n, 0);

    // the victim stays signed in
    assert.equal((await victim.get("/")).status, 200);
  });

  it("a second account's sign-in renews the value again and keeps the first account's session", async () => {
    const victim = new HttpBrowser(platform.url);
    await signIn(victim, "vera");
    const afterFirst = victim.cookies.get(USER_AGENT_COOKIE)!;
    const page = await signIn(victim, "walt");
    const afterSecond = victim.cookies.get(USER_AGENT_COOKIE)!;
    assert.notEqual(afterSecond, afterFirst);
    assert.match(page.text, /Vera Example/, "both accounts are listed");
    assert.match(page.text, /Walt Example/);
    assert.equal((await browserWith(afterFirst).get("/")).status, 302, "the earlier value sees nothing");
  });

  it("a wrong password changes nothing", async () => {
    const planted = await attackerValue();
    const victim = browserWith(planted);
    const loginPage = await victim.follow("/ui/login/loginname");
    const passwordPage = await victim.submit(loginPage, "/ui/login/loginname", { loginName: "vera" });
    await victim.submit(passwordPage, "/ui/login/password", { password: "wrong" });
    assert.equal(victim.cookies.get(USER_AGENT_COOKIE), planted);
  });
});
