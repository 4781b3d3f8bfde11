import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { startPlatform, type TestPlatform } from "../../test/helpers.ts";
import {
  assertOAuthError,
  basic,
  client,
  discover,
  fixtureClient,
  postForm,
  registerFixtures,
} from "../../test/oidc.ts";
import { sha256 } from "../crypto/tokens.ts";

const REDIRECT = "https://app.example/callback";
const SECRET = "web-app-secret-0123456789";

/**
 * authorization_code and refresh_token, driven by openid-client, with codes issued through the domain
 * function the authorization endpoint calls, for fixture clients registered the way apps
 * plug in (ClientRegistry.addSource).
 */
describe("OIDC authorization code and refresh tokens", () => {
  let platform: TestPlatform;
  let userId: string;
  let web: client.Configuration; // confidential (client_secret_basic)
  let spa: client.Configuration; // public (none)
  let introspector: client.Configuration;

  /** A code for the admin user, as the authorization endpoint would issue it. */
  const code = async (
    options: {
      clientId?: string;
      scope?: string;
      challenge?: string | null;
      verifier?: string;
      redirectUri?: string;
      nonce?: string;
    } = {},
  ) => {
    const verifier = options.verifier ?? client.randomPKCECodeVerifier();
    const challenge =
      options.challenge === null
        ? undefined
        : (options.challenge ?? (await client.calculatePKCECodeChallenge(verifier)));
    const value = await platform.oidc.issueAuthorizationCode({
      instanceId: platform.bootstrapResult!.instanceId,
      issuer: platform.url,
      clientId: options.clientId ?? "web-app",
      redirectUri: options.redirectUri ?? REDIRECT,
      scope: (options.scope ?? "openid profile email offline_access").split(" "),
      nonce: options.nonce,
      codeChallenge: challenge,
      codeChallengeMethod: challenge ? "S256" : undefined,
      userId,
      sessionId: "session-1",
      authTime: new Date(Date.now() - 5000),
      amr: ["pwd"],
    });
    return { value, verifier };
  };
  /** The redirect the user agent would follow (with the RFC 9207 `iss`). */
  const callback = (value: string) =>
    new URL(`${REDIRECT}?code=${encodeURIComponent(value)}&iss=${encodeURIComponent(platform.url)}`);
  const redeem = async (config: client.Configuration, options: Parameters<typeof code>[0] = {}) => {
    const nonce = client.randomNonce();
    const c = await code({ nonce, ...options });
    return client.authorizationCodeGrant(config, callback(c.value), {
      pkceCodeVerifier: c.verifier,
      expectedNonce: nonce,
      idTokenExpected: true,
    });
  };
  const active = async (token: string) => (await client.tokenIntrospection(introspector, token)).active;

  before(async () => {
    platform = await startPlatform({ listen: true });
    userId = platform.bootstrapResult!.adminUserId;
    registerFixtures(platform, [
      fixtureClient(platform, { clientId: "web-app", secretHash: sha256(SECRET) }),
      fixtureClient(platform, {
        clientId: "web-app-full",
        secretHash: sha256(SECRET),
        idTokenUserinfoAssertion: true,
        accessTokenType: "jwt",
      }),
      fixtureClient(platform, { clientId: "spa", authMethods: new Set(["none"]) }),
      fixtureClient(platform, {
        clientId: "no-refresh",
        secretHash: sha256(SECRET),
        grantTypes: new Set(["authorization_code"]),
      }),
    ]);
    web = await discover(platform.url, "web-app", client.ClientSecretBasic(SECRET));
    spa = await discover(platform.url, "spa", client.None());
    introspector = web;
  });
  after(() => platform?.stop());

  it("a code gives access, ID and refresh tokens; the ID token carries nonce, auth_time, amr, azp, sid, at_hash", async () => {
    const tokens = await redeem(web);
    const claims = tokens.claims()!;
    assert.equal(claims.sub, userId);
    assert.equal(claims.iss, platform.url);
    assert.equal(claims.azp, "web-app");
    assert.ok(Array.isArray(claims.aud) ? claims.aud.includes("web-app") : claims.aud === "web-app");
    assert.equal(claims.sid, "session-1");
    assert.deepEqual(claims.amr, ["pwd"]);
    assert.ok(typeof claims.auth_time === "number" && claims.auth_time <= Math.floor(Date.now() / 1000));
    assert.ok(typeof claims.at_hash === "string");
    assert.equal(claims.email, undefined, "left out of the ID token when an access token is issued");
    assert.equal(claims.name, undefined);
    assert.ok(tokens.refresh_token, "offline_access: a refresh token");
    assert.equal(tokens.scope, "openid profile email offline_access");
    // userinfo has the profile and email claims
    const info = await client.fetchUserInfo(web, tokens.access_token, userId);
    assert.equal(info.email, "admin@localhost");
    assert.equal(info.email_verified, true);
    assert.equal(info.given_name, "Platform");
    assert.equal(info.family_name, "Administrator");
    assert.equal(info.name, "Platform Administrator");
    assert.equal(info.preferred_username, "admin");
    assert.equal(typeof info.updated_at, "number");
    // introspection of a human's token: username@primary domain
    const introspected = await client.tokenIntrospection(web, tokens.access_token);
    assert.equal(introspected.username, "admin@platform.localhost");
    assert.equal(introspected.email, "admin@localhost");
  });

  it("id_token_userinfo_assertion puts the profile claims into the ID token; JWT access tokens per client", async () => {
    const full = await discover(platform.url, "web-app-full", client.ClientSecretBasic(SECRET));
    const tokens = await redeem(full, { clientId: "web-app-full" });
    const claims = tokens.claims()!;
    assert.equal(claims.email, "admin@localhost");
    assert.equal(claims.given_name, "Platform");
    assert.equal(tokens.access_token.split(".").length, 3, "the client's access_token_type is JWT");
  });

  it("without offline_access, or for a client without the refresh_token grant, no refresh token", async () => {
    assert.equal((await redeem(web, { scope: "openid profile" })).refresh_token, undefined);
    const noRefresh = await discover(platform.url, "no-refresh", client.ClientSecretBasic(SECRET));
    assert.equal((await redeem(noRefresh, { clientId: "no-refresh" })).refresh_token, undefined);
    // ... and that client may not use the grant
    assertOAuthError(
      await postForm(
        `${platform.url}/oauth/v2/token`,
        { grant_type: "refresh_token", refresh_token: "x" },
        basic("no-refresh", SECRET),
      ),
      400,
      "unauthorized_client",
    );
  });

  it("a second redemption is invalid_grant and revokes every token issued from the code", async () => {
    const c = await code();
    const first = await client.authorizationCodeGrant(web, callback(c.value), {
      pkceCodeVerifier: c.verifier,
    });
    assert.equal(await active(first.access_token), true);
    const second = await postForm(
      `${platform.url}/oauth/v2/token`,
      { grant_type: "authorization_code", code: c.value, redirect_uri: REDIRECT, code_verifier: c.verifier },
      basic("web-app", SECRET),
    );
    assertOAuthError(second, 400, "invalid_grant", /used before/);
    assert.equal(
      await active(first.access_token),
      false,
      "the access token of the first redemption is revoked",
    );
    const refresh = await postForm(
      `${platform.url}/oauth/v2/token`,
      { grant_type: "refresh_token", refresh_token: first.refresh_token! },
      basic("web-app", SECRET),
    );
    assertOAuthError(refresh, 400, "invalid_grant");
  });

  it("invalid_grant: redirect_uri mismatch, PKCE verifier wrong / missing / unexpected, expired code, another client's code", async () => {
    const post = (body: Record<string, string>, clientId = "web-app") =>
      postForm(
        `${platform.url}/oauth/v2/token`,
        { grant_type: "authorization_code", ...body },
        basic(clientId, SECRET),
      );
    const a = await code();
    assertOAuthError(
      await post({ code: a.value, redirect_uri: "https://app.example/other", code_verifier: a.verifier }),
      400,
      "invalid_grant",
      /redirect_uri/,
    );
    const b = await code();
    assertOAuthError(
      await post({ code: b.value, redirect_uri: REDIRECT, code_verifier: client.randomPKCECodeVerifier() }),
      400,
      "invalid_grant",
      /does not match/,
    );
    const c = await code();
    assertOAuthError(
      await post({ code: c.value, redirect_uri: REDIRECT }),
      400,
      "invalid_grant",
      /code_verifier is required/,
    );
    const d = await code({ challenge: null });
    assertOAuthError(
      await post({ code: d.value, redirect_uri: REDIRECT, code_verifier: client.randomPKCECodeVerifier() }),
      400,
      "invalid_grant",
      /no challenge/,
    );
    // the same code without a verifier works: the confidential client did not use PKCE
    assert.equal((await post({ code: d.value, redirect_uri: REDIRECT })).status, 200);
    const e = await code();
    await platform.db.query(
      "UPDATE oidc_authorization_codes SET expires_at = now() - interval '1 second' WHERE secret_hash = $1",
      [sha256(e.value.split(".")[1])],
    );
    assertOAuthError(
      await post({ code: e.value, redirect_uri: REDIRECT, code_verifier: e.verifier }),
      400,
      "invalid_grant",
      /expired/,
    );
    const f = await code({ clientId: "web-app-full" });
    assertOAuthError(
      await post({ code: f.value, redirect_uri: REDIRECT, code_verifier: f.verifier }),
      400,
      "invalid_grant",
      /another client/,
    );
    const g = await code();
    assertOAuthError(
      await post({ code: `${g.value.slice(0, -3)}AAA`, redirect_uri: REDIRECT, code_verifier: g.verifier }),
      400,
      "invalid_grant",
    );
  });

  it("refresh: rotation on every use; reusing a rotated token is invalid_grant and revokes the family", async () => {
    const tokens = await redeem(web);
    const r1 = tokens.refresh_token!;
    const second = await client.refreshTokenGrant(web, r1);
    assert.ok(second.refresh_token && second.refresh_token !== r1, "a new refresh token");
    assert.equal(
      second.scope,
      "openid profile email offline_access",
      "the original scope when none is asked",
    );
    assert.ok(second.id_token);
    assert.equal(await active(second.access_token), true);
    const third = await client.refreshTokenGrant(web, second.refresh_token!);

    // r1 was rotated: its reuse revokes everything of the family
    const reuse = await postForm(
      `${platform.url}/oauth/v2/token`,
      { grant_type: "refresh_token", refresh_token: r1 },
      basic("web-app", SECRET),
    );
    assertOAuthError(reuse, 400, "invalid_grant", /used before/);
    assert.equal(await active(third.access_token), false);
    assert.equal(await active(tokens.access_token), false);
    const afterReuse = await postForm(
      `${platform.url}/oauth/v2/token`,
      { grant_type: "refresh_token", refresh_token: third.refresh_token! },
      basic("web-app", SECRET),
    );
    assertOAuthError(afterReuse, 400, "invalid_grant");
  });

  it("refresh: scope may narrow (a subset) but not widen (invalid_scope); another client's token is invalid_grant", async () => {
    const tokens = await redeem(web);
    const narrowed = await client.refreshTokenGrant(web, tokens.refresh_token!, { scope: "openid profile" });
    assert.equal(narrowed.scope, "openid profile");
    // the narrowed refresh keeps the original grant: the next refresh may ask for email again
    const again = await client.refreshTokenGrant(web, narrowed.refresh_token!, { scope: "openid email" });
    assert.equal(again.scope, "openid email");
    const wider = await postForm(
      `${platform.url}/oauth/v2/token`,
      { grant_type: "refresh_token", refresh_token: again.refresh_token!, scope: "openid phone" },
      basic("web-app", SECRET),
    );
    assertOAuthError(wider, 400, "invalid_scope", /phone/);
    const foreign = await postForm(
      `${platform.url}/oauth/v2/token`,
      { grant_type: "refresh_token", refresh_token: again.refresh_token! },
      basic("web-app-full", SECRET),
    );
    assertOAuthError(foreign, 400, "invalid_grant", /another client/);
  });

  it("refresh: idle and absolute expiry", async () => {
    for (const column of ["expires_at", "absolute_expires_at"]) {
      const tokens = await redeem(web);
      const id = Buffer.from(tokens.refresh_token!.split(".")[0], "base64url").toString().slice(3);
      await platform.db.query(
        `UPDATE oidc_refresh_tokens SET ${column} = now() - interval '1 second' WHERE id = $1`,
        [id],
      );
      const r = await postForm(
        `${platform.url}/oauth/v2/token`,
        { grant_type: "refresh_token", refresh_token: tokens.refresh_token! },
        basic("web-app", SECRET),
      );
      assertOAuthError(r, 400, "invalid_grant", /expired/);
    }
  });

  it("a public client redeems with PKCE and refreshes with client_id alone; without PKCE its code is refused", async () => {
    const tokens = await redeem(spa, { clientId: "spa" });
    assert.ok(tokens.refresh_token);
    const refreshed = await client.refreshTokenGrant(spa, tokens.refresh_token!);
    assert.ok(refreshed.access_token);
    const plain = await code({ clientId: "spa", challenge: null });
    const r = await postForm(`${platform.url}/oauth/v2/token`, {
      grant_type: "authorization_code",
      client_id: "spa",
      code: plain.value,
      redirect_uri: REDIRECT,
    });
    assertOAuthError(r, 400, "invalid_grant", /PKCE/);
    // a public client gets no introspection: it cannot authenticate there
    assertOAuthError(
      await postForm(`${platform.url}/oauth/v2/introspect`, {
        token: refreshed.access_token,
        client_id: "spa",
      }),
      401,
      "invalid_client",
    );
  });

  it("revocation: a refresh token revokes itself and its access tokens; an access token only itself", async () => {
    const a = await redeem(web);
    await client.tokenRevocation(web, a.access_token);
    assert.equal(await active(a.access_token), false);
    const refreshed = await client.refreshTokenGrant(web, a.refresh_token!);
    assert.equal(
      await active(refreshed.access_token),
      true,
      "revoking the access token left the refresh token",
    );

    await client.tokenRevocation(web, refreshed.refresh_token!, { token_type_hint: "refresh_token" });
    assert.equal(
      await active(refreshed.access_token),
      false,
      "the refresh token's access tokens are revoked",
    );
    const r = await postForm(
      `${platform.url}/oauth/v2/token`,
      { grant_type: "refresh_token", refresh_token: refreshed.refresh_token! },
      basic("web-app", SECRET),
    );
    assertOAuthError(r, 400, "invalid_grant", /revoked/);

    // a public client revokes with client_id alone
    const s = await redeem(spa, { clientId: "spa" });
    await client.tokenRevocation(spa, s.refresh_token!);
    assertOAuthError(
      await postForm(`${platform.url}/oauth/v2/token`, {
        grant_type: "refresh_token",
        refresh_token: s.refresh_token!,
        client_id: "spa",
      }),
      400,
      "invalid_grant",
    );
  });
});
