/**
 * The login policy over the passwordless sign-in, set through the settings API: `passwordless_allowed` off
 * (for the instance, or for the organization of the sign-in or of the passkey's user) takes the passkey off
 * the login-name page and refuses /ui/login/passkey, storing nothing; on, both work; and the passkey stays
 * offered when passwords are ruled out.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { eventCount, restClient } from "../../test/helpers.ts";
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
import { type Credential, SoftAuthenticator } from "../../test/webauthn.ts";
import { addCallers } from "../services/actions/testing.ts";

const PASSWORD = "Secret-Passw0rd!";
const SETTINGS = "/settings/v3alpha/login";
const NOT_ALLOWED = "Signing in with a passkey is not allowed here. Sign in another way.";

/** The options of a page's WebAuthn form (its data-options attribute, HTML-unescaped). */
function optionsOf(html: string) {
  const match = /data-options="([^"]*)"/.exec(html);
  assert.ok(match, "the page has a WebAuthn form");
  return JSON.parse(match[1].replaceAll("&quot;", '"').replaceAll("&#34;", '"').replaceAll("&amp;", "&"));
}

describe("login UI: the login policy over passwordless sign-in", () => {
  let platform: LoginTestPlatform;
  let rest: ReturnType<typeof restClient>;
  let defaultOrgId: string;
  let erinId: string;
  let phone: SoftAuthenticator;
  let passkey: Credential;

  before(async () => {
    platform = await startLoginPlatform();
    defaultOrgId = platform.bootstrapResult!.orgId;
    const callers = await addCallers(platform);
    rest = restClient(platform, () => callers.owner);
    // erin's passkey, registered through the users API
    erinId = await addHuman(platform, "erin", PASSWORD);
    phone = new SoftAuthenticator(platform.url);
    const created = await rest("POST", `/resources/v3alpha/users/${erinId}/passkeys`, { json: {} });
    assert.equal(created.status, 201, created.text);
    const answer = phone.register(created.json.public_key_credential_creation_options);
    const verified = await rest(
      "POST",
      `/resources/v3alpha/users/${erinId}/passkeys/${created.json.passkey_id}/_verify`,
      { json: { public_key_credential: answer.json, name: "Phone" } },
    );
    assert.equal(verified.status, 200, verified.text);
    phone.keep(answer.credential);
    passkey = answer.credential;
  });
  after(() => platform.stop());

  const setPolicy = async (json: Record<string, unknown>, orgId?: string) => {
    const path = orgId ? `${SETTINGS}?ctx.org_id=${orgId}` : SETTINGS;
    const answer = await rest("PATCH", path, { json });
    assert.equal(answer.status, 200, answer.text);
  };
  const erinsSessions = async () =>
    Number(
      (
        await platform.db.query<{ n: number }>("SELECT count(*)::int AS n FROM sessions WHERE user_id = $1", [
          erinId,
        ])
      )[0].n,
    );

  /** The login-name page of a new auth request (of `orgId`) in a new browser. */
  async function loginNamePage(orgId?: string) {
    const browser = new HttpBrowser(platform.url);
    const authRequest = await createAuthRequest(platform, orgId ? { orgId } : {});
    const page = await browser.follow(`/ui/login?authRequest=${authRequest.id}`);
    assert.equal(page.status, 200, page.text);
    return { browser, authRequest, page };
  }

  /** Posts an assertion of erin's passkey answering the options of `page`. */
  const postPasskey = (browser: HttpBrowser, page: Answer) =>
    browser.post("/ui/login/passkey", {
      ...formOf(page.text, "/ui/login/passkey"),
      credential: JSON.stringify(phone.assert(passkey, optionsOf(page.text))),
    });

  const offersPasskey = (page: Answer) => {
    assert.match(page.text, /href="\/ui\/login\/passkey\?authRequest=/);
    assert.match(page.text, /autocomplete="username webauthn"/);
    assert.match(page.text, /data-webauthn="conditional"/);
  };
  const offersNoPasskey = (page: Answer) => {
    assert.doesNotMatch(page.text, /\/ui\/login\/passkey/);
    assert.doesNotMatch(page.text, /webauthn/);
    assert.match(page.text, /autocomplete="username"/, "the login-name form is still there");
  };

  it("off for the instance: no passkey on the login-name page, the passkey page and its post refused, nothing stored", async () => {
    // a passkey page shown while it was allowed: its challenge is kept on the request
    const { browser, authRequest, page } = await loginNamePage();
    offersPasskey(page);
    const passkeyPage = await browser.get(`/ui/login/passkey?authRequest=${authRequest.id}`);
    assert.equal(passkeyPage.status, 200, passkeyPage.text);

    await setPolicy({ passwordless_allowed: { set: false } });
    try {
      offersNoPasskey((await loginNamePage()).page);
      const refusedPage = await browser.get(`/ui/login/passkey?authRequest=${authRequest.id}`);
      assert.equal(refusedPage.status, 403);
      assert.equal(alertOf(refusedPage.text), NOT_ALLOWED);
      assert.match(
        refusedPage.text,
        new RegExp(`href="/ui/login/loginname\\?authRequest=${authRequest.id}"`),
      );
      assert.doesNotMatch(refusedPage.text, /data-webauthn/);
      // the UI's own sign-in (no auth request) is refused the same way
      const own = await new HttpBrowser(platform.url).get("/ui/login/passkey");
      assert.equal(own.status, 403);
      assert.equal(alertOf(own.text), NOT_ALLOWED);

      // a right assertion of the challenge kept from before: refused, no session, no event
      const events = await eventCount(platform);
      const posted = await postPasskey(browser, passkeyPage);
      assert.equal(posted.status, 303, posted.text);
      assert.equal(posted.location, `/ui/login/passkey?authRequest=${authRequest.id}`);
      assert.equal((await browser.get(posted.location!)).status, 403);
      assert.equal(await eventCount(platform), events);
      assert.equal(await erinsSessions(), 0);
      assert.equal(platform.completer.completionOf(authRequest.id), undefined);
    } finally {
      await setPolicy({ passwordless_allowed: { reset: true } });
    }

    // allowed again: the same kind of sign-in works
    const again = await loginNamePage();
    offersPasskey(again.page);
    const allowedPage = await again.browser.get(`/ui/login/passkey?authRequest=${again.authRequest.id}`);
    assert.equal(allowedPage.status, 200, allowedPage.text);
    const signedIn = await postPasskey(again.browser, allowedPage);
    // the passed passkey completes the sign-in at once: 303 to the client
    assert.equal(signedIn.status, 303, signedIn.text);
    assert.ok(new URL(signedIn.location!).searchParams.get("code"), signedIn.location ?? "");
    assert.equal(platform.completer.completionOf(again.authRequest.id)?.session.userId, erinId);
  });

  it("off for an organization: its sign-ins have no passkey, and its users' passkeys do not sign in elsewhere", async () => {
    await setPolicy({ passwordless_allowed: { set: false } }, defaultOrgId);
    try {
      // an auth request of the organization: the organization's policy
      const own = await loginNamePage(defaultOrgId);
      offersNoPasskey(own.page);
      const refused = await own.browser.get(`/ui/login/passkey?authRequest=${own.authRequest.id}`);
      assert.equal(refused.status, 403);
      assert.equal(alertOf(refused.text), NOT_ALLOWED);

      // an auth request without organization: the instance allows passkeys, erin's organization does not
      const { browser, authRequest, page } = await loginNamePage();
      offersPasskey(page);
      const passkeyPage = await browser.get(`/ui/login/passkey?authRequest=${authRequest.id}`);
      assert.equal(passkeyPage.status, 200, passkeyPage.text);
      const sessions = await erinsSessions();
      const events = await eventCount(platform);
      const posted = await postPasskey(browser, passkeyPage);
      assert.equal(posted.status, 303, posted.text);
      assert.equal(posted.location, `/ui/login/loginname?authRequest=${authRequest.id}`);
      const back = await browser.get(posted.location!);
      assert.equal(alertOf(back.text), NOT_ALLOWED);
      assert.equal(await eventCount(platform), events);
      assert.equal(await erinsSessions(), sessions);
      assert.equal(platform.completer.completionOf(authRequest.id), undefined);
    } finally {
      await setPolicy({ passwordless_allowed: { reset: true } }, defaultOrgId);
    }
  });

  it("allow_username_password=false: the login-name page still offers the passkey", async () => {
    await setPolicy({ allow_username_password: { set: false } });
    try {
      const { browser, authRequest, page } = await loginNamePage();
      assert.doesNotMatch(page.text, /name="loginName"/, "no login-name form");
      assert.match(page.text, new RegExp(`href="/ui/login/passkey\\?authRequest=${authRequest.id}"`));
      const passkeyPage = await browser.get(`/ui/login/passkey?authRequest=${authRequest.id}`);
      assert.equal(passkeyPage.status, 200, passkeyPage.text);
      const signedIn = await postPasskey(browser, passkeyPage);
      assert.equal(signedIn.status, 303, signedIn.text);
      assert.ok(new URL(signedIn.location!).searchParams.get("code"), signedIn.location ?? "");
    } finally {
      await setPolicy({ allow_username_password: { reset: true } });
    }
  });
});
