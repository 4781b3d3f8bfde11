import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { importPKCS8, SignJWT } from "jose";
import { startPlatform, type TestPlatform } from "../../test/helpers.ts";
import {
  assertOAuthError,
  basic,
  fixtureClient,
  type MachineClient,
  machineClient,
  ownerToken,
  postForm,
  registerFixtures,
} from "../../test/oidc.ts";

const JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer";
const ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

/** Every row of the token endpoint's error table (docs/oidc.md), and the introspection / userinfo error rules. */
describe("OIDC errors", () => {
  let platform: TestPlatform;
  let svc: MachineClient;
  let other: MachineClient;
  let token: string;
  let introspect: string;
  let userinfo: string;
  let revoke: string;

  const tokenRequest = (body: string | Record<string, string>, headers: Record<string, string> = {}) =>
    postForm(token, body, headers);
  const svcBasic = () => basic(svc.clientId, svc.clientSecret);
  /** A client assertion of svc (private_key_jwt). */
  const clientAssertion = async (
    claims: Record<string, unknown> = {},
    exp = 300,
    clientId = svc.clientId,
  ) => {
    const key = await importPKCS8(svc.key!.pem, "RS256");
    const now = Math.floor(Date.now() / 1000);
    return new SignJWT({ jti: crypto.randomUUID(), aud: platform.url, ...claims })
      .setProtectedHeader({ alg: "RS256", kid: svc.key!.keyId })
      .setIssuer(clientId)
      .setSubject(clientId)
      .setIssuedAt(now)
      .setExpirationTime(now + exp)
      .sign(key);
  };
  /** A jwt-bearer grant assertion of svc's user. */
  const grantAssertion = async (options: { aud?: string; iat?: number; exp?: number; kid?: string } = {}) => {
    const key = await importPKCS8(svc.key!.pem, "RS256");
    const now = Math.floor(Date.now() / 1000);
    return new SignJWT({})
      .setProtectedHeader({ alg: "RS256", kid: options.kid ?? svc.key!.keyId })
      .setIssuer(svc.userId)
      .setSubject(svc.userId)
      .setAudience(options.aud ?? platform.url)
      .setIssuedAt(options.iat ?? now)
      .setExpirationTime(options.exp ?? now + 300)
      .sign(key);
  };
  const accessToken = async (c: MachineClient = svc, scope = "openid profile") => {
    const r = await tokenRequest(
      { grant_type: "client_credentials", scope },
      basic(c.clientId, c.clientSecret),
    );
    assert.equal(r.status, 200, r.text);
    return r.json.access_token as string;
  };

  before(async () => {
    platform = await startPlatform({ listen: true });
    const owner = await ownerToken(platform);
    svc = await machineClient(platform, owner, "svc", { withKey: true });
    other = await machineClient(platform, owner, "other");
    registerFixtures(platform, [
      fixtureClient(platform, { clientId: "web-app", secretHash: undefined, authMethods: new Set(["none"]) }),
    ]);
    token = `${platform.url}/oauth/v2/token`;
    introspect = `${platform.url}/oauth/v2/introspect`;
    userinfo = `${platform.url}/oidc/v1/userinfo`;
    revoke = `${platform.url}/oauth/v2/revoke`;
  });
  after(() => platform?.stop());

  describe("token endpoint", () => {
    it("invalid_request: missing parameter, repeated parameter, several authentication methods, unsupported value, malformed request", async () => {
      assertOAuthError(await tokenRequest({}, svcBasic()), 400, "invalid_request", /grant_type is required/);
      assertOAuthError(
        await tokenRequest("grant_type=client_credentials&grant_type=client_credentials", svcBasic()),
        400,
        "invalid_request",
        /grant_type is repeated/,
      );
      assertOAuthError(
        await tokenRequest("grant_type=client_credentials&scope=openid&scope=profile", svcBasic()),
        400,
        "invalid_request",
        /scope is repeated/,
      );
      // Basic header and client_secret in the body: two methods.
      assertOAuthError(
        await tokenRequest(
          { grant_type: "client_credentials", client_id: svc.clientId, client_secret: svc.clientSecret },
          svcBasic(),
        ),
        400,
        "invalid_request",
        /only one client authentication method/,
      );
      // client_secret and client_assertion: two methods.
      assertOAuthError(
        await tokenRequest({
          grant_type: "client_credentials",
          client_id: svc.clientId,
          client_secret: svc.clientSecret,
          client_assertion: await clientAssertion(),
          client_assertion_type: ASSERTION_TYPE,
        }),
        400,
        "invalid_request",
      );
      assertOAuthError(
        await tokenRequest({
          grant_type: "client_credentials",
          client_assertion: await clientAssertion(),
          client_assertion_type: "urn:example:unsupported",
        }),
        400,
        "invalid_request",
        /client_assertion_type/,
      );
      assertOAuthError(
        await tokenRequest({ grant_type: "authorization_code", redirect_uri: "https://x" }, svcBasic()),
        400,
        "invalid_request",
        /code is required/,
      );
      assertOAuthError(
        await tokenRequest({ grant_type: JWT_BEARER, scope: "openid" }),
        400,
        "invalid_request",
      );
      // Not a form: malformed.
      const json = await fetch(token, {
        method: "POST",
        headers: { "content-type": "application/json", ...svcBasic() },
        body: JSON.stringify({ grant_type: "client_credentials" }),
      });
      assert.equal(json.status, 400);
      assert.equal(((await json.json()) as { error: string }).error, "invalid_request");
    });

    it("invalid_scope: unknown, malformed, or an unknown project", async () => {
      for (const scope of [
        "openid unknown",
        "openid  profile",
        "openid\u0001",
        "urn:platform:iam:org:project:id:424242:aud",
      ]) {
        assertOAuthError(
          await tokenRequest({ grant_type: "client_credentials", scope }, svcBasic()),
          400,
          "invalid_scope",
        );
      }
      // Larger than granted: see the refresh-token tests (code-flow.test.ts).
    });

    it("unauthorized_client: a machine user may not use authorization_code, an app not client_credentials", async () => {
      assertOAuthError(
        await tokenRequest(
          { grant_type: "authorization_code", code: "x", redirect_uri: "https://app.example/callback" },
          svcBasic(),
        ),
        400,
        "unauthorized_client",
      );
      assertOAuthError(
        await tokenRequest({ grant_type: "refresh_token", refresh_token: "x" }, svcBasic()),
        400,
        "unauthorized_client",
      );
      assertOAuthError(
        await tokenRequest({ grant_type: "client_credentials", client_id: "web-app" }),
        400,
        "unauthorized_client",
        /machine users/,
      );
    });

    it("unsupported_grant_type: unknown grant types, and token exchange while its flag is off", async () => {
      for (const grant of ["password", "urn:ietf:params:oauth:grant-type:token-exchange", "__proto__"]) {
        assertOAuthError(
          await tokenRequest({ grant_type: grant }, svcBasic()),
          400,
          "unsupported_grant_type",
        );
      }
    });

    it("invalid_grant: bad code or refresh token, and every way a jwt-bearer assertion can be wrong", async () => {
      assertOAuthError(
        await tokenRequest({
          grant_type: "authorization_code",
          client_id: "web-app",
          code: "not-a-code",
          redirect_uri: "https://app.example/callback",
        }),
        400,
        "invalid_grant",
      );
      // (expired, used, other client's codes, redirect mismatch, PKCE, refresh: code-flow.test.ts)
      const now = Math.floor(Date.now() / 1000);
      const cases: Array<[string, Promise<string>]> = [
        ["wrong audience", grantAssertion({ aud: "https://elsewhere.example" })],
        ["older than an hour", grantAssertion({ iat: now - 3700, exp: now + 60 })],
        ["expired", grantAssertion({ iat: now - 120, exp: now - 60 })],
        ["unknown key", grantAssertion({ kid: "424242" })],
      ];
      for (const [why, assertion] of cases) {
        const r = await tokenRequest({ grant_type: JWT_BEARER, assertion: await assertion, scope: "openid" });
        assert.equal(r.json?.error, "invalid_grant", `${why}: ${r.text}`);
        assertOAuthError(r, 400, "invalid_grant");
      }
      assertOAuthError(
        await tokenRequest({ grant_type: JWT_BEARER, assertion: "not.a.jwt", scope: "openid" }),
        400,
        "invalid_grant",
      );
      // The right assertion works (control).
      const ok = await tokenRequest({
        grant_type: JWT_BEARER,
        assertion: await grantAssertion(),
        scope: "openid",
      });
      assert.equal(ok.status, 200, ok.text);
      assert.ok(ok.json.id_token);
    });

    it("invalid_client: unknown client, wrong secret, no authentication, a method the client is not registered for", async () => {
      const unknown = await tokenRequest({ grant_type: "client_credentials" }, basic("nobody", "secret"));
      assertOAuthError(unknown, 401, "invalid_client");
      assert.match(
        unknown.headers.get("www-authenticate") ?? "",
        /^Basic /,
        "Basic was used: Basic challenge",
      );
      const wrong = await tokenRequest({ grant_type: "client_credentials" }, basic(svc.clientId, "wrong"));
      assertOAuthError(wrong, 401, "invalid_client");
      assert.match(wrong.headers.get("www-authenticate") ?? "", /^Basic /);
      const post = await tokenRequest({
        grant_type: "client_credentials",
        client_id: svc.clientId,
        client_secret: "wrong",
      });
      assertOAuthError(post, 401, "invalid_client");
      assert.equal(post.headers.get("www-authenticate"), null);
      assertOAuthError(
        await tokenRequest({ grant_type: "client_credentials" }),
        401,
        "invalid_client",
        /required/,
      );
      // client_id alone (method none): machine users are not public clients.
      assertOAuthError(
        await tokenRequest({ grant_type: "client_credentials", client_id: svc.clientId }),
        401,
        "invalid_client",
        /not registered for none/,
      );
      // private_key_jwt for a client without keys.
      const keyless = await tokenRequest({
        grant_type: "client_credentials",
        client_assertion: await clientAssertion({}, 300, other.clientId),
        client_assertion_type: ASSERTION_TYPE,
      });
      assertOAuthError(keyless, 401, "invalid_client", /not registered for private_key_jwt/);
      // An assertion naming another client than client_id: ambiguous.
      const mismatch = await tokenRequest({
        grant_type: "client_credentials",
        client_assertion: await clientAssertion(),
        client_assertion_type: ASSERTION_TYPE,
        client_id: other.clientId,
      });
      assertOAuthError(mismatch, 400, "invalid_request", /differs/);
    });

    it("private_key_jwt: a valid assertion authenticates once; replay, far expiry, wrong audience are invalid_client", async () => {
      const assertion = await clientAssertion();
      const body = {
        grant_type: "client_credentials",
        client_assertion: assertion,
        client_assertion_type: ASSERTION_TYPE,
      };
      const first = await tokenRequest(body);
      assert.equal(first.status, 200, first.text);
      assertOAuthError(await tokenRequest(body), 401, "invalid_client", /used before/);
      assertOAuthError(
        await tokenRequest({ ...body, client_assertion: await clientAssertion({}, 2 * 3600) }),
        401,
        "invalid_client",
        /one hour/,
      );
      assertOAuthError(
        await tokenRequest({
          ...body,
          client_assertion: await clientAssertion({ aud: "https://elsewhere.example" }),
        }),
        401,
        "invalid_client",
      );
      // The token endpoint's URL is an accepted audience too.
      const atEndpoint = await tokenRequest({
        ...body,
        client_assertion: await clientAssertion({ aud: token }),
      });
      assert.equal(atEndpoint.status, 200, atEndpoint.text);
    });

    it("server_error: an unexpected condition answers 500 without internals", async () => {
      await platform.db.query("ALTER TABLE oidc_access_tokens RENAME TO oidc_access_tokens_away");
      try {
        const r = await tokenRequest({ grant_type: "client_credentials" }, svcBasic());
        assertOAuthError(r, 500, "server_error");
        assert.doesNotMatch(r.text, /oidc_access_tokens|relation|stack/);
      } finally {
        await platform.db.query("ALTER TABLE oidc_access_tokens_away RENAME TO oidc_access_tokens");
      }
      assert.equal((await tokenRequest({ grant_type: "client_credentials" }, svcBasic())).status, 200);
    });
  });

  describe("introspection", () => {
    it("accepts only client_secret_basic and private_key_jwt; failed client authentication is 401 invalid_client", async () => {
      const at = await accessToken();
      const viaPost = await postForm(introspect, {
        token: at,
        client_id: svc.clientId,
        client_secret: svc.clientSecret,
      });
      assertOAuthError(viaPost, 401, "invalid_client", /not accepted/);
      assertOAuthError(
        await postForm(introspect, { token: at, client_id: svc.clientId }),
        401,
        "invalid_client",
      );
      assertOAuthError(
        await postForm(introspect, { token: at }, basic(svc.clientId, "wrong")),
        401,
        "invalid_client",
      );
      assertOAuthError(await postForm(introspect, { token: at }), 401, "invalid_client");
      const ok = await postForm(introspect, { token: at }, svcBasic());
      assert.equal(ok.json.active, true);
      assert.equal(ok.headers.get("cache-control"), "no-store");
      assertOAuthError(
        await postForm(introspect, {}, svcBasic()),
        400,
        "invalid_request",
        /token is required/,
      );
    });

    it("active: false for expired, revoked, malformed and foreign tokens", async () => {
      const expired = await accessToken();
      await platform.db.query(
        "UPDATE oidc_access_tokens SET expires_at = now() - interval '1 second' WHERE id = $1",
        [Buffer.from(expired.split(".")[0], "base64url").toString().slice(3)],
      );
      const revoked = await accessToken();
      assert.equal((await postForm(revoke, { token: revoked }, svcBasic())).status, 200);
      const foreign = await accessToken(other); // `other` is not in svc's audience ... and vice versa
      const tampered = `${(await accessToken()).slice(0, -4)}AAAA`;
      for (const t of [expired, revoked, foreign, tampered, "garbage", "a.b.c"]) {
        const r = await postForm(introspect, { token: t }, svcBasic());
        assert.equal(r.status, 200, r.text);
        assert.deepEqual(r.json, { active: false }, t);
      }
    });
  });

  describe("userinfo", () => {
    it('401 with WWW-Authenticate: Bearer error="invalid_token" for invalid, expired or revoked tokens', async () => {
      const expired = await accessToken();
      await platform.db.query(
        "UPDATE oidc_access_tokens SET expires_at = now() - interval '1 second' WHERE id = $1",
        [Buffer.from(expired.split(".")[0], "base64url").toString().slice(3)],
      );
      const revoked = await accessToken();
      await postForm(revoke, { token: revoked }, svcBasic());
      for (const t of [expired, revoked, "garbage", `${(await accessToken()).slice(0, -4)}AAAA`]) {
        const r = await fetch(userinfo, { headers: { authorization: `Bearer ${t}` } });
        assert.equal(r.status, 401);
        assert.match(r.headers.get("www-authenticate") ?? "", /^Bearer .*error="invalid_token"/);
        assert.equal(((await r.json()) as { error: string }).error, "invalid_token");
      }
      const missing = await fetch(userinfo);
      assert.equal(missing.status, 401);
      assert.match(missing.headers.get("www-authenticate") ?? "", /^Bearer /);
      const ok = await fetch(userinfo, { headers: { authorization: `Bearer ${await accessToken()}` } });
      assert.equal(ok.status, 200);
    });
  });

  describe("revocation", () => {
    it("needs client authentication; unknown tokens answer 200", async () => {
      assertOAuthError(await postForm(revoke, { token: "x" }), 401, "invalid_client");
      assertOAuthError(
        await postForm(revoke, { token: "x" }, basic(svc.clientId, "wrong")),
        401,
        "invalid_client",
      );
      assertOAuthError(await postForm(revoke, {}, svcBasic()), 400, "invalid_request");
      const unknown = await postForm(revoke, { token: "unknown" }, svcBasic());
      assert.equal(unknown.status, 200);
      assert.equal(unknown.text, "");
      // client_secret_post and private_key_jwt are accepted too
      const at = await accessToken();
      const viaPost = await postForm(revoke, {
        token: at,
        client_id: svc.clientId,
        client_secret: svc.clientSecret,
      });
      assert.equal(viaPost.status, 200);
      assert.deepEqual((await postForm(introspect, { token: at }, svcBasic())).json, { active: false });
      const viaJwt = await postForm(revoke, {
        token: await accessToken(),
        client_assertion: await clientAssertion(),
        client_assertion_type: ASSERTION_TYPE,
      });
      assert.equal(viaJwt.status, 200, viaJwt.text);
    });
  });

  describe("a database that cannot be reached", () => {
    it("answers 503 temporarily_unavailable with Retry-After, never the driver's message", async () => {
      const down = await startPlatform({ listen: true });
      try {
        await down.db.close();
        const r = await postForm(
          `${down.url}/oauth/v2/token`,
          { grant_type: "client_credentials" },
          basic("svc", "x"),
        );
        assertOAuthError(r, 503, "temporarily_unavailable");
        assert.equal(r.headers.get("retry-after"), "5");
        assert.doesNotMatch(r.text, /PGlite|pool|closed|ECONN/);
      } finally {
        await down.stop().catch(() => {});
      }
    });
  });
});
