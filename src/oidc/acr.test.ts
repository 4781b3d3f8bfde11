import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import {
  authorizePath,
  createOidcApp,
  createProject,
  responseParams,
  signInThroughUi,
} from "../../test/authorize.ts";
import { startPlatform, type TestPlatform } from "../../test/helpers.ts";
import { type Answer, addHuman, HttpBrowser } from "../../test/login.ts";
import { client, discover, ownerToken } from "../../test/oidc.ts";
import { ACR_MFA, ACR_SINGLE_FACTOR } from "../domain/session/amr.ts";
import { SESSION, SessionEvent } from "../domain/session/events.ts";
import { USER, UserEvent } from "../domain/user/events.ts";

const CALLBACK = "https://web.example/callback";
const PASSWORD = "Secret-Passw0rd!";

/**
 * amr, auth_time and acr in ID tokens and introspection, and acr_values=urn:platform:acr:mfa, with an app
 * made through the apps API, the login UI over HTTP and openid-client redeeming the codes.
 */
describe("amr, auth_time and acr", () => {
  let platform: TestPlatform;
  let config: client.Configuration;
  let clientId: string;
  let instanceId: string;

  before(async () => {
    platform = await startPlatform({ listen: true });
    instanceId = platform.bootstrapResult!.instanceId;
    const owner = await ownerToken(platform);
    const projectId = await createProject(platform, owner, "Shop");
    const web = await createOidcApp(platform, owner, projectId, "web", {
      redirect_uris: [CALLBACK],
      response_types: ["OIDC_RESPONSE_TYPE_CODE"],
      grant_types: ["OIDC_GRANT_TYPE_AUTHORIZATION_CODE", "OIDC_GRANT_TYPE_REFRESH_TOKEN"],
      app_type: "OIDC_APP_TYPE_WEB",
      auth_method: "OIDC_AUTH_METHOD_TYPE_BASIC",
    });
    clientId = web.clientId;
    config = await discover(platform.url, clientId, client.ClientSecretBasic(web.clientSecret!));
  });
  after(() => platform.stop());

  const codeRequest = async (extra: Record<string, string> = {}) => {
    const verifier = client.randomPKCECodeVerifier();
    const params = {
      client_id: clientId,
      redirect_uri: CALLBACK,
      response_type: "code",
      scope: "openid profile offline_access",
      state: client.randomState(),
      code_challenge: await client.calculatePKCECodeChallenge(verifier),
      code_challenge_method: "S256",
      ...extra,
    };
    return { params, verifier, path: authorizePath(params) };
  };
  const redeem = (answer: Answer, request: Awaited<ReturnType<typeof codeRequest>>) =>
    client.authorizationCodeGrant(config, responseParams(answer).url, {
      pkceCodeVerifier: request.verifier,
      expectedState: request.params.state,
      idTokenExpected: true,
    });

  it("discovery advertises the acr values and the acr claim", async () => {
    const meta = config.serverMetadata();
    assert.deepEqual(meta.acr_values_supported, [ACR_SINGLE_FACTOR, ACR_MFA]);
    assert.ok(meta.claims_supported?.includes("acr"));
    assert.ok(meta.claims_supported?.includes("amr"));
  });

  it("a password sign-in: amr [pwd], acr pwd and auth_time in the ID token, introspection and after a refresh", async () => {
    await addHuman(platform, "alice", PASSWORD);
    const browser = new HttpBrowser(platform.url);
    const request = await codeRequest();
    const before = Math.floor(Date.now() / 1000) - 1;
    const tokens = await redeem(await signInThroughUi(browser, request.path, "alice", PASSWORD), request);
    const claims = tokens.claims()!;
    assert.deepEqual(claims.amr, ["pwd"]);
    assert.equal(claims.acr, ACR_SINGLE_FACTOR);
    assert.ok(typeof claims.auth_time === "number" && claims.auth_time >= before, String(claims.auth_time));

    const introspected = await client.tokenIntrospection(config, tokens.access_token);
    assert.equal(introspected.active, true);
    assert.deepEqual(introspected.amr, ["pwd"]);
    assert.equal(introspected.auth_time, claims.auth_time);
    assert.equal(introspected.acr, ACR_SINGLE_FACTOR);

    const refreshed = await client.refreshTokenGrant(config, tokens.refresh_token!);
    const again = refreshed.claims()!;
    assert.deepEqual(again.amr, ["pwd"]);
    assert.equal(again.auth_time, claims.auth_time);
    assert.equal(again.acr, ACR_SINGLE_FACTOR);
  });

  it("acr_values=urn:platform:acr:mfa needs a second factor; then acr is mfa", async () => {
    const userId = await addHuman(platform, "bob", PASSWORD);
    const orgId = platform.bootstrapResult!.orgId;
    await platform.eventStore.push({ instanceId, creator: "test" }, async () =>
      [UserEvent.totpAdded, UserEvent.totpVerified].map((type) => ({
        aggregateType: USER,
        aggregateId: userId,
        resourceOwner: orgId,
        type,
        payload: type === UserEvent.totpAdded ? { secret_sealed: "sealed" } : null,
      })),
    );
    const browser = new HttpBrowser(platform.url);
    const request = await codeRequest({ acr_values: `unknown:acr ${ACR_MFA}` });
    const stopped = await signInThroughUi(browser, request.path, "bob", PASSWORD);
    // the password led to the second factor's page (the otp module's), not to the application
    assert.ok(!(stopped.location ?? "").startsWith(CALLBACK), "not back at the application");
    const [pending] = await platform.db.query<{ id: string; session_id: string | null }>(
      "SELECT id, session_id FROM auth_requests WHERE client_id = $1 AND done_at IS NULL",
      [clientId],
    );
    assert.ok(pending?.session_id, "the request waits with its session");
    const mfa = await browser.get(`/ui/login/mfa?authRequest=${pending.id}`);
    assert.equal(mfa.location, `/ui/login/mfa/totp?authRequest=${pending.id}`);

    // the TOTP code passed (the factor's page does this through the sessions domain)
    const [session] = await platform.db.query<{ id: string }>(
      "SELECT id FROM sessions WHERE instance_id = $1 AND user_id = $2",
      [instanceId, userId],
    );
    await platform.eventStore.push({ instanceId, creator: "test" }, async () => [
      {
        aggregateType: SESSION,
        aggregateId: session.id,
        resourceOwner: orgId,
        type: SessionEvent.totpChecked,
        payload: null,
      },
    ]);
    const done = await browser.get(`/ui/login/complete?authRequest=${pending.id}`);
    const tokens = await redeem(done, request);
    const claims = tokens.claims()!;
    assert.deepEqual(claims.amr, ["pwd", "otp", "mfa"]);
    assert.equal(claims.acr, ACR_MFA);
  });
});
