/**
 * Accounts above their organization (docs/factors.md): an organization's owner sets its login policy, but
 * an account holding roles the owner does not (an instance role, a role in another organization) signs in
 * under the instance's policy. Over HTTP: the settings API, the login UI's form posts, openid-client
 * redeeming the codes, and the management API with the tokens.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { generate } from "otplib";
import {
  authorizePath,
  createOidcApp,
  createProject,
  responseParams,
  signInThroughUi,
} from "../../test/authorize.ts";
import { addMachineUser, addOrg, restClient, startPlatform, type TestPlatform } from "../../test/helpers.ts";
import { type Answer, addHuman, HttpBrowser } from "../../test/login.ts";
import { client, discover, ownerToken } from "../../test/oidc.ts";
import { ACR_MFA, ACR_SINGLE_FACTOR } from "../domain/session/amr.ts";

const CALLBACK = "https://web.example/callback";
const PASSWORD = "Secret-Passw0rd!";
const USERS = "/resources/v3alpha/users";
const MEMBERSHIPS = "/resources/v3alpha/memberships";
const LOGIN_SETTINGS = "/settings/v3alpha/login";
const TOTP_TITLE = /Enter the code from your authenticator app/;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const nowSeconds = () => Math.floor(Date.now() / 1000);
/** Waits for a fresh TOTP step when the current one ends within 10 s (codes computed now stay current). */
const freshStep = async () => {
  const left = 30 - (nowSeconds() % 30);
  if (left < 10) await sleep(left * 1000 + 200);
};

