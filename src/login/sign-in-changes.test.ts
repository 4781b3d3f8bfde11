/**
 * The rule for changes to how an account signs in on the account page, over HTTP with a software
 * authenticator (src/login/sign-in-changes.ts, docs/factors.md "Changes to how an account signs in"): a
 * session that did not pass the account's second factor (here one that began before another session added
 * it) adds no passkey and removes nothing, and a factor is removed only by a session that verified one at
 * least as strong.
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
import { SoftAuthenticator } from "../../test/webauthn.ts";

const PASSWORD = "Secret-Passw0rd!";
const SECOND_FACTOR_NEEDED = "To change these settings, sign in again with your second factor.";
const STRONGER_NEEDED =
  "To remove this, sign in again with a factor at least as strong as it, such as this one.";

/** The options of a registration page (its data-options attribute, HTML-unescaped). */
function optionsOf(html: string) {
  const match = /data-options="([^"]*)"/.exec(html);
  assert.ok(match, "the page has a WebAuthn form");
  return JSON.parse(
    match[1]
      .replaceAll("&quot;", '"')
      .replaceAll("&#34;", '"')
      .replaceAll("&#39;", "'")
      .replaceAll("&#38;", "&")
      .replaceAll("&amp;", "&"),
  );
}

describe("account page: changes to how the account signs in", () => {
  let platform: LoginTestPlatform;

  before(async () => {
    platform = await startLoginPlatform({ PLATFORM_MAX_PASSWORD_ATTEMPTS: "100" });
  });
  after(() => platform.stop());

  const factors = (userId: string) =>
    platform.db.query<{ id: string; type: string; state: number }>(
      "SELECT id, type, state FROM user_factors WHERE user_id = $1 ORDER BY created_at",
      [userId],
    );
  const active = async (userId: string) =>
    (await factors(userId)).filter((f) => f.state === 2).map((f) => f.type);

  /** A browser signed in to the account page with the password alone, and its session. */
  async function signedIn(loginName: string) {
    const browser = new HttpBrowser(platform.url);
    const loginPage = await browser.follow("/ui/login/loginname");
    const passwordPage = await browser.submit(loginPage, "/ui/login/loginname", { loginName });
    const page = await browser.submit(passwordPage, "/ui/login/password", { password: PASSWORD });
    assert.equal(page.status, 200, page.text);
    const session = /name="session" value="([^"]+)"/.exec(page.text)?.[1];
    assert.ok(session);
    return { browser, page, session };
  }

  /** Adds an authenticator app on the account page (its code counts as the session's TOTP check). */
  async function addTotp(browser: HttpBrowser, page: Answer) {
    const added = await browser.submit(page, "/ui/login/account/otp/totp", {});
    const key = /<code class="totp-secret">([A-Z2-7 ]+)<\/code>/.exec(added.text)![1].replaceAll(" ", "");
    return browser.submit(added, "/ui/login/account/otp/totp/verify", {
      code: await generate({ secret: key }),
    });
  }

  /** A post of the account page for `session`, with the page's CSRF token (the form itself may be hidden). */
  const postFor = (browser: HttpBrowser, page: Answer, session: string, path: string, fields = {}) =>
    browser.post(path, { ...formOf(page.text, "/ui/login/account/profile"), session, ...fields });

  it("a session older than the authenticator app another session added neither removes it nor adds a passkey", async () => {
    const id = await addHuman(platform, "older-session", PASSWORD);
    const older = await signedIn("older-session");
    const newer = await signedIn("older-session");
    const withTotp = await addTotp(newer.browser, newer.page);
    assert.match(withTotp.text, /Your authenticator app is set up./);

    // the older session passed the password only: the app is a factor of the account now, whoever added it
    const olderPage = await older.browser.follow("/");
    assert.equal(olderPage.status, 200);
    assert.ok(olderPage.text.includes(SECOND_FACTOR_NEEDED));
    assert.doesNotMatch(olderPage.text, /passkeys\/new/, "no link to add a key");
    const removal = await postFor(
      older.browser,
      olderPage,
      older.session,
      "/ui/login/account/otp/totp/remove",
    );
    assert.equal(removal.status, 303);
    assert.ok((await older.browser.follow("/")).text.includes(SECOND_FACTOR_NEEDED));
    assert.deepEqual(await active(id), ["totp"], "the app stays");

    // nor does it start a passkey registration
    const registration = await older.browser.get(
      `/ui/login/account/passkeys/new?session=${older.session}&type=passkey`,
    );
    assert.equal(registration.status, 303);
    assert.equal(registration.location, `/?account=${encodeURIComponent(older.session)}`);
    assert.deepEqual(
      (await factors(id)).map((f) => f.type),
      ["totp"],
      "no pending passkey",
    );
    // nor verify one: a registration the newer session started, answered from the older one
    const newerRegistration = await newer.browser.get(
      `/ui/login/account/passkeys/new?session=${newer.session}&type=passkey`,
    );
    assert.equal(newerRegistration.status, 200, newerRegistration.text);
    const passkeyId = formOf(newerRegistration.text, "/ui/login/account/passkeys/verify").passkey;
    const credential = new SoftAuthenticator(platform.url).register(optionsOf(newerRegistration.text));
    const verified = await postFor(
      older.browser,
      olderPage,
      older.session,
      "/ui/login/account/passkeys/verify",
      {
        passkey: passkeyId,
        name: "Attacker key",
        credential: JSON.stringify(credential.json),
      },
    );
    assert.equal(verified.status, 303);
    assert.ok((await older.browser.follow("/")).text.includes(SECOND_FACTOR_NEEDED));
    assert.deepEqual(await active(id), ["totp"], "no passkey");

    // the session that passed the app removes it
    const removed = await newer.browser.submit(withTotp, "/ui/login/account/otp/totp/remove", {});
    assert.match(removed.text, /The authenticator app was removed./);
    assert.deepEqual(await active(id), []);
  });

  it("a factor is removed only by a session that verified one at least as strong: an authenticator app does not remove a passkey", async () => {
    const id = await addHuman(platform, "strength", PASSWORD);
    const { browser, page, session } = await signedIn("strength");
    const withTotp = await addTotp(browser, page);
    // the session passed the app: it may add a passkey
    const registration = await browser.get(`/ui/login/account/passkeys/new?session=${session}&type=passkey`);
    assert.equal(registration.status, 200, registration.text);
    const phone = new SoftAuthenticator(platform.url);
    const registered = phone.register(optionsOf(registration.text));
    const added = await browser.submit(registration, "/ui/login/account/passkeys/verify", {
      name: "Phone",
      credential: JSON.stringify(registered.json),
    });
    assert.match(added.text, /The key was added\./);
    assert.deepEqual((await active(id)).sort(), ["passkey", "totp"]);

    // an authenticator app is weaker than a passkey that verifies the user
    const refused = await browser.submit(added, "/ui/login/account/passkeys/remove", {});
    assert.ok(refused.text.includes(STRONGER_NEEDED), refused.text);
    assert.deepEqual((await active(id)).sort(), ["passkey", "totp"], "the passkey stays");
    // as strong as the app: it removes it
    const removed = await browser.submit(withTotp, "/ui/login/account/otp/totp/remove", {});
    assert.match(removed.text, /The authenticator app was removed./);
    assert.deepEqual(await active(id), ["passkey"]);
  });
});
