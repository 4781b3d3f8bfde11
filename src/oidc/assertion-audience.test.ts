import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { decodeJwt, importPKCS8, SignJWT } from "jose";
import { eventCount, startPlatform } from "../../test/helpers.ts";
import { assertOAuthError, client, discover, machineClient, ownerToken, postForm } from "../../test/oidc.ts";

const ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";
const JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer";
const ELSEWHERE = "https://elsewhere.example";

/** A platform with a machine user that has a key, and the helpers the audience tests share. */
async function setUp(env: Record<string, string> = {}) {
  const platform = await startPlatform({ listen: true, env });
  const owner = await ownerToken(platform);
  const svc = await machineClient(platform, owner, "svc-audience", { withKey: true });
  const key = await importPKCS8(svc.key!.pem, "RS256");
  const url = {
    issuer: platform.url,
    token: `${platform.url}/oauth/v2/token`,
    introspect: `${platform.url}/oauth/v2/introspect`,
    revoke: `${platform.url}/oauth/v2/revoke`,
  };
  const now = () => Math.floor(Date.now() / 1000);
  /** A private_key_jwt assertion of svc naming `aud` (left out when undefined). */
  const clientAssertion = (aud: unknown, jti: string = crypto.randomUUID()) =>
    new SignJWT({
      iss: svc.clientId,
      sub: svc.clientId,
      aud: aud as string,
      iat: now(),
      exp: now() + 300,
      jti,
    })
      .setProtectedHeader({ alg: "RS256", kid: svc.key!.keyId })
      .sign(key);
  /** A jwt-bearer grant assertion of svc's user naming `aud`. */
  const grantAssertion = (aud: unknown, jti: string = crypto.randomUUID()) =>
    new SignJWT({ iss: svc.userId, sub: svc.userId, aud: aud as string, iat: now(), exp: now() + 300, jti })
      .setProtectedHeader({ alg: "RS256", kid: svc.key!.keyId })
      .sign(key);
  /** An access token of svc (client_secret_basic would do; a JWT keeps the helpers to one kind). */
  const accessToken = async () => {
    const reply = await postForm(url.token, {
      grant_type: "client_credentials",
      client_assertion_type: ASSERTION_TYPE,
      client_assertion: await clientAssertion(url.issuer),
    });
    assert.equal(reply.status, 200, reply.text);
    return reply.json.access_token as string;
  };
  /** The parameters of a request to `endpoint` (besides client authentication). */
  const paramsFor = async (endpoint: string): Promise<Record<string, string>> =>
    endpoint === url.token ? { grant_type: "client_credentials" } : { token: await accessToken() };
  /** A request authenticated by a client assertion naming `aud` at `endpoint`. */
  const authenticated = async (
    endpoint: string,
    aud: unknown,
    options: { jti?: string; params?: Record<string, string> } = {},
  ) =>
    postForm(endpoint, {
      ...(options.params ?? (await paramsFor(endpoint))),
      client_assertion_type: ASSERTION_TYPE,
      client_assertion: await clientAssertion(aud, options.jti),
    });
  const count = async (table: string) =>
    Number((await platform.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table}`))[0].n);
  /** What a refused request must leave unchanged: events, tokens, remembered assertions. */
  const stored = async () => ({
    events: await eventCount(platform),
    accessTokens: await count("oidc_access_tokens"),
    assertions: await count("oidc_used_assertions"),
  });
  return { platform, svc, key, url, grantAssertion, paramsFor, authenticated, stored };
}

/**
 * docs/oidc.md "Audiences of assertions": every assertion signed for this server names one audience, this
 * server, the same way at every endpoint that authenticates clients and in the jwt-bearer grant.
 */
describe("audiences of assertions: the compatible profile (default)", () => {
  let t: Awaited<ReturnType<typeof setUp>>;
  before(async () => {
    t = await setUp();
  });
  after(() => t?.platform.stop());

  it("openid-client's private_key_jwt with the token endpoint's URL as aud (Authlib's set-up) authenticates at token, introspection and revocation", async () => {
    const config = await discover(
      t.url.issuer,
      t.svc.clientId,
      client.PrivateKeyJwt(
        { key: t.key, kid: t.svc.key!.keyId },
        {
          [client.modifyAssertion]: (_header, payload) => {
            payload.aud = t.url.token;
          },
        },
      ),
    );
    const tokens = await client.clientCredentialsGrant(config, { scope: "openid" });
    const introspected = await client.tokenIntrospection(config, tokens.access_token);
    assert.equal(introspected.active, true);
    assert.equal(introspected.sub, t.svc.userId);
    await client.tokenRevocation(config, tokens.access_token);
    assert.deepEqual(await client.tokenIntrospection(config, tokens.access_token), { active: false });
  });

  it("openid-client's default (the issuer) works at all three endpoints too", async () => {
    const config = await discover(
      t.url.issuer,
      t.svc.clientId,
      client.PrivateKeyJwt({ key: t.key, kid: t.svc.key!.keyId }),
    );
    const tokens = await client.clientCredentialsGrant(config, { scope: "openid" });
    assert.equal((await client.tokenIntrospection(config, tokens.access_token)).active, true);
    await client.tokenRevocation(config, tokens.access_token);
    assert.equal((await client.tokenIntrospection(config, tokens.access_token)).active, false);
  });

  it("accepted at each endpoint: the issuer, the token endpoint's URL or the endpoint's own, as a string or a one-element array", async () => {
    for (const endpoint of [t.url.token, t.url.introspect, t.url.revoke]) {
      for (const aud of [t.url.issuer, t.url.token, endpoint]) {
        for (const form of [aud, [aud]]) {
          const reply = await t.authenticated(endpoint, form);
          assert.equal(reply.status, 200, `${endpoint} with aud ${JSON.stringify(form)}: ${reply.text}`);
        }
      }
    }
  });

  it("refused at each endpoint (invalid_client, 401), storing nothing: arrays with another member, another party, another endpoint", async () => {
    const cases = (endpoint: string): unknown[] => [
      [t.url.issuer, ELSEWHERE],
      [ELSEWHERE, t.url.token],
      [t.url.issuer, t.url.token],
      [endpoint, endpoint],
      [],
      ELSEWHERE,
      `${t.url.issuer}/`,
      // the URL of an endpoint other than the token endpoint and the one called
      endpoint === t.url.introspect ? t.url.revoke : t.url.introspect,
      undefined,
    ];
    for (const endpoint of [t.url.token, t.url.introspect, t.url.revoke]) {
      const jti = crypto.randomUUID();
      const params = await t.paramsFor(endpoint);
      for (const aud of cases(endpoint)) {
        const before = await t.stored();
        const reply = await t.authenticated(endpoint, aud, { jti, params });
        assertOAuthError(reply, 401, "invalid_client", /^client_assertion's aud must /);
        assert.deepEqual(await t.stored(), before, `${endpoint}, aud ${JSON.stringify(aud)}: nothing stored`);
      }
      // None of them used the jti up.
      const accepted = await t.authenticated(endpoint, t.url.issuer, { jti, params });
      assert.equal(accepted.status, 200, accepted.text);
    }
    // The description names what is accepted.
    const reply = await t.authenticated(t.url.introspect, [t.url.issuer, ELSEWHERE]);
    assert.equal(
      reply.json.error_description,
      `client_assertion's aud must name one audience, not 2: one of ${t.url.issuer}, ${t.url.token}, ${t.url.introspect}`,
    );
  });

  it("a single-audience ID token carries aud as a string, one with several audiences an array (with azp); openid-client validates both", async () => {
    const config = await discover(t.url.issuer, t.svc.clientId, client.None());
    const single = await client.genericGrantRequest(config, JWT_BEARER, {
      assertion: await t.grantAssertion(t.url.token),
    });
    assert.equal(decodeJwt(single.id_token!).aud, t.svc.clientId);
    assert.equal(single.claims()!.aud, t.svc.clientId, "validated by openid-client");
    const several = await client.genericGrantRequest(config, JWT_BEARER, {
      assertion: await t.grantAssertion(t.url.issuer),
      scope: "openid urn:platform:iam:org:project:id:platform:aud",
    });
    const claims = several.claims()!;
    assert.ok(Array.isArray(claims.aud) && claims.aud.length === 2, JSON.stringify(claims.aud));
    assert.equal(claims.azp, t.svc.clientId);
  });
});

