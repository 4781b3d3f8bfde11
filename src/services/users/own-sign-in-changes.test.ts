/**
 * A user changing its own factors through the users API with an access token of its browser session
 * (./own-sign-in-changes.ts, docs/factors.md "Changes to how an account signs in"): the session must have
 * passed the account's second factor, and verified a factor at least as strong as one it removes; an
 * administrator with user.write is not bound.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { generate } from "otplib";
import { authorizePath, responseParams, signInThroughUi } from "../../../test/authorize.ts";
import { assertRejected, restClient, startPlatform, type TestPlatform } from "../../../test/helpers.ts";
import { HttpBrowser } from "../../../test/login.ts";
import { client, discover } from "../../../test/oidc.ts";
import { addCallers } from "../actions/testing.ts";

const USERS = "/resources/v3alpha/users";
const CALLBACK = "https://self.example/callback";
const API_SCOPE = "openid urn:platform:iam:org:project:id:platform:aud";
const PASSWORD = "Correct-Horse-1!";
const nowSeconds = () => Math.floor(Date.now() / 1000);

describe("users: changing one's own factors with a session", () => {
  let platform: TestPlatform;
  let callers: Awaited<ReturnType<typeof addCallers>>;
  let config: client.Configuration;
  const rest = restClient(
    () => platform,
    () => callers.owner,
  );

  before(async () => {
    platform = await startPlatform({ listen: true });
    callers = await addCallers(platform);
    const project = await rest("POST", "/resources/v3alpha/projects", { json: { name: "self service" } });
    assert.equal(project.status, 201, project.text);
    const app = await rest("POST", `/resources/v3alpha/projects/${project.json.details.id}/apps`, {
      json: {
        name: "self",
        oidc: {
          redirect_uris: [CALLBACK],
          response_types: ["OIDC_RESPONSE_TYPE_CODE"],
          grant_types: ["OIDC_GRANT_TYPE_AUTHORIZATION_CODE"],
          app_type: "OIDC_APP_TYPE_WEB",
          auth_method: "OIDC_AUTH_METHOD_TYPE_BASIC",
        },
      },
    });
    assert.equal(app.status, 201, app.text);
    config = await discover(
      platform.url,
      app.json.client_id,
      client.ClientSecretBasic(app.json.client_secret),
    );
  });
  after(() => platform.stop());

  /** An access token of a new browser session: the password, then the authenticator code if asked. */
  async function signIn(username: string, totp?: () => Promise<string>) {
    const verifier = client.randomPKCECodeVerifier();
    const state = client.randomState();
    const path = authorizePath({
      client_id: config.clientMetadata().client_id,
      redirect_uri: CALLBACK,
      response_type: "code",
      scope: API_SCOPE,
      state,
      code_challenge: await client.calculatePKCECodeChallenge(verifier),
      code_challenge_method: "S256",
    });
    const browser = new HttpBrowser(platform.url);
    let answer = await signInThroughUi(browser, path, username, PASSWORD);
    if (totp) answer = await browser.submit(answer, "/ui/login/mfa/totp", { code: await totp() });
    const tokens = await client.authorizationCodeGrant(config, responseParams(answer).url, {
      pkceCodeVerifier: verifier,
      expectedState: state,
    });
    return tokens.access_token;
  }

  it("a session that passed only the password does not remove an authenticator app added later; one that passed it does", async () => {
    const created = await rest("POST", USERS, {
      json: {
        username: "own-removal",
        human: {
          profile: { given_name: "Ada", family_name: "Lovelace" },
          email: { address: "own-removal@example.com", is_verified: true },
          password: { password: PASSWORD, change_required: false },
        },
      },
    });
    assert.equal(created.status, 201, created.text);
    const id = created.json.details.id as string;
    const passwordOnlyToken = await signIn("own-removal");
    const passwordOnly = restClient(platform, () => passwordOnlyToken);

    // an authenticator app added after that session began (here by an administrator)
    const registered = await rest("POST", `${USERS}/${id}/totp`);
    assert.equal(registered.status, 200, registered.text);
    const secret = registered.json.secret as string;
    const verified = await rest("POST", `${USERS}/${id}/totp/_verify`, {
      json: { code: await generate({ secret }) },
    });
    assert.equal(verified.status, 200, verified.text);

    await assertRejected(
      platform,
      () => passwordOnly("DELETE", `${USERS}/${id}/totp`),
      403,
      7,
      /at least as strong/,
    );
    // nor add a factor of its own: the account has a second factor this session did not pass
    await assertRejected(
      platform,
      () => passwordOnly("POST", `${USERS}/${id}/otp_email`),
      403,
      7,
      /passed the account's second factor/,
    );
    await assertRejected(
      platform,
      () => passwordOnly("POST", `${USERS}/${id}/passkeys`, { json: {} }),
      403,
      7,
    );
    const methods = await rest("GET", `${USERS}/${id}/authentication_methods`);
    assert.ok(methods.json.types.includes("AUTHENTICATION_METHOD_TYPE_TOTP"), "the app stays");

    // a session that passed the app removes it (the code of the next step, after the registration's)
    const withTotpToken = await signIn("own-removal", () => generate({ secret, epoch: nowSeconds() + 30 }));
    const withTotp = restClient(platform, () => withTotpToken);
    const removed = await withTotp("DELETE", `${USERS}/${id}/totp`);
    assert.equal(removed.status, 200, removed.text);

    // codes by e-mail: the password-only session may not turn them off either; an administrator may
    assert.equal((await rest("POST", `${USERS}/${id}/otp_email`)).status, 200);
    await assertRejected(platform, () => passwordOnly("DELETE", `${USERS}/${id}/otp_email`), 403, 7);
    assert.equal((await rest("DELETE", `${USERS}/${id}/otp_email`)).status, 200);
  });
});
