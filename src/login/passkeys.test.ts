/**
 * The login UI's WebAuthn pages over HTTP with a software authenticator (the passkey flows in Chromium are
 * test/passkeys-browser.test.ts): the passwordless sign-in and its refusals, a security key's enrolment and
 * its use as second factor of the auth request's session, the account page's removal, and the pages' CSP.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { addOrg } from "../../test/helpers.ts";
import {
  type Answer,
  addHuman,
  alertOf,
  createAuthRequest,
  formOf,
  HttpBrowser,
  type LoginTestPlatform,
  startLoginPlatform,
} from "../../test/login.ts";
import { type Credential, Flags, SoftAuthenticator } from "../../test/webauthn.ts";

const PASSWORD = "Secret-Passw0rd!";

/** The options of a page's WebAuthn form (its data-options attribute, HTML-unescaped). */
function optionsOf(html: string) {
  const match = /data-options="([^"]*)"/.exec(html);
  assert.ok(match, "the page has a WebAuthn form");
  const text = match[1]
    .replaceAll("&quot;", '"')
    .replaceAll("&#34;", '"')
    .replaceAll("&#39;", "'")
    .replaceAll("&lt;", "<")
    .replaceAll("&gt;", ">")
    .replaceAll("&#38;", "&")
    .replaceAll("&amp;", "&");
  return JSON.parse(text);
}

