import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { decodeJwt } from "jose";
import { authorizePath, responseParams, signInThroughUi } from "../../test/authorize.ts";
import { type Json, restClient, startPlatform, type TestPlatform } from "../../test/helpers.ts";
import { addHuman, HttpBrowser } from "../../test/login.ts";
import { client, discover, ownerToken } from "../../test/oidc.ts";

const PROJECTS = "/resources/v3alpha/projects";
const CALLBACK = "https://portal.example/callback";
const PASSWORD = "Secret-Passw0rd!";
const NEW_PASSWORD = "N3w-Secret-Passw0rd!";
const AUD_PLATFORM = "urn:platform:iam:org:project:id:platform:aud";
const SCOPE = `openid profile offline_access ${AUD_PLATFORM}`;

/**
 * A password change ends the user's other sessions, and with them the access and refresh tokens issued
 * from them, in the change's transaction: the account page (which may keep this browser's session), the
 * users API's `_set_password` by the user (keeping the session its token came from) and by an
 * administrator (ending every session).
 */
describe("a password change ends the user's other sessions and their tokens", () => {
  let platform: TestPlatform;
  let owner: string;
  let app: client.Configuration;

  const rest = restClient(
    () => platform,
    () => owner,
  );
  const created = async (path: string, json: unknown): Promise<Json> => {
    const r = await rest("POST", path, { json });
    assert.equal(r.status, 201, r.text);
    return r.json;
  };

  /** `username` signs in on a new browser for the app: the browser, its tokens and its session's ID. */
  const signIn = async (username: string, password = PASSWORD) => {
    const browser = new HttpBrowser(platform.url);
    const verifier = client.randomPKCECodeVerifier();
    const state = client.randomState();
    const nonce = client.randomNonce();
    const path = authorizePath({
      client_id: app.clientMetadata().client_id,
      redirect_uri: CALLBACK,
      response_type: "code",
      scope: SCOPE,
      state,
      nonce,
      code_challenge: await client.calculatePKCECodeChallenge(verifier),
      code_challenge_method: "S256",
    });
    const answer = await signInThroughUi(browser, path, username, password);
    const tokens = await client.authorizationCodeGrant(app, responseParams(answer).url, {
      pkceCodeVerifier: verifier,
      expectedState: state,
      expectedNonce: nonce,
      idTokenExpected: true,
    });
    assert.equal((await client.tokenIntrospection(app, tokens.access_token)).active, true);
    return { browser, tokens, sessionId: String(decodeJwt(tokens.id_token!).sid) };
  };
  type Signed = Awaited<ReturnType<typeof signIn>>;

  /** The session is gone from its browser and from the sessions API, its tokens are refused. */
  const assertEnded = async (signed: Signed, how: string) => {
    assert.deepEqual(
      await client.tokenIntrospection(app, signed.tokens.access_token),
      { active: false },
      `${how}: the access token`,
    );
    await assert.rejects(
      client.refreshTokenGrant(app, signed.tokens.refresh_token!),
      (e: client.ResponseBodyError) => e.error === "invalid_grant",
      `${how}: the refresh token`,
    );
    const session = await rest("GET", `/resources/v3alpha/sessions/${signed.sessionId}`);
    assert.equal(session.status, 404, `${how}: the session ended`);
    const page = await signed.browser.get("/");
    assert.equal(page.status, 302, `${how}: the browser is signed out`);
    assert.match(page.location ?? "", /^\/ui\/login\/loginname/);
  };
  const assertAlive = async (signed: Signed, how: string) => {
    assert.equal(
      (await client.tokenIntrospection(app, signed.tokens.access_token)).active,
      true,
      `${how}: the access token`,
    );
    const refreshed = await client.refreshTokenGrant(app, signed.tokens.refresh_token!);
    assert.equal((await client.tokenIntrospection(app, refreshed.access_token)).active, true);
    assert.equal((await signed.browser.get("/")).status, 200, `${how}: the account page`);
  };

  /** The account page's password form, posted with `keepSession` as the checkbox sends it. */
  const changeOnAccountPage = async (signed: Signed, keep: boolean) => {
    const page = await signed.browser.follow("/");
    assert.equal(page.status, 200);
    assert.match(page.text, /name="keepSession" type="checkbox" value="true" checked/);
    return signed.browser.submit(page, "/ui/login/account/password", {
      currentPassword: PASSWORD,
      newPassword: NEW_PASSWORD,
      newPasswordConfirm: NEW_PASSWORD,
      ...(keep ? { keepSession: "true" } : {}),
    });
  };

  before(async () => {
    platform = await startPlatform({ listen: true });
    owner = await ownerToken(platform);
    const projectId = (await created(PROJECTS, { name: "Portal" })).details.id;
    const a = await created(`${PROJECTS}/${projectId}/apps`, {
      name: "portal",
      oidc: {
        redirect_uris: [CALLBACK],
        response_types: ["OIDC_RESPONSE_TYPE_CODE"],
        grant_types: ["OIDC_GRANT_TYPE_AUTHORIZATION_CODE", "OIDC_GRANT_TYPE_REFRESH_TOKEN"],
        app_type: "OIDC_APP_TYPE_WEB",
        auth_method: "OIDC_AUTH_METHOD_TYPE_BASIC",
      },
    });
    app = await discover(platform.url, a.client_id, client.ClientSecretBasic(a.client_secret));
  });
  after(() => platform?.stop());

  it("the account page, staying signed in on this browser: the other browser's session and tokens end", async () => {
    await addHuman(platform, "anna", PASSWORD);
    await addHuman(platform, "otto", PASSWORD);
    const here = await signIn("anna");
    const there = await signIn("anna");
    const someoneElse = await signIn("otto");
    const changed = await changeOnAccountPage(here, true);
    assert.equal(changed.status, 200);
    assert.match(changed.text, /Your password was changed\. You were signed out on every other browser/);
    await assertEnded(there, "the other browser");
    await assertAlive(here, "this browser");
    await assertAlive(someoneElse, "another user");
    // the new password signs in; the old one no longer does
    await signIn("anna", NEW_PASSWORD);
  });

  it("the account page, not staying signed in: this browser's session ends too", async () => {
    await addHuman(platform, "bruno", PASSWORD);
    const here = await signIn("bruno");
    const there = await signIn("bruno");
    const changed = await changeOnAccountPage(here, false);
    assert.match(changed.text, /You are signed out/);
    await assertEnded(here, "this browser");
    await assertEnded(there, "the other browser");
  });

  it("_set_password by the user itself keeps the session of its token and ends the others", async () => {
    const userId = await addHuman(platform, "carla", PASSWORD);
    await created("/resources/v3alpha/memberships", { user_id: userId, roles: ["IAM_OWNER"] });
    const here = await signIn("carla");
    const there = await signIn("carla");
    const set = await rest("POST", `/resources/v3alpha/users/${userId}/_set_password`, {
      token: here.tokens.access_token,
      json: { password: NEW_PASSWORD, current_password: PASSWORD },
    });
    assert.equal(set.status, 200, set.text);
    await assertEnded(there, "the other session");
    await assertAlive(here, "the session of the caller's token");
  });

  it("the required change at sign-in ends the user's other sessions; the sign-in goes on", async () => {
    const userId = await addHuman(platform, "emil", PASSWORD);
    const elsewhere = await signIn("emil");
    const required = await rest("POST", `/resources/v3alpha/users/${userId}/_set_password`, {
      json: { password: NEW_PASSWORD, change_required: true },
    });
    assert.equal(required.status, 200, required.text);
    await assertEnded(elsewhere, "the administrator's password");
    // a browser stopped at "choose a new password" (its session exists), and another that changes it
    const waiting = new HttpBrowser(platform.url);
    const stopped = await signInThroughUi(waiting, "/ui/login/loginname", "emil", NEW_PASSWORD);
    assert.match(stopped.text, /action="\/ui\/login\/password-change"/);
    const sessions = () =>
      platform.db.query<{ id: string }>("SELECT id FROM sessions WHERE user_id = $1", [userId]);
    const [waitingSession] = await sessions();
    const changer = new HttpBrowser(platform.url);
    const page = await signInThroughUi(changer, "/ui/login/loginname", "emil", NEW_PASSWORD);
    const done = await changer.submit(page, "/ui/login/password-change", {
      password: PASSWORD,
      passwordConfirm: PASSWORD,
    });
    assert.match(done.text, /Your account/, done.text.slice(0, 300));
    const left = await sessions();
    assert.equal(left.length, 1, "only the changer's session");
    assert.notEqual(left[0].id, waitingSession.id);
    assert.equal((await waiting.get("/")).status, 302, "the other browser is signed out");
  });

  it("_set_password by an administrator, or with a reset code, ends every session of the user", async () => {
    const userId = await addHuman(platform, "dora", PASSWORD);
    const first = await signIn("dora");
    const second = await signIn("dora");
    const set = await rest("POST", `/resources/v3alpha/users/${userId}/_set_password`, {
      json: { password: NEW_PASSWORD },
    });
    assert.equal(set.status, 200, set.text);
    await assertEnded(first, "administrator");
    await assertEnded(second, "administrator");

    const again = await signIn("dora", NEW_PASSWORD);
    const reset = await rest("POST", `/resources/v3alpha/users/${userId}/password/_request_reset`, {
      json: { return_code: true },
    });
    assert.equal(reset.status, 200, reset.text);
    const withCode = await rest("POST", `/resources/v3alpha/users/${userId}/_set_password`, {
      json: { password: PASSWORD, verification_code: reset.json.verification_code },
    });
    assert.equal(withCode.status, 200, withCode.text);
    await assertEnded(again, "reset code");
  });
});
