import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { decodeJwt } from "jose";
import { authorizePath, responseParams, signInThroughUi } from "../../test/authorize.ts";
import { eventCount, type Json, restClient, startPlatform, type TestPlatform } from "../../test/helpers.ts";
import { addHuman, HttpBrowser } from "../../test/login.ts";
import { client, discover, ownerToken } from "../../test/oidc.ts";

const TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange";
const TT = {
  access: "urn:ietf:params:oauth:token-type:access_token",
  id: "urn:ietf:params:oauth:token-type:id_token",
};
const PROJECTS = "/resources/v3alpha/projects";
const CALLBACK = "https://portal.example/callback";
const SIGNED_OUT = "https://portal.example/signed-out";
const SPA_CALLBACK = "https://spa.example/callback";
const PASSWORD = "Secret-Passw0rd!";
const AUD_PLATFORM = "urn:platform:iam:org:project:id:platform:aud";
const ADMIN_SCOPE = `openid profile email offline_access ${AUD_PLATFORM}`;

interface App {
  clientId: string;
  secret?: string;
  callback: string;
}

/**
 * Token exchange takes a subject or actor token only while it is still a valid credential meant for the
 * requesting client, and never issues more than it was granted: an administrator signs in through the login
 * UI (a real browser session), and her tokens are exchanged after sign-out, by other clients, by a public
 * client, and for a wider scope.
 */
