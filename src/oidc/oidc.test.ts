import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import {
  createRemoteJWKSet,
  decodeProtectedHeader,
  generateKeyPair,
  importPKCS8,
  jwtVerify,
  SignJWT,
} from "jose";
import { type Json, restClient, startPlatform, type TestPlatform } from "../../test/helpers.ts";
import {
  basic,
  client,
  discover,
  type MachineClient,
  machineClient,
  ownerToken,
  postForm,
} from "../../test/oidc.ts";
import { PlatformLanguageSettings } from "../gen/platform/settings/language/v3alpha/language_service_pb.ts";

const AUD_PLATFORM = "urn:platform:iam:org:project:id:platform:aud";

describe("OIDC provider through openid-client", () => {
  let platform: TestPlatform;
  let owner: string;
  let bearer: MachineClient; // ACCESS_TOKEN_TYPE_BEARER, with a key
  let jwtClient: MachineClient; // ACCESS_TOKEN_TYPE_JWT
  let other: MachineClient;
  const rest = restClient(
    () => platform,
    () => owner,
  );

  before(async () => {
    platform = await startPlatform({ listen: true });
    owner = await ownerToken(platform);
    bearer = await machineClient(platform, owner, "svc-bearer", { withKey: true });
    jwtClient = await machineClient(platform, owner, "svc-jwt", { accessTokenType: "JWT", withKey: true });
    other = await machineClient(platform, owner, "svc-other", { withKey: true });
  });
  after(() => platform?.stop());

  it("discovery: openid-client accepts the document; its fields are the documented ones", async () => {
    const config = await discover(
      platform.url,
      bearer.clientId,
      client.ClientSecretBasic(bearer.clientSecret),
    );
    const meta = config.serverMetadata();
    const issuer = platform.url;
    assert.equal(meta.issuer, issuer);
    assert.equal(meta.authorization_endpoint, `${issuer}/oauth/v2/authorize`);
    assert.equal(meta.token_endpoint, `${issuer}/oauth/v2/token`);
    assert.equal(meta.introspection_endpoint, `${issuer}/oauth/v2/introspect`);
    assert.equal(meta.userinfo_endpoint, `${issuer}/oidc/v1/userinfo`);
    assert.equal(meta.revocation_endpoint, `${issuer}/oauth/v2/revoke`);
    assert.equal(meta.end_session_endpoint, `${issuer}/oidc/v1/end_session`);
    assert.equal(meta.jwks_uri, `${issuer}/oauth/v2/keys`);
    assert.deepEqual(meta.response_types_supported, ["code", "id_token", "id_token token"]);
    assert.deepEqual(meta.response_modes_supported, ["query", "fragment", "form_post"]);
    assert.ok(meta.scopes_supported?.includes("openid"));
    assert.deepEqual(meta.subject_types_supported, ["public"]);
    assert.deepEqual(meta.id_token_signing_alg_values_supported, ["RS256"]);
    const methods = ["none", "client_secret_basic", "client_secret_post", "private_key_jwt"];
    assert.deepEqual(meta.token_endpoint_auth_methods_supported, methods);
    assert.deepEqual(meta.revocation_endpoint_auth_methods_supported, methods);
    assert.deepEqual(meta.introspection_endpoint_auth_methods_supported, [
      "client_secret_basic",
      "private_key_jwt",
    ]);
    assert.deepEqual(meta.code_challenge_methods_supported, ["S256"]);
    assert.deepEqual(meta.ui_locales_supported, ["en", "de", "fr", "it"]);
    assert.equal(meta.request_parameter_supported, false);
    assert.equal(meta.authorization_response_iss_parameter_supported, true);
    assert.ok(Array.isArray(meta.claims_supported) && meta.claims_supported.includes("sub"));
    assert.deepEqual(meta.grant_types_supported, [
      "authorization_code",
      "implicit",
      "refresh_token",
      "client_credentials",
      "urn:ietf:params:oauth:grant-type:jwt-bearer",
    ]);

    const raw = await fetch(`${issuer}/.well-known/openid-configuration`);
    assert.match(raw.headers.get("cache-control") ?? "", /max-age=\d+/);
    assert.equal(raw.headers.get("access-control-allow-origin"), "*");
    // No OAuth 2.0 Authorization Server Metadata: discovery is the substitute.
    assert.equal((await fetch(`${issuer}/.well-known/oauth-authorization-server`)).status, 404);
  });

  it("discovery follows the instance: token exchange while its flag is on, UI locales = restricted languages", async () => {
    const doc = async (): Promise<Json> =>
      (await fetch(`${platform.url}/.well-known/openid-configuration`)).json();
    const on = await rest("PATCH", "/settings/v3alpha/features", { json: { token_exchange: { set: true } } });
    assert.equal(on.status, 200, on.text);
    const languages = await rest("PATCH", "/settings/v3alpha/languages", {
      json: { restricted_languages: { languages: [{ key: "de" }, { key: "en" }] } },
    });
    assert.equal(languages.status, 200, languages.text);
    try {
      const withFlag = await doc();
      assert.ok(withFlag.grant_types_supported.includes("urn:ietf:params:oauth:grant-type:token-exchange"));
      assert.deepEqual(withFlag.ui_locales_supported, ["de", "en"]);
      // With the flag on the grant is served (src/oidc/token-exchange.test.ts): a machine user may not use it.
      const exchange = await postForm(
        `${platform.url}/oauth/v2/token`,
        { grant_type: "urn:ietf:params:oauth:grant-type:token-exchange", subject_token: "x" },
        basic(bearer.clientId, bearer.clientSecret),
      );
      assert.equal(exchange.json.error, "unauthorized_client");
    } finally {
      await rest("PATCH", "/settings/v3alpha/features", { json: { token_exchange: { reset: true } } });
      await rest("PATCH", "/settings/v3alpha/languages", {
        json: { restricted_languages: { languages: [] } },
      });
    }
    assert.ok(
      !(await doc()).grant_types_supported.includes("urn:ietf:params:oauth:grant-type:token-exchange"),
    );
  });

  it("client_credentials with client_secret_basic and client_secret_post: opaque Bearer tokens for ACCESS_TOKEN_TYPE_BEARER", async () => {
    for (const auth of [
      client.ClientSecretBasic(bearer.clientSecret),
      client.ClientSecretPost(bearer.clientSecret),
    ]) {
      const config = await discover(platform.url, bearer.clientId, auth);
      const tokens = await client.clientCredentialsGrant(config, { scope: "openid profile" });
      assert.equal(tokens.token_type, "bearer");
      assert.equal(tokens.expires_in, 12 * 3600, "access tokens live 12 h");
      assert.equal(tokens.scope, "openid profile");
      assert.equal(tokens.refresh_token, undefined);
      assert.equal(tokens.id_token, undefined);
      assert.equal(tokens.access_token.split(".").length, 2, "opaque: not a JWT");
      const info = await client.fetchUserInfo(config, tokens.access_token, bearer.userId);
      assert.equal(info.sub, bearer.userId);
    }
    // The raw answer is not cacheable.
    const raw = await postForm(
      `${platform.url}/oauth/v2/token`,
      { grant_type: "client_credentials" },
      basic(bearer.clientId, bearer.clientSecret),
    );
    assert.equal(raw.status, 200, raw.text);
    assert.equal(raw.headers.get("cache-control"), "no-store");
    assert.equal(raw.json.token_type, "Bearer");
    assert.equal(raw.json.scope, undefined, "no scope requested, none granted");
  });

  it("ACCESS_TOKEN_TYPE_JWT: access tokens are JWTs signed by a published key", async () => {
    const config = await discover(
      platform.url,
      jwtClient.clientId,
      client.ClientSecretBasic(jwtClient.clientSecret),
    );
    const tokens = await client.clientCredentialsGrant(config, { scope: `openid ${AUD_PLATFORM}` });
    const jwks = createRemoteJWKSet(new URL(config.serverMetadata().jwks_uri!));
    const { payload, protectedHeader } = await jwtVerify(tokens.access_token, jwks, { issuer: platform.url });
    assert.equal(protectedHeader.alg, "RS256");
    assert.equal(payload.sub, jwtClient.userId);
    assert.equal(payload.client_id, jwtClient.clientId);
    assert.equal(payload.scope, `openid ${AUD_PLATFORM}`);
    assert.ok(Array.isArray(payload.aud) && payload.aud.includes(jwtClient.clientId));
    assert.ok((payload.aud as string[]).length === 2, "the management project joins the audience");
    assert.equal(payload.exp! - payload.iat!, 12 * 3600);
    const introspected = await client.tokenIntrospection(config, tokens.access_token);
    assert.equal(introspected.active, true);
    assert.equal(introspected.jti, payload.jti);

    // Only the very token issued is accepted: the same claims signed by another key are worthless.
    const { privateKey } = await generateKeyPair("RS256");
    const forged = await new SignJWT(payload)
      .setProtectedHeader({ ...protectedHeader, alg: "RS256" })
      .sign(privateKey);
    assert.deepEqual(await client.tokenIntrospection(config, forged), { active: false });
    const info = await fetch(`${platform.url}/oidc/v1/userinfo`, {
      headers: { authorization: `Bearer ${forged}` },
    });
    assert.equal(info.status, 401);
  });

  it("jwt-bearer: an assertion signed with a generated machine key gives an ID token verified against the JWKS", async () => {
    const config = await discover(platform.url, bearer.clientId, client.None());
    const key = await importPKCS8(bearer.key!.pem, "RS256");
    const now = Math.floor(Date.now() / 1000);
    const assertion = await new SignJWT({})
      .setProtectedHeader({ alg: "RS256", kid: bearer.key!.keyId })
      .setIssuer(bearer.userId)
      .setSubject(bearer.userId)
      .setAudience(platform.url)
      .setIssuedAt(now)
      .setExpirationTime(now + 300)
      .sign(key);
    // openid-client validates the ID token of the response (signature against the JWKS, iss, aud, azp, exp).
    const tokens = await client.genericGrantRequest(config, "urn:ietf:params:oauth:grant-type:jwt-bearer", {
      assertion,
      scope: "openid profile",
    });
    const claims = tokens.claims()!;
    assert.equal(claims.sub, bearer.userId);
    assert.equal(claims.iss, platform.url);
    assert.equal(claims.azp, bearer.clientId);
    assert.ok(typeof claims.at_hash === "string");
    assert.equal(claims.name, undefined, "profile claims come from userinfo when an access token is issued");
    const jwks = createRemoteJWKSet(new URL(config.serverMetadata().jwks_uri!));
    const verified = await jwtVerify(tokens.id_token!, jwks, {
      issuer: platform.url,
      audience: bearer.clientId,
    });
    assert.equal(verified.protectedHeader.kid, decodeProtectedHeader(tokens.id_token!).kid);
    // The access token works at userinfo; the claims of its scope are there.
    const info = await client.fetchUserInfo(config, tokens.access_token, bearer.userId);
    assert.equal(info.preferred_username, bearer.clientId);
    assert.equal(info.name, "svc-bearer service");
  });

  it("introspection with client_secret_basic and private_key_jwt; only a client in the audience sees the token", async () => {
    const basicConfig = await discover(
      platform.url,
      bearer.clientId,
      client.ClientSecretBasic(bearer.clientSecret),
    );
    const tokens = await client.clientCredentialsGrant(basicConfig, {
      scope: "openid profile urn:platform:iam:user:resourceowner",
    });
    const viaBasic = await client.tokenIntrospection(basicConfig, tokens.access_token);
    assert.equal(viaBasic.active, true);
    assert.equal(viaBasic.client_id, bearer.clientId);
    assert.equal(viaBasic.token_type, "Bearer");
    assert.equal(viaBasic.iss, platform.url);
    assert.equal(viaBasic.scope, "openid profile urn:platform:iam:user:resourceowner");
    assert.equal(viaBasic.username, `${bearer.clientId}@platform.localhost`);
    assert.deepEqual(viaBasic.aud, [bearer.clientId]);
    assert.equal(viaBasic.nbf, viaBasic.iat);
    assert.equal(viaBasic.exp! - viaBasic.iat!, 12 * 3600);
    assert.equal(typeof viaBasic.jti, "string");
    assert.equal(viaBasic.preferred_username, bearer.clientId);
    assert.equal(viaBasic["urn:platform:iam:user:resourceowner:id"], platform.bootstrapResult!.orgId);
    assert.equal(viaBasic["urn:platform:iam:user:resourceowner:primary_domain"], "platform.localhost");
    // sub is userinfo's sub
    const info = await client.fetchUserInfo(basicConfig, tokens.access_token, client.skipSubjectCheck);
    assert.equal(viaBasic.sub, info.sub);

    const privateKey = await importPKCS8(bearer.key!.pem, "RS256");
    const jwtConfig = await discover(
      platform.url,
      bearer.clientId,
      client.PrivateKeyJwt({ key: privateKey, kid: bearer.key!.keyId }),
    );
    const viaJwt = await client.tokenIntrospection(jwtConfig, tokens.access_token);
    assert.equal(viaJwt.active, true);
    assert.equal(viaJwt.sub, bearer.userId);

    // Another client is not in the token's audience: inactive for it.
    const otherConfig = await discover(
      platform.url,
      other.clientId,
      client.ClientSecretBasic(other.clientSecret),
    );
    assert.deepEqual(await client.tokenIntrospection(otherConfig, tokens.access_token), { active: false });
  });

  it("userinfo: GET and POST with the bearer token, claims by scope", async () => {
    const config = await discover(
      platform.url,
      bearer.clientId,
      client.ClientSecretPost(bearer.clientSecret),
    );
    const narrow = await client.clientCredentialsGrant(config, { scope: "openid" });
    assert.deepEqual(await client.fetchUserInfo(config, narrow.access_token, bearer.userId), {
      sub: bearer.userId,
    });
    const wide = await client.clientCredentialsGrant(config, { scope: "openid profile" });
    const viaGet = await fetch(`${platform.url}/oidc/v1/userinfo`, {
      headers: { authorization: `Bearer ${wide.access_token}` },
    });
    assert.equal(viaGet.status, 200);
    assert.equal(viaGet.headers.get("cache-control"), "no-store");
    const got: Json = await viaGet.json();
    assert.equal(got.sub, bearer.userId);
    assert.equal(got.name, "svc-bearer service");
    const viaPost = await postForm(`${platform.url}/oidc/v1/userinfo`, { access_token: wide.access_token });
    assert.deepEqual(viaPost.json, got);
  });

  it("metadata and resource-owner scopes; role claims from the user grant source", async () => {
    const b64 = (v: string) => Buffer.from(v).toString("base64");
    const set = await rest("PATCH", `/resources/v3alpha/users/${other.userId}/metadata`, {
      json: { entries: { team: b64("identity") } },
    });
    assert.equal(set.status, 200, set.text);
    const config = await discover(platform.url, other.clientId, client.ClientSecretBasic(other.clientSecret));
    const scope =
      "openid urn:platform:iam:user:metadata urn:platform:iam:user:resourceowner urn:platform:iam:org:projects:roles " +
      AUD_PLATFORM;
    // Role claims come from user grants (projects issue); a grant source stands in for them here.
    const management = (await platform.instances.byId(platform.bootstrapResult!.instanceId))!.iamProjectId;
    const orgId = platform.bootstrapResult!.orgId;
    const original = platform.oidc.userGrants;
    platform.oidc.userGrants = async (_instanceId, userId, projectIds) =>
      userId === other.userId && projectIds.includes(management)
        ? [
            {
              projectId: management,
              orgId,
              orgPrimaryDomain: "platform.localhost",
              roles: ["reader", "writer"],
            },
          ]
        : [];
    try {
      const tokens = await client.clientCredentialsGrant(config, { scope });
      const info = await client.fetchUserInfo(config, tokens.access_token, other.userId);
      assert.deepEqual(info["urn:platform:iam:user:metadata"], { team: b64("identity") });
      assert.equal(info["urn:platform:iam:user:resourceowner:id"], orgId);
      assert.equal(info["urn:platform:iam:user:resourceowner:name"], "Platform");
      const roles = { reader: { [orgId]: "platform.localhost" }, writer: { [orgId]: "platform.localhost" } };
      assert.deepEqual(info["urn:platform:iam:org:project:roles"], roles);
      assert.deepEqual(info[`urn:platform:iam:org:project:${management}:roles`], roles);
      const introspected = await client.tokenIntrospection(config, tokens.access_token);
      assert.deepEqual(introspected["urn:platform:iam:org:project:roles"], roles);
      // A role scope limits the roles.
      const limited = await client.clientCredentialsGrant(config, {
        scope: `openid urn:platform:iam:org:project:role:reader ${AUD_PLATFORM}`,
      });
      const limitedInfo = await client.fetchUserInfo(config, limited.access_token, other.userId);
      assert.deepEqual(limitedInfo["urn:platform:iam:org:project:roles"], { reader: roles.reader });
      // Without a roles scope, no role claims.
      const plain = await client.clientCredentialsGrant(config, { scope: `openid ${AUD_PLATFORM}` });
      assert.equal(
        (await client.fetchUserInfo(config, plain.access_token, other.userId))[
          "urn:platform:iam:org:project:roles"
        ],
        undefined,
      );
    } finally {
      platform.oidc.userGrants = original;
    }
  });

  it("revocation of an opaque and of a JWT access token: each stops working at once", async () => {
    for (const c of [bearer, jwtClient]) {
      const config = await discover(platform.url, c.clientId, client.ClientSecretBasic(c.clientSecret));
      const keep = await client.clientCredentialsGrant(config, { scope: "openid" });
      const revoke = await client.clientCredentialsGrant(config, { scope: "openid" });
      await client.tokenRevocation(config, revoke.access_token);
      assert.deepEqual(await client.tokenIntrospection(config, revoke.access_token), { active: false });
      const info = await fetch(`${platform.url}/oidc/v1/userinfo`, {
        headers: { authorization: `Bearer ${revoke.access_token}` },
      });
      assert.equal(info.status, 401);
      // An access token revokes itself only.
      assert.equal((await client.tokenIntrospection(config, keep.access_token)).active, true);
      // Revoking again, or an unknown token: 200 (RFC 7009).
      await client.tokenRevocation(config, revoke.access_token);
      await client.tokenRevocation(config, "no-such-token");
    }
  });

  it("a locked or deactivated user's tokens stop working at once, and it cannot get new ones", async () => {
    const locked = await machineClient(platform, owner, "svc-locked");
    const config = await discover(
      platform.url,
      locked.clientId,
      client.ClientSecretBasic(locked.clientSecret),
    );
    const tokens = await client.clientCredentialsGrant(config, { scope: "openid" });
    for (const [action, undo] of [
      ["_lock", "_unlock"],
      ["_deactivate", "_reactivate"],
    ]) {
      assert.equal(
        (await rest("POST", `/resources/v3alpha/users/${locked.userId}/${action}`, { json: {} })).status,
        200,
      );
      const info = await fetch(`${platform.url}/oidc/v1/userinfo`, {
        headers: { authorization: `Bearer ${tokens.access_token}` },
      });
      assert.equal(info.status, 401, action);
      const refused = await postForm(
        `${platform.url}/oauth/v2/token`,
        { grant_type: "client_credentials" },
        basic(locked.clientId, locked.clientSecret),
      );
      assert.equal(refused.json.error, "invalid_client", action);
      assert.equal(
        (await rest("POST", `/resources/v3alpha/users/${locked.userId}/${undo}`, { json: {} })).status,
        200,
      );
    }
    assert.equal((await client.fetchUserInfo(config, tokens.access_token, locked.userId)).sub, locked.userId);
  });

  it("another client's token is not revoked (200, nothing changes)", async () => {
    const mine = await discover(platform.url, bearer.clientId, client.ClientSecretBasic(bearer.clientSecret));
    const theirs = await discover(platform.url, other.clientId, client.ClientSecretBasic(other.clientSecret));
    const token = await client.clientCredentialsGrant(mine, { scope: "openid" });
    await client.tokenRevocation(theirs, token.access_token);
    assert.equal((await client.tokenIntrospection(mine, token.access_token)).active, true);
  });

  it("the management APIs accept access tokens whose audience has the management project, over REST and gRPC", async () => {
    const member = await rest("POST", "/resources/v3alpha/memberships", {
      json: { user_id: jwtClient.userId, roles: ["IAM_OWNER"] },
    });
    assert.equal(member.status, 201, member.text);
    const add = await rest("POST", "/resources/v3alpha/memberships", {
      json: { user_id: bearer.userId, roles: ["IAM_OWNER"] },
    });
    assert.equal(add.status, 201, add.text);
    const grpc = createClient(PlatformLanguageSettings, createGrpcTransport({ baseUrl: platform.url }));

    for (const c of [bearer, jwtClient]) {
      const config = await discover(platform.url, c.clientId, client.ClientSecretBasic(c.clientSecret));
      const withAudience = await client.clientCredentialsGrant(config, { scope: `openid ${AUD_PLATFORM}` });
      const call = (token: string) => rest("GET", "/settings/v3alpha/languages", { token });
      assert.equal((await call(withAudience.access_token)).status, 200);
      await grpc.resolveLanguages({}, { headers: { authorization: `Bearer ${withAudience.access_token}` } });

      const withoutAudience = await client.clientCredentialsGrant(config, { scope: "openid" });
      const refused = await call(withoutAudience.access_token);
      assert.equal(refused.status, 401);
      assert.match(refused.json.message, /audience/);

      await client.tokenRevocation(config, withAudience.access_token);
      assert.equal((await call(withAudience.access_token)).status, 401, "revoked: refused at once");
    }
  });
});
