/**
 * Enrolling a second factor during a sign-in, over HTTP: a password alone cannot register a security key
 * or an authenticator app for an account that has a second factor already (so it cannot pass the
 * second-factor step with a factor of its own), and a security key enrolled in a forced-MFA sign-in
 * counts as the session's check (the sign-in completes without asking for the key again).
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { generate } from "otplib";
import { addOrg, eventCount, restClient } from "../../test/helpers.ts";
import {
  addHuman,
  createAuthRequest,
  formOf,
  HttpBrowser,
  type LoginTestPlatform,
  REDIRECT_URI,
  startLoginPlatform,
} from "../../test/login.ts";
import { Flags, SoftAuthenticator } from "../../test/webauthn.ts";
import { addCallers } from "../services/actions/testing.ts";

const PASSWORD = "Secret-Passw0rd!";
const USERS = "/resources/v3alpha/users";
const nowSeconds = () => Math.floor(Date.now() / 1000);

/** The options of a page's WebAuthn form (its data-options attribute, HTML-unescaped). */
function optionsOf(html: string) {
  const match = /data-options="([^"]*)"/.exec(html);
  assert.ok(match, "the page has a WebAuthn form");
  return JSON.parse(match[1].replaceAll("&quot;", '"').replaceAll("&#34;", '"').replaceAll("&amp;", "&"));
}