describe("login UI: passkeys and security keys over HTTP", () => {
  let platform: LoginTestPlatform;
  let daveId: string;

  before(async () => {
    platform = await startLoginPlatform({ PLATFORM_MAX_PASSWORD_ATTEMPTS: "100" });
    daveId = await addHuman(platform, "dave", PASSWORD);
  });
  after(() => platform.stop());

  const factors = (userId: string) =>
    platform.db.query<{ id: string; type: string; state: number; name: string }>(
      "SELECT id, type, state, name FROM user_factors WHERE user_id = $1 ORDER BY created_at",
      [userId],
    );

  /** A browser signed in to dave's account page with the password; answers the browser's session. */
  async function signedIn(browser: HttpBrowser) {
    const loginPage = await browser.follow("/ui/login/loginname");
    const passwordPage = await browser.submit(loginPage, "/ui/login/loginname", { loginName: "dave" });
    const account = await browser.submit(passwordPage, "/ui/login/password", { password: PASSWORD });
    assert.equal(account.status, 200, account.text);
    const session = /name="session" value="([^"]+)"/.exec(account.text)?.[1];
    assert.ok(session);
    return session;
  }

  it("enrols a security key in a sign-in, uses it as second factor, and the account page lists and removes it", async () => {
    const browser = new HttpBrowser(platform.url);
    const sessionId = await signedIn(browser);
    const key = new SoftAuthenticator(platform.url, Flags.UP);

    // Enrolment (the sign-in's session): the page's options ask for a cross-platform key, presence only.
    // Without a key yet, the second-factor page sends there.
    const enrol = await createAuthRequest(platform);
    await platform.login.authRequests.attachSession(enrol, sessionId);
    const noKey = await browser.get(`/ui/login/mfa/webauthn?authRequest=${enrol.id}`);
    assert.equal(noKey.status, 302);
    assert.equal(noKey.location, `/ui/login/mfa/setup/u2f?authRequest=${enrol.id}`);
    const setup = await browser.get(`/ui/login/mfa/setup/u2f?authRequest=${enrol.id}`);
    assert.equal(setup.status, 200, setup.text);
    assert.match(setup.headers.get("content-security-policy") ?? "", /script-src 'self'/);
    assert.match(setup.text, /<script src="\/ui\/assets\/webauthn\.[0-9a-f]{16}\.js" defer><\/script>/);
    const creation = optionsOf(setup.text);
    assert.equal(creation.authenticatorSelection.userVerification, "discouraged");
    assert.equal(creation.authenticatorSelection.authenticatorAttachment, "cross-platform");
    // a name of 201 characters: the page again with the error, nothing verified
    const registered = key.register(creation);
    const tooLong = await browser.submit(setup, "/ui/login/mfa/setup/u2f", {
      name: "k".repeat(201),
      credential: JSON.stringify(registered.json),
    });
    assert.equal(alertOf(tooLong.text), "Enter a name of 1 to 200 characters.");
    assert.equal((await factors(daveId)).filter((f) => Number(f.state) === 2).length, 0);
    // a wrong answer (another origin): refused
    const retry = key.register(optionsOf(tooLong.text), { origin: "https://evil.example" });
    const wrong = await browser.submit(tooLong, "/ui/login/mfa/setup/u2f", {
      name: "Blue key",
      credential: JSON.stringify(retry.json),
    });
    assert.equal(alertOf(wrong.text), "The key could not be registered. Try again.");
    const right = key.register(optionsOf(wrong.text));
    const done = await browser.submit(wrong, "/ui/login/mfa/setup/u2f", {
      name: "Blue key",
      credential: JSON.stringify(right.json),
    });
    assert.equal(done.status, 302, "completed");
    key.keep(right.credential);
    const active = (await factors(daveId)).filter((f) => Number(f.state) === 2);
    assert.deepEqual(
      active.map((f) => [f.type, f.name]),
      [["u2f", "Blue key"]],
    );

    // Second factor of another sign-in's session: a wrong signature is refused, the right one passes.
    const second = await createAuthRequest(platform);
    await platform.login.authRequests.attachSession(second, sessionId);
    const mfa = await browser.get(`/ui/login/mfa/webauthn?authRequest=${second.id}`);
    assert.equal(mfa.status, 200, mfa.text);
    let request = optionsOf(mfa.text);
    assert.deepEqual(
      request.allowCredentials.map((c: { id: string }) => c.id),
      [right.credential.id.toString("base64url")],
    );
    const credential: Credential = right.credential;
    const refused = await browser.submit(mfa, "/ui/login/mfa/webauthn", {
      credential: JSON.stringify(key.assert(credential, request, { signature: "wrong" })),
    });
    assert.equal(alertOf(refused.text), "The security key could not be verified. Try again.");
    credential.counter--;
    request = optionsOf(refused.text);
    const passed = await browser.submit(refused, "/ui/login/mfa/webauthn", {
      credential: JSON.stringify(key.assert(credential, request)),
    });
    assert.equal(passed.status, 302);
    const completion = platform.completer.completionOf(second.id);
    assert.ok(completion);
    assert.deepEqual(completion.session.amr, ["pwd", "hwk", "mfa"]);

    // The account page lists it; removing it is a post back to the page.
    const account = await browser.get(`/?account=${sessionId}`);
    assert.match(account.text, /Passkeys and security keys/);
    assert.match(account.text, /Blue key/);
    const removed = await browser.submit(account, "/ui/login/account/passkeys/remove", {
      passkey: active[0].id,
    });
    assert.match(removed.text, /The key was removed\./);
    assert.match(removed.text, /No passkeys or security keys yet\./);
    assert.equal((await factors(daveId)).filter((f) => Number(f.state) === 2).length, 0);
  });

  it("signs in with a passkey alone; unknown, foreign and wrong assertions get one answer", async () => {
    const erinId = await addHuman(platform, "erin", PASSWORD);
    const browser = new HttpBrowser(platform.url);
    // erin's passkey, registered on the account page
    const loginPage = await browser.follow("/ui/login/loginname");
    const passwordPage = await browser.submit(loginPage, "/ui/login/loginname", { loginName: "erin" });
    const account = await browser.submit(passwordPage, "/ui/login/password", { password: PASSWORD });
    const session = /name="session" value="([^"]+)"/.exec(account.text)?.[1];
    const phone = new SoftAuthenticator(platform.url);
    const page = await browser.get(`/ui/login/account/passkeys/new?session=${session}&type=passkey`);
    assert.equal(page.status, 200, page.text);
    const creation = optionsOf(page.text);
    assert.equal(creation.authenticatorSelection.residentKey, "required");
    const registered = phone.register(creation);
    const added = await browser.submit(page, "/ui/login/account/passkeys/verify", {
      name: "Phone",
      credential: JSON.stringify(registered.json),
    });
    assert.match(added.text, /The key was added\./);
    phone.keep(registered.credential);
    // a user of another organization with a passkey too
    const otherOrg = await addOrg(platform, "Elsewhere");
    const frankId = await addHuman(platform, "frank", PASSWORD, { orgId: otherOrg });

    // A new browser: the login-name page offers the passkey (autofill and link).
    const fresh = new HttpBrowser(platform.url);
    const authRequest = await createAuthRequest(platform);
    const loginName = await fresh.follow(`/ui/login?authRequest=${authRequest.id}`);
    assert.match(loginName.text, /autocomplete="username webauthn"/);
    assert.match(loginName.text, /data-webauthn="conditional"/);
    assert.match(loginName.headers.get("content-security-policy") ?? "", /script-src 'self'/);
    const passkeyPage = await fresh.get(`/ui/login/passkey?authRequest=${authRequest.id}`);
    let options = optionsOf(passkeyPage.text);
    assert.deepEqual(options.allowCredentials, []);
    assert.equal(options.userVerification, "required");

    const post = async (page: Answer, assertion: unknown) =>
      fresh.submit(page, "/ui/login/passkey", { credential: JSON.stringify(assertion) });
    const failures: Array<[string, (o: unknown) => unknown]> = [
      ["no user verification", (o) => phone.assert(registered.credential, o as never, { flags: Flags.UP })],
      ["another challenge", (o) => phone.assert(registered.credential, o as never, { challenge: "AAAA" })],
      [
        "an unknown credential",
        (o) => ({ ...(phone.assert(registered.credential, o as never) as object), id: "unknown" }),
      ],
      ["not JSON", () => "not json"],
    ];
    let current = passkeyPage;
    for (const [what, make] of failures) {
      const counter = registered.credential.counter;
      const answer = await post(current, make(options));
      assert.equal(
        alertOf(answer.text),
        "The passkey could not be verified. Try again, or sign in another way.",
        what,
      );
      registered.credential.counter = counter;
      current = answer;
      options = optionsOf(answer.text);
    }
    assert.equal(platform.completer.completionOf(authRequest.id), undefined);

    // Only users of the requested organization: erin's passkey does not sign in to frank's organization.
    const foreign = await createAuthRequest(platform, { orgId: otherOrg });
    const foreignPage = await fresh.get(`/ui/login/passkey?authRequest=${foreign.id}`);
    const foreignAnswer = await post(
      foreignPage,
      phone.assert(registered.credential, optionsOf(foreignPage.text)),
    );
    assert.match(alertOf(foreignAnswer.text) ?? "", /could not be verified/);
    assert.ok(frankId);

    const signedIn = await post(current, phone.assert(registered.credential, options));
    assert.equal(signedIn.status, 303);
    const completion = platform.completer.completionOf(authRequest.id);
    assert.ok(completion);
    assert.equal(completion.session.userId, erinId);
    assert.deepEqual(completion.session.amr, ["hwk", "user", "mfa"]);
    // the challenge was used up: the same assertion cannot sign in again
    assert.equal(
      (await platform.login.authRequests.find(authRequest.instanceId, authRequest.id))?.uiState.passkey,
      undefined,
    );
    assert.ok(formOf(passkeyPage.text, "/ui/login/passkey").csrf);
  });
});