describe("the login policy of accounts above their organization", () => {
  let platform: TestPlatform;
  let config: client.Configuration;
  let clientId: string;
  let tenant: string;
  let other: string;
  /** IAM_OWNER of the instance (a machine user's PAT). */
  let root: string;
  /** ORG_OWNER of the tenant organization (a machine user's PAT). */
  let tenantOwner: string;
  const secrets = new Map<string, string>();
  let piaId: string;
  const rest = restClient(
    () => platform,
    () => root,
  );

  /** A human of the tenant organization with the password and an active authenticator app only. */
  const withTotp = async (username: string) => {
    const id = await addHuman(platform, username, PASSWORD, { orgId: tenant });
    const registered = await rest("POST", `${USERS}/${id}/totp`);
    assert.equal(registered.status, 200, registered.text);
    const secret = registered.json.secret as string;
    const verified = await rest("POST", `${USERS}/${id}/totp/_verify`, {
      json: { code: await generate({ secret, epoch: nowSeconds() - 30 }) },
    });
    assert.equal(verified.status, 200, verified.text);
    secrets.set(username, secret);
    return id;
  };

  before(async () => {
    platform = await startPlatform({ listen: true });
    root = await ownerToken(platform);
    const projectId = await createProject(platform, root, "Console");
    const web = await createOidcApp(platform, root, projectId, "web", {
      redirect_uris: [CALLBACK],
      response_types: ["OIDC_RESPONSE_TYPE_CODE"],
      grant_types: ["OIDC_GRANT_TYPE_AUTHORIZATION_CODE"],
      app_type: "OIDC_APP_TYPE_WEB",
      auth_method: "OIDC_AUTH_METHOD_TYPE_BASIC",
    });
    clientId = web.clientId;
    config = await discover(platform.url, clientId, client.ClientSecretBasic(web.clientSecret!));
    tenant = await addOrg(platform, "Tenant");
    other = await addOrg(platform, "Other");
    ({ token: tenantOwner } = await addMachineUser(platform, {
      username: "tenant-owner",
      orgId: tenant,
      membership: { contextType: "org", roles: ["ORG_OWNER"] },
    }));

    // the instance forces a second factor
    const forced = await rest("PATCH", LOGIN_SETTINGS, { json: { force_mfa: { set: true } } });
    assert.equal(forced.status, 200, forced.text);
    const adaId = await withTotp("ada");
    const admin = await rest("POST", MEMBERSHIPS, { json: { user_id: adaId, roles: ["IAM_OWNER"] } });
    assert.equal(admin.status, 201, admin.text);
    piaId = await withTotp("pia");

    // the tenant's owner allows only SMS codes in its organization and forces nothing: it may
    const lowered = await rest("PATCH", `${LOGIN_SETTINGS}?ctx.org_id=${tenant}`, {
      token: tenantOwner,
      json: {
        force_mfa: { set: false },
        second_factors: { set: { value: ["SECOND_FACTOR_TYPE_OTP_SMS"] } },
      },
    });
    assert.equal(lowered.status, 200, lowered.text);
  });
  after(() => platform.stop());

  const codeRequest = async () => {
    const verifier = client.randomPKCECodeVerifier();
    const params = {
      client_id: clientId,
      redirect_uri: CALLBACK,
      response_type: "code",
      scope: "openid profile urn:platform:iam:org:project:id:platform:aud",
      state: client.randomState(),
      code_challenge: await client.calculatePKCECodeChallenge(verifier),
      code_challenge_method: "S256",
    };
    return { params, verifier, path: authorizePath(params) };
  };
  const redeem = (answer: Answer, request: Awaited<ReturnType<typeof codeRequest>>) =>
    client.authorizationCodeGrant(config, responseParams(answer).url, {
      pkceCodeVerifier: request.verifier,
      expectedState: request.params.state,
      idTokenExpected: true,
    });
  /** Login name and password in a new browser: the page it stops at, or the redirect to the client. */
  const passwordSignIn = async (username: string) => {
    const browser = new HttpBrowser(platform.url);
    const request = await codeRequest();
    const answer = await signInThroughUi(browser, request.path, username, PASSWORD);
    return { browser, request, answer };
  };
  const atClient = (answer: Answer) => (answer.location ?? "").startsWith(CALLBACK);

  it("an instance administrator of the organization still needs its authenticator app, then gets mfa tokens the management API takes", async () => {
    await freshStep();
    const { browser, request, answer } = await passwordSignIn("ada");
    assert.ok(!atClient(answer), "the password alone does not reach the application");
    assert.equal(answer.status, 200, answer.text.slice(0, 300));
    assert.match(answer.text, TOTP_TITLE);
    // nor the account page: its session still waits for the second factor
    const home = await browser.follow("/");
    assert.doesNotMatch(home.text, /action="\/ui\/login\/account\//, "no account page");

    const passed = await browser.submit(answer, "/ui/login/mfa/totp", {
      code: await generate({ secret: secrets.get("ada")! }),
    });
    assert.ok(atClient(passed), `back at the application: ${passed.location}`);
    const tokens = await redeem(passed, request);
    const claims = tokens.claims()!;
    assert.equal(claims.acr, ACR_MFA);
    assert.deepEqual(claims.amr, ["pwd", "otp", "mfa"]);
    const api = await rest("POST", `${USERS}/_search`, { token: tokens.access_token, json: [] });
    assert.equal(api.status, 200, api.text);
  });

  it("a plain user of the organization follows the organization's policy", async () => {
    const { request, answer } = await passwordSignIn("pia");
    assert.ok(atClient(answer), `the password was enough: ${answer.location ?? answer.text.slice(0, 300)}`);
    const claims = (await redeem(answer, request)).claims()!;
    assert.deepEqual(claims.amr, ["pwd"]);
    assert.equal(claims.acr, ACR_SINGLE_FACTOR);
  });

  it("a role above the organization counts from the next page on, and no longer once taken away", async () => {
    const cases = [
      { ctx: "", roles: ["IAM_OWNER_VIEWER"], above: true },
      { ctx: `?ctx.org_id=${other}`, roles: ["ORG_USER_MANAGER"], above: true },
      // a role in its own organization that its owners hold too: still the organization's policy
      { ctx: `?ctx.org_id=${tenant}`, roles: ["ORG_USER_MANAGER"], above: false },
    ];
    for (const { ctx, roles, above } of cases) {
      const given = await rest("POST", `${MEMBERSHIPS}${ctx}`, {
        json: { user_id: piaId, roles },
      });
      assert.equal(given.status, 201, given.text);
      const { answer } = await passwordSignIn("pia");
      if (above) assert.match(answer.text, TOTP_TITLE, `${roles} ${ctx}: the instance's policy`);
      else assert.ok(atClient(answer), `${roles} ${ctx}: the organization's policy`);
      const removed = await rest("DELETE", `${MEMBERSHIPS}/${given.json.details.id}`);
      assert.equal(removed.status, 200, removed.text);
      assert.ok(atClient((await passwordSignIn("pia")).answer), `${roles} ${ctx} taken away`);
    }
  });
});