describe("login UI: enrolling a second factor during a sign-in", () => {
  let platform: LoginTestPlatform;
  let rest: ReturnType<typeof restClient>;

  before(async () => {
    platform = await startLoginPlatform();
    const callers = await addCallers(platform);
    rest = restClient(platform, () => callers.owner);
  });
  after(() => platform.stop());

  const activeFactors = async (userId: string) =>
    (
      await platform.db.query<{ type: string }>(
        "SELECT type FROM user_factors WHERE user_id = $1 AND state = 2 ORDER BY type",
        [userId],
      )
    ).map((r) => r.type);

  /** An authenticator app registered and verified through the users API; answers its secret. */
  async function addTotp(userId: string) {
    const registered = await rest("POST", `${USERS}/${userId}/totp`);
    assert.equal(registered.status, 200, registered.text);
    const code = await generate({ secret: registered.json.secret, epoch: nowSeconds() - 30 });
    const verified = await rest("POST", `${USERS}/${userId}/totp/_verify`, { json: { code } });
    assert.equal(verified.status, 200, verified.text);
  }

  /** A security key registration started through the users API and answered by `key` (not verified). */
  async function startedKey(userId: string, key: SoftAuthenticator) {
    const created = await rest("POST", `${USERS}/${userId}/passkeys`, { json: { type: "PASSKEY_TYPE_U2F" } });
    assert.equal(created.status, 201, created.text);
    const answer = key.register(created.json.public_key_credential_creation_options);
    return { passkeyId: created.json.passkey_id as string, answer };
  }

  /** A browser signed in with the password only for a new auth request; answers the form's hidden fields. */
  async function afterPassword(loginName: string) {
    const browser = new HttpBrowser(platform.url);
    const authRequest = await createAuthRequest(platform);
    const loginPage = await browser.follow(`/ui/login?authRequest=${authRequest.id}`);
    const passwordPage = await browser.submit(loginPage, "/ui/login/loginname", { loginName });
    const form = formOf(passwordPage.text, "/ui/login/password");
    const posted = await browser.post("/ui/login/password", { ...form, password: PASSWORD });
    // the password passed: straight on to the second factor (its page, or its registration)
    assert.equal(posted.status, 303, posted.text);
    assert.match(posted.location ?? "", /^\/ui\/login\/mfa(\/|\?)/);
    // the sign-in gave the browser a new cookie, and with it a new CSRF token: the forms after it have it
    const next = await browser.follow(posted.location!);
    const csrf = /name="csrf" value="([^"]+)"/.exec(next.text)?.[1];
    if (csrf) assert.notEqual(csrf, form.csrf, "a new CSRF token after the sign-in");
    return { browser, authRequest, form: csrf ? { ...form, csrf } : form, posted };
  }

  it("a password alone cannot register a security key for an account with an authenticator app", async () => {
    const userId = await addHuman(platform, "tara", PASSWORD);
    await addTotp(userId);
    const { browser, authRequest, form } = await afterPassword("tara");
    const choice = `/ui/login/mfa?authRequest=${authRequest.id}`;

    const page = await browser.get(`/ui/login/mfa/setup/u2f?authRequest=${authRequest.id}`);
    assert.equal(page.status, 302);
    assert.equal(page.location, choice);

    // a right registration, started through the API, posted to the sign-in's enrolment: refused
    const key = new SoftAuthenticator(platform.url, Flags.UP);
    const { passkeyId, answer } = await startedKey(userId, key);
    const events = await eventCount(platform);
    const posted = await browser.post("/ui/login/mfa/setup/u2f", {
      ...form,
      passkey: passkeyId,
      name: "Sneaky key",
      credential: JSON.stringify(answer.json),
    });
    assert.equal(posted.status, 303, posted.text);
    assert.equal(posted.location, choice);
    assert.equal(await eventCount(platform), events, "nothing stored");
    assert.deepEqual(await activeFactors(userId), ["totp"]);
    // the second factor is still to pass
    const complete = await browser.get(`/ui/login/complete?authRequest=${authRequest.id}`);
    assert.match(complete.location ?? "", /^\/ui\/login\/mfa\/(totp|webauthn)\?/, "the factor's own page");
    assert.equal(platform.completer.completionOf(authRequest.id), undefined);

    // the registration was a right one: the users API verifies it
    const verified = await rest("POST", `${USERS}/${userId}/passkeys/${passkeyId}/_verify`, {
      json: { public_key_credential: answer.json, name: "Sneaky key" },
    });
    assert.equal(verified.status, 200, verified.text);
  });

  it("a password alone cannot register an authenticator app for an account with a security key", async () => {
    const userId = await addHuman(platform, "kent", PASSWORD);
    const key = new SoftAuthenticator(platform.url, Flags.UP);
    const { passkeyId, answer } = await startedKey(userId, key);
    const verifiedKey = await rest("POST", `${USERS}/${userId}/passkeys/${passkeyId}/_verify`, {
      json: { public_key_credential: answer.json, name: "Blue key" },
    });
    assert.equal(verifiedKey.status, 200, verifiedKey.text);
    const { browser, authRequest, form } = await afterPassword("kent");
    const choice = `/ui/login/mfa?authRequest=${authRequest.id}`;

    const page = await browser.get(`/ui/login/mfa/setup/totp?authRequest=${authRequest.id}`);
    assert.equal(page.status, 302);
    assert.equal(page.location, choice);

    // a pending app (through the API) and its right code, posted to the sign-in's enrolment: refused
    const pending = await rest("POST", `${USERS}/${userId}/totp`);
    assert.equal(pending.status, 200, pending.text);
    const code = await generate({ secret: pending.json.secret });
    const events = await eventCount(platform);
    const posted = await browser.post("/ui/login/mfa/setup/totp", { ...form, code });
    assert.equal(posted.status, 303, posted.text);
    assert.equal(posted.location, choice);
    assert.equal(await eventCount(platform), events, "nothing stored");
    assert.deepEqual(await activeFactors(userId), ["u2f"]);
    assert.equal(platform.completer.completionOf(authRequest.id), undefined);
    // the code was a right one: the users API activates the app with it
    const verified = await rest("POST", `${USERS}/${userId}/totp/_verify`, { json: { code } });
    assert.equal(verified.status, 200, verified.text);
  });

  it("forced MFA: a security key enrolled during the sign-in completes it without asking for the key", async () => {
    const orgId = await addOrg(platform, "Strict");
    const policy = await rest("PATCH", `/settings/v3alpha/login?ctx.org_id=${orgId}`, {
      json: { force_mfa: { set: true } },
    });
    assert.equal(policy.status, 200, policy.text);
    const userId = await addHuman(platform, "quill", PASSWORD, { orgId });
    const { browser, authRequest, posted } = await afterPassword("quill");
    assert.equal(posted.location, `/ui/login/mfa/setup?authRequest=${authRequest.id}`);
    const forced = await browser.get(`/ui/login/complete?authRequest=${authRequest.id}`);
    assert.equal(forced.location, `/ui/login/mfa/setup?authRequest=${authRequest.id}`);

    const page = await browser.get(`/ui/login/mfa/setup/u2f?authRequest=${authRequest.id}`);
    assert.equal(page.status, 200, page.text);
    const key = new SoftAuthenticator(platform.url, Flags.UP);
    const registered = key.register(optionsOf(page.text));
    const enrolled = await browser.post("/ui/login/mfa/setup/u2f", {
      ...formOf(page.text, "/ui/login/mfa/setup/u2f"),
      name: "Green key",
      credential: JSON.stringify(registered.json),
    });
    assert.equal(enrolled.status, 303, enrolled.text);
    assert.equal(enrolled.location, `/ui/login/complete?authRequest=${authRequest.id}`);
    assert.deepEqual(await activeFactors(userId), ["u2f"]);

    const complete = await browser.get(enrolled.location!);
    assert.equal(complete.status, 302);
    assert.ok(complete.location?.startsWith(REDIRECT_URI), `completed: ${complete.location}`);
    const completion = platform.completer.completionOf(authRequest.id);
    assert.ok(completion);
    assert.deepEqual(completion.session.amr, ["pwd", "hwk", "mfa"]);
  });
});