describe("OIDC token exchange: subject and actor tokens as credentials", () => {
  let platform: TestPlatform;
  let owner: string;
  let shopId: string;
  let portal: App; // confidential, code flow + refresh + exchange, opaque access tokens
  let portalJwt: App; // the same with JWT access tokens
  let spa: App; // public (client_id only), code flow + refresh + exchange
  let gateway: App; // confidential, exchange only, of the same project (a resource server of its tokens)
  let elsewhere: App; // confidential, exchange only, of another project

  const rest = restClient(
    () => platform,
    () => owner,
  );
  const created = async (path: string, json: unknown): Promise<Json> => {
    const r = await rest("POST", path, { json });
    assert.equal(r.status, 201, r.text);
    return r.json;
  };
  const oidcApp = async (projectId: string, name: string, callback: string, oidc: Json): Promise<App> => {
    const a = await created(`${PROJECTS}/${projectId}/apps`, {
      name,
      oidc: {
        redirect_uris: [callback],
        post_logout_redirect_uris: [SIGNED_OUT],
        response_types: ["OIDC_RESPONSE_TYPE_CODE"],
        grant_types: [
          "OIDC_GRANT_TYPE_AUTHORIZATION_CODE",
          "OIDC_GRANT_TYPE_REFRESH_TOKEN",
          "OIDC_GRANT_TYPE_TOKEN_EXCHANGE",
        ],
        app_type: "OIDC_APP_TYPE_WEB",
        auth_method: "OIDC_AUTH_METHOD_TYPE_BASIC",
        ...oidc,
      },
    });
    return { clientId: a.client_id, secret: a.client_secret, callback };
  };
  const config = (a: App) =>
    discover(platform.url, a.clientId, a.secret ? client.ClientSecretBasic(a.secret) : client.None());

  /** Signs alice (IAM_OWNER) in through the login UI for `a`: a browser session, and its tokens. */
  const signIn = async (a: App, scope = ADMIN_SCOPE) => {
    const browser = new HttpBrowser(platform.url);
    const verifier = client.randomPKCECodeVerifier();
    const state = client.randomState();
    const nonce = client.randomNonce();
    const path = authorizePath({
      client_id: a.clientId,
      redirect_uri: a.callback,
      response_type: "code",
      scope,
      state,
      nonce,
      code_challenge: await client.calculatePKCECodeChallenge(verifier),
      code_challenge_method: "S256",
    });
    const answer = await signInThroughUi(browser, path, "alice", PASSWORD);
    const tokens = await client.authorizationCodeGrant(await config(a), responseParams(answer).url, {
      pkceCodeVerifier: verifier,
      expectedState: state,
      expectedNonce: nonce,
      idTokenExpected: true,
    });
    return { browser, tokens, sessionId: String(decodeJwt(tokens.id_token!).sid) };
  };
  const exchange = async (a: App, params: Record<string, string>) =>
    client.genericGrantRequest(await config(a), TOKEN_EXCHANGE, params);
  /** The exchange fails with that OAuth error and description, and stores neither event nor token. */
  const refused = async (promise: () => Promise<unknown>, error: string, description: RegExp) => {
    const [events, tokens] = [await eventCount(platform), await tokenRows()];
    await assert.rejects(promise(), (e: client.ResponseBodyError) => {
      assert.equal(e.error, error, `${e.error}: ${e.error_description}`);
      assert.equal(e.status, 400);
      assert.match(e.error_description ?? "", description);
      return true;
    });
    assert.equal(await eventCount(platform), events, "no event stored");
    assert.equal(await tokenRows(), tokens, "no token stored");
  };
  const tokenRows = async () =>
    Number(
      (await platform.db.query<{ n: number }>("SELECT count(*)::int AS n FROM oidc_access_tokens"))[0].n,
    );
  const introspect = async (token: string) => client.tokenIntrospection(await config(portal), token);
  const managementApi = (token: string) => rest("GET", "/settings/v3alpha/features", { token });

  before(async () => {
    platform = await startPlatform({ listen: true });
    owner = await ownerToken(platform);
    const aliceId = await addHuman(platform, "alice", PASSWORD);
    await created("/resources/v3alpha/memberships", { user_id: aliceId, roles: ["IAM_OWNER"] });
    const flag = await rest("PATCH", "/settings/v3alpha/features", {
      json: { token_exchange: { set: true } },
    });
    assert.equal(flag.status, 200, flag.text);
    shopId = (await created(PROJECTS, { name: "Shop" })).details.id;
    const otherId = (await created(PROJECTS, { name: "Elsewhere" })).details.id;
    portal = await oidcApp(shopId, "portal", CALLBACK, {});
    portalJwt = await oidcApp(shopId, "portal-jwt", CALLBACK, { access_token_type: "OIDC_TOKEN_TYPE_JWT" });
    spa = await oidcApp(shopId, "spa", SPA_CALLBACK, {
      app_type: "OIDC_APP_TYPE_USER_AGENT",
      auth_method: "OIDC_AUTH_METHOD_TYPE_NONE",
    });
    const exchangeOnly = { redirect_uris: [], post_logout_redirect_uris: [], response_types: [] };
    gateway = await oidcApp(shopId, "gateway", "", {
      ...exchangeOnly,
      grant_types: ["OIDC_GRANT_TYPE_TOKEN_EXCHANGE", "OIDC_GRANT_TYPE_REFRESH_TOKEN"],
    });
    elsewhere = await oidcApp(otherId, "elsewhere", "", {
      ...exchangeOnly,
      grant_types: ["OIDC_GRANT_TYPE_TOKEN_EXCHANGE"],
    });
  });
  after(() => platform?.stop());

  it("an administrator's ID token gives openid and its client's own audience only: no management token", async () => {
    const { tokens } = await signIn(portal);
    assert.equal(
      (await managementApi(tokens.access_token)).status,
      200,
      "her access token is a management token",
    );
    const idToken = tokens.id_token!;

    // While she is signed in, the ID token proves the sign-in to its client, nothing more.
    const fromId = await exchange(portal, { subject_token: idToken, subject_token_type: TT.id });
    assert.equal(fromId.scope, "openid");
    assert.equal(fromId.refresh_token, undefined, "no offline_access: no refresh token");
    assert.deepEqual((await introspect(fromId.access_token)).aud, [portal.clientId, shopId]);
    assert.equal(
      (await managementApi(fromId.access_token)).status,
      401,
      "not a management token: the ID token grants no API audience",
    );
    await refused(
      () =>
        exchange(portal, {
          subject_token: idToken,
          subject_token_type: TT.id,
          scope: "openid profile email phone offline_access",
        }),
      "invalid_scope",
      /scope profile was not granted to the subject_token/,
    );
  });

  it("after sign-out (end_session with the ID token as hint) her ID token and access token are invalid_request", async () => {
    const { browser, tokens } = await signIn(portal);
    const idToken = tokens.id_token!;
    const fromId = await exchange(portal, { subject_token: idToken, subject_token_type: TT.id });
    // She signs out (RP-initiated logout with the ID token as hint: the hint lands in logs and history).
    const signedOut = await browser.get(
      `/oidc/v1/end_session?${new URLSearchParams({ id_token_hint: idToken, post_logout_redirect_uri: SIGNED_OUT })}`,
    );
    assert.equal(signedOut.status, 302, signedOut.text.slice(0, 200));
    // end_session revokes the session's access tokens; the ID token is refused for the session it names.
    await refused(
      () => exchange(portal, { subject_token: tokens.access_token, subject_token_type: TT.access }),
      "invalid_request",
      /^subject_token is invalid or expired/,
    );
    await refused(
      () => exchange(portal, { subject_token: idToken, subject_token_type: TT.id }),
      "invalid_request",
      /subject_token was issued in a session that has ended \(signed out\)/,
    );
    assert.deepEqual(await introspect(fromId.access_token), { active: false }, "what it gave ends too");
  });

  it("a session ended through the sessions API: its access tokens (opaque, JWT) and ID token are refused, as subject and actor, and what was exchanged from them ends", async () => {
    for (const app of [portal, portalJwt]) {
      const { tokens, sessionId } = await signIn(app);
      // Exchanged while the session lasts: with a refresh token, and a management token (the audience kept).
      const exchanged = await exchange(gateway, {
        subject_token: tokens.access_token,
        subject_token_type: TT.access,
        scope: `openid offline_access ${AUD_PLATFORM}`,
      });
      assert.ok(exchanged.refresh_token);
      assert.equal((await managementApi(exchanged.access_token)).status, 200, "in use (and cached)");
      const fromId = await exchange(app, { subject_token: tokens.id_token!, subject_token_type: TT.id });

      const ended = await rest("DELETE", `/resources/v3alpha/sessions/${sessionId}`);
      assert.equal(ended.status, 200, ended.text);

      // The end of the session revoked its access tokens; the ID token is refused for the session it names.
      await refused(
        () => exchange(gateway, { subject_token: tokens.access_token, subject_token_type: TT.access }),
        "invalid_request",
        /^subject_token is invalid or expired/,
      );
      await refused(
        () => exchange(app, { subject_token: tokens.id_token!, subject_token_type: TT.id }),
        "invalid_request",
        /^subject_token was issued in a session that has ended/,
      );
      const fresh = (await signIn(app)).tokens.access_token;
      await refused(
        () =>
          exchange(app, {
            subject_token: fresh,
            subject_token_type: TT.access,
            actor_token: tokens.access_token,
            actor_token_type: TT.access,
          }),
        "invalid_request",
        /^actor_token is invalid or expired/,
      );
      assert.equal((await managementApi(exchanged.access_token)).status, 401, "at once, despite the cache");
      assert.deepEqual(await introspect(exchanged.access_token), { active: false });
      assert.deepEqual(await introspect(fromId.access_token), { active: false });
      await assert.rejects(
        client.refreshTokenGrant(await config(gateway), exchanged.refresh_token!),
        (e: client.ResponseBodyError) =>
          // revoked with the session it was issued in (the subject token's)
          e.error === "invalid_grant" && /^the refresh token was revoked/.test(e.error_description ?? ""),
        "the exchanged refresh token does not outlive the session",
      );
    }
  });

  it("revoked access tokens (opaque, JWT) are refused as subject and actor", async () => {
    for (const app of [portal, portalJwt]) {
      const { tokens } = await signIn(app);
      const other = (await signIn(app)).tokens.access_token;
      await client.tokenRevocation(await config(app), tokens.access_token);
      await refused(
        () => exchange(app, { subject_token: tokens.access_token, subject_token_type: TT.access }),
        "invalid_request",
        /^subject_token is invalid or expired/,
      );
      await refused(
        () =>
          exchange(app, {
            subject_token: other,
            subject_token_type: TT.access,
            actor_token: tokens.access_token,
            actor_token_type: TT.access,
          }),
        "invalid_request",
        /^actor_token is invalid or expired/,
      );
    }
  });

  it("a public client exchanges only tokens issued to itself: not another client's access or ID token, not a PAT", async () => {
    const own = (await signIn(spa)).tokens;
    const portals = (await signIn(portal)).tokens;
    const mine = await exchange(spa, { subject_token: own.access_token, subject_token_type: TT.access });
    assert.equal((await introspect(mine.access_token)).client_id, spa.clientId);
    await exchange(spa, { subject_token: own.id_token!, subject_token_type: TT.id });

    await refused(
      () => exchange(spa, { subject_token: portals.access_token, subject_token_type: TT.access }),
      "invalid_request",
      /^subject_token was issued to another client; a public client may exchange only its own tokens/,
    );
    await refused(
      () => exchange(spa, { subject_token: portals.id_token!, subject_token_type: TT.id }),
      "invalid_request",
      /^subject_token is an ID token of another client/,
    );
    await refused(
      // owner: a personal access token of an IAM_OWNER machine user
      () => exchange(spa, { subject_token: owner, subject_token_type: TT.access }),
      "invalid_request",
      /^subject_token is a personal access token; a public client may exchange only its own tokens/,
    );
    await refused(
      () =>
        exchange(spa, {
          subject_token: own.access_token,
          subject_token_type: TT.access,
          actor_token: portals.access_token,
          actor_token_type: TT.access,
        }),
      "invalid_request",
      /^actor_token was issued to another client/,
    );
  });

  it("a confidential client exchanges tokens issued to it or naming it (its project) in their audience, never another client's ID token", async () => {
    const { tokens } = await signIn(portal);
    // The gateway belongs to the project the token names: a resource server of it.
    const delegated = await exchange(gateway, {
      subject_token: tokens.access_token,
      subject_token_type: TT.access,
      audience: shopId,
    });
    assert.deepEqual((await introspect(delegated.access_token)).aud, [shopId]);
    await refused(
      () => exchange(elsewhere, { subject_token: tokens.access_token, subject_token_type: TT.access }),
      "invalid_request",
      /^subject_token was issued to another client and its audience names neither this client nor its project/,
    );
    await refused(
      () => exchange(gateway, { subject_token: tokens.id_token!, subject_token_type: TT.id }),
      "invalid_request",
      /^subject_token is an ID token of another client/,
    );
  });

  it("the scope never widens: a token granted openid gets invalid_scope for more; offline_access only for a confidential client with the refresh grant", async () => {
    const narrow = (await signIn(portal, "openid")).tokens;
    await refused(
      () =>
        exchange(portal, {
          subject_token: narrow.access_token,
          subject_token_type: TT.access,
          scope: "openid profile email phone offline_access",
        }),
      "invalid_scope",
      /^scope profile was not granted to the subject_token/,
    );
    await refused(
      () =>
        exchange(portal, {
          subject_token: narrow.access_token,
          subject_token_type: TT.access,
          scope: "openid offline_access",
        }),
      "invalid_scope",
      /^scope offline_access was not granted/,
    );
    const same = await exchange(portal, {
      subject_token: narrow.access_token,
      subject_token_type: TT.access,
    });
    assert.equal(same.scope, "openid");
    assert.equal(same.refresh_token, undefined);

    // Narrowing is fine; offline_access granted to the subject gives a confidential client a refresh token
    // whose family cannot widen either.
    const wide = (await signIn(portal, "openid profile offline_access")).tokens;
    const offline = await exchange(portal, {
      subject_token: wide.access_token,
      subject_token_type: TT.access,
      scope: "openid offline_access",
    });
    assert.equal(offline.scope, "openid offline_access");
    assert.ok(offline.refresh_token);
    await assert.rejects(
      client.refreshTokenGrant(await config(portal), offline.refresh_token!, { scope: "openid profile" }),
      (e: client.ResponseBodyError) => e.error === "invalid_scope",
    );

    // A public client gets no refresh token, even when its own token has offline_access.
    const spaTokens = (await signIn(spa, "openid profile offline_access")).tokens;
    assert.ok(spaTokens.refresh_token, "the code flow gave the public client one");
    const publicOffline = await exchange(spa, {
      subject_token: spaTokens.access_token,
      subject_token_type: TT.access,
      scope: "openid offline_access",
    });
    assert.equal(publicOffline.refresh_token, undefined);
    assert.equal(publicOffline.scope, "openid");
  });
});
