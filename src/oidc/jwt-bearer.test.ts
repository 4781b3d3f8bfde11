import assert from "node:assert/strict";
import type { KeyObject } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { decodeJwt, exportSPKI, generateKeyPair, type JWTPayload, SignJWT } from "jose";
import { eventCount, restClient, startPlatform, type TestPlatform } from "../../test/helpers.ts";
import {
  assertOAuthError,
  client,
  discover,
  type MachineClient,
  machineClient,
  ownerToken,
  postForm,
} from "../../test/oidc.ts";

const JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer";

/** The jwt-bearer grant (RFC 7521, RFC 7523 as updated by RFC 7523bis) through openid-client and raw posts. */
describe("jwt-bearer grant", () => {
  let platform: TestPlatform;
  let owner: string;
  let svc: MachineClient; // one server-generated key
  let multi: MachineClient; // an RSA key and an EC key
  let ecKey: { keyId: string; privateKey: CryptoKey };
  let token: string;
  const rest = restClient(
    () => platform,
    () => owner,
  );
  const now = () => Math.floor(Date.now() / 1000);

  /** An assertion of `user` signed by `key`: iss = sub = the user, aud = the issuer, 5 minutes, a fresh jti. */
  const assertion = (
    user: MachineClient,
    key: KeyObject | CryptoKey,
    options: { header?: Record<string, unknown>; claims?: JWTPayload } = {},
  ) =>
    new SignJWT({
      iss: user.userId,
      sub: user.userId,
      aud: platform.url,
      iat: now(),
      exp: now() + 300,
      jti: crypto.randomUUID(),
      ...options.claims,
    })
      .setProtectedHeader({ alg: "RS256", ...options.header })
      .sign(key);
  const grant = (assertion: string, extra: Record<string, string> = {}) =>
    postForm(token, { grant_type: JWT_BEARER, assertion, ...extra });

  before(async () => {
    platform = await startPlatform({ listen: true });
    owner = await ownerToken(platform);
    svc = await machineClient(platform, owner, "svc-jwt-bearer", { withKey: true });
    multi = await machineClient(platform, owner, "svc-two-keys", { withKey: true });
    const ec = await generateKeyPair("ES256");
    const uploaded = await rest("POST", `/resources/v3alpha/users/${multi.userId}/keys`, {
      json: { public_key: await exportSPKI(ec.publicKey) },
    });
    assert.equal(uploaded.status, 201, uploaded.text);
    ecKey = { keyId: uploaded.json.key_id, privateKey: ec.privateKey as CryptoKey };
    token = `${platform.url}/oauth/v2/token`;
  });
  after(() => platform?.stop());

  it("without scope and kid (RFC 7521 §4.1, RFC 7515): the default scope openid, the user's one key", async () => {
    const config = await discover(platform.url, svc.clientId, client.None());
    const tokens = await client.genericGrantRequest(config, JWT_BEARER, {
      assertion: await assertion(svc, svc.key!.privateKey),
    });
    assert.equal(tokens.scope, "openid");
    // openid-client verified the ID token (signature, iss, aud, azp, exp); its one audience is a string
    // (golang.org/x/oauth2/jwt cannot read an array).
    assert.equal(tokens.claims()!.sub, svc.userId);
    assert.equal(decodeJwt(tokens.id_token!).aud, svc.clientId);
    const info = await client.fetchUserInfo(config, tokens.access_token, svc.userId);
    assert.deepEqual(info, { sub: svc.userId });
  });

  it("as golang.org/x/oauth2/jwt sends it: aud the token URL, no scope parameter (the scope claim), no kid, an empty jti", async () => {
    const goAssertion = await new SignJWT({
      iss: svc.userId,
      scope: "openid profile",
      aud: token, // its default: the token URL
      exp: now() - 10 + 3600,
      iat: now() - 10,
      typ: "",
      sub: svc.userId,
      prn: svc.userId,
      jti: "",
    })
      .setProtectedHeader({ alg: "RS256", typ: "JWT" })
      .sign(svc.key!.privateKey);
    const reply = await grant(goAssertion);
    assert.equal(reply.status, 200, reply.text);
    assert.equal(reply.json.scope, "openid profile");
    assert.equal(reply.json.token_type, "Bearer");
    // The scope parameter, when given, is the one that counts.
    const withParameter = await grant(
      await assertion(svc, svc.key!.privateKey, { claims: { scope: "openid profile" } }),
      { scope: "openid email" },
    );
    assert.equal(withParameter.json.scope, "openid email", withParameter.text);
    // An unknown scope (parameter or claim) is invalid_scope.
    assertOAuthError(
      await grant(await assertion(svc, svc.key!.privateKey, { claims: { scope: "openid nonsense" } })),
      400,
      "invalid_scope",
      /nonsense/,
    );
  });

  it("with several keys and no kid, each unexpired key of the user is tried", async () => {
    const rsa = await grant(await assertion(multi, multi.key!.privateKey));
    assert.equal(rsa.status, 200, rsa.text);
    const ec = await grant(await assertion(multi, ecKey.privateKey, { header: { alg: "ES256" } }));
    assert.equal(ec.status, 200, ec.text);
    // With a kid, that key only.
    const named = await grant(
      await assertion(multi, ecKey.privateKey, { header: { alg: "ES256", kid: ecKey.keyId } }),
    );
    assert.equal(named.status, 200, named.text);
    assertOAuthError(
      await grant(
        await assertion(multi, ecKey.privateKey, { header: { alg: "ES256", kid: multi.key!.keyId } }),
      ),
      400,
      "invalid_grant",
      new RegExp(`does not verify with the key ${multi.key!.keyId}`),
    );
    // A key that is not the user's.
    const stranger = await generateKeyPair("RS256");
    assertOAuthError(
      await grant(await assertion(multi, stranger.privateKey)),
      400,
      "invalid_grant",
      /does not verify with any key of the user/,
    );
  });

  it("an assertion is used once: the same assertion, or another with the same jti, is invalid_grant", async () => {
    const once = await assertion(svc, svc.key!.privateKey);
    // A request refused for another reason does not use the assertion up.
    assertOAuthError(await grant(once, { scope: "openid nonsense" }), 400, "invalid_scope");
    assert.equal((await grant(once, { scope: "openid" })).status, 200);
    assertOAuthError(await grant(once, { scope: "openid" }), 400, "invalid_grant", /used before \(its jti\)/);
    const jti = crypto.randomUUID();
    assert.equal((await grant(await assertion(svc, svc.key!.privateKey, { claims: { jti } }))).status, 200);
    assertOAuthError(
      await grant(await assertion(svc, svc.key!.privateKey, { claims: { jti, iat: now() - 5 } })),
      400,
      "invalid_grant",
      /used before/,
    );
    // Without a jti the assertion itself is remembered.
    const withoutJti = await assertion(svc, svc.key!.privateKey, { claims: { jti: undefined } });
    assert.equal((await grant(withoutJti)).status, 200);
    assertOAuthError(await grant(withoutJti), 400, "invalid_grant", /used before/);
    // Another user's jti space is its own.
    assert.equal(
      (await grant(await assertion(multi, multi.key!.privateKey, { claims: { jti } }))).status,
      200,
    );
  });

  it("aud names this server once: the issuer or the token endpoint (RFC 7523 §3), as a string or a one-element array", async () => {
    for (const aud of [platform.url, [platform.url], token, [token]]) {
      const reply = await grant(await assertion(svc, svc.key!.privateKey, { claims: { aud } }));
      assert.equal(reply.status, 200, `aud ${JSON.stringify(aud)}: ${reply.text}`);
    }
  });

  it("aud naming anyone else, or more than once, is invalid_grant and stores nothing (RFC 7523bis)", async () => {
    const count = async (table: string) =>
      Number((await platform.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table}`))[0].n);
    const stored = async () => [
      await eventCount(platform),
      await count("oidc_access_tokens"),
      await count("oidc_used_assertions"),
    ];
    const jti = crypto.randomUUID();
    for (const aud of [
      [platform.url, "https://elsewhere.example"],
      ["https://elsewhere.example", token],
      [platform.url, token],
      [],
      "https://elsewhere.example",
      `${platform.url}/`,
      `${platform.url}/oauth/v2/introspect`,
      undefined,
    ]) {
      const before = await stored();
      assertOAuthError(
        await grant(await assertion(svc, svc.key!.privateKey, { claims: { aud, jti } })),
        400,
        "invalid_grant",
        /^assertion's aud must (name one audience|be one of)/,
      );
      assert.deepEqual(await stored(), before, `aud ${JSON.stringify(aud)}: nothing stored`);
    }
    // None of them used the jti up.
    const accepted = await grant(await assertion(svc, svc.key!.privateKey, { claims: { jti } }));
    assert.equal(accepted.status, 200, accepted.text);
  });

  it("each way an assertion can be wrong has its own description", async () => {
    const key = svc.key!.privateKey;
    const cases: Array<[string, Promise<string>, RegExp]> = [
      ["no sub", assertion(svc, key, { claims: { sub: undefined } }), /has no sub/],
      ["iss is not sub", assertion(svc, key, { claims: { iss: "someone" } }), /iss must equal its sub/],
      [
        "sub is not a machine user",
        assertion(svc, key, { claims: { iss: "424242", sub: "424242" } }),
        /424242 is not a machine user/,
      ],
      [
        "unknown kid",
        assertion(svc, key, { header: { kid: "424242" } }),
        /kid 424242 is not a key of the user/,
      ],
      ["no exp", assertion(svc, key, { claims: { exp: undefined } }), /exp/],
      ["expired", assertion(svc, key, { claims: { iat: now() - 120, exp: now() - 60 } }), /"exp"/],
      [
        "older than an hour",
        assertion(svc, key, { claims: { iat: now() - 3700, exp: now() + 60 } }),
        /"iat"/,
      ],
      [
        "numeric jti",
        assertion(svc, key, { claims: { jti: 42 as unknown as string } }),
        /jti must be a string/,
      ],
    ];
    for (const [why, signed, description] of cases) {
      const reply = await grant(await signed);
      assert.equal(reply.json?.error, "invalid_grant", `${why}: ${reply.text}`);
      assertOAuthError(reply, 400, "invalid_grant", description);
    }
    assertOAuthError(await grant("not-a-jwt"), 400, "invalid_grant", /not a JWT/);
    assertOAuthError(await postForm(token, { grant_type: JWT_BEARER }), 400, "invalid_request", /assertion/);

    // A locked user: told only once the signature verified.
    const locked = await machineClient(platform, owner, "svc-locked-bearer", { withKey: true });
    assert.equal(
      (await rest("POST", `/resources/v3alpha/users/${locked.userId}/_lock`, { json: {} })).status,
      200,
    );
    assertOAuthError(
      await grant(await assertion(locked, locked.key!.privateKey)),
      400,
      "invalid_grant",
      /not active/,
    );
    const stranger = await generateKeyPair("RS256");
    assertOAuthError(
      await grant(await assertion(locked, stranger.privateKey)),
      400,
      "invalid_grant",
      /does not verify/,
    );
  });
});