describe("audiences of assertions: the strict profile (PLATFORM_ASSERTION_AUDIENCE=strict)", () => {
  let t: Awaited<ReturnType<typeof setUp>>;
  before(async () => {
    t = await setUp({ PLATFORM_ASSERTION_AUDIENCE: "strict" });
  });
  after(() => t?.platform.stop());

  it("client assertions: the issuer as a string at each endpoint; an endpoint URL or an array is invalid_client and stores nothing", async () => {
    const config = await discover(
      t.url.issuer,
      t.svc.clientId,
      client.PrivateKeyJwt({ key: t.key, kid: t.svc.key!.keyId }),
    );
    const tokens = await client.clientCredentialsGrant(config, { scope: "openid" });
    assert.equal((await client.tokenIntrospection(config, tokens.access_token)).active, true);
    await client.tokenRevocation(config, tokens.access_token);
    for (const endpoint of [t.url.token, t.url.introspect, t.url.revoke]) {
      const params = await t.paramsFor(endpoint);
      for (const aud of [t.url.token, endpoint, [t.url.issuer], [t.url.issuer, ELSEWHERE]]) {
        const before = await t.stored();
        assertOAuthError(
          await t.authenticated(endpoint, aud, { params }),
          401,
          "invalid_client",
          /aud must be the issuer .* as a single string \(the strict profile/,
        );
        assert.deepEqual(await t.stored(), before, `${endpoint}, aud ${JSON.stringify(aud)}: nothing stored`);
      }
    }
  });

  it("jwt-bearer: the issuer as a string; the token endpoint's URL or an array is invalid_grant and stores nothing", async () => {
    const grant = async (aud: unknown) =>
      postForm(t.url.token, { grant_type: JWT_BEARER, assertion: await t.grantAssertion(aud) });
    const accepted = await grant(t.url.issuer);
    assert.equal(accepted.status, 200, accepted.text);
    for (const aud of [t.url.token, [t.url.issuer], [t.url.token]]) {
      const before = await t.stored();
      assertOAuthError(await grant(aud), 400, "invalid_grant", /strict profile/);
      assert.deepEqual(await t.stored(), before, `aud ${JSON.stringify(aud)}: nothing stored`);
    }
  });
});
