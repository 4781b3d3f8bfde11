import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { createRemoteJWKSet, decodeJwt, importPKCS8, jwtVerify } from "jose";
import { type Json, restClient, startPlatform, type TestPlatform } from "../../test/helpers.ts";
import {
  assertOAuthError,
  basic,
  client,
  discover,
  type MachineClient,
  machineClient,
  ownerToken,
  postForm,
} from "../../test/oidc.ts";

const PROJECTS = "/resources/v3alpha/projects";
const REDIRECT = "https://shop.example.com/callback";
const ROLES_CLAIM = "urn:platform:iam:org:project:roles";

/** OIDC and API apps (projects) as clients, and role claims from user grants. */
describe("OIDC with apps and user grants", () => {
  let platform: TestPlatform;
  let owner: string;
  let projectId: string;
  let orgId: string;
  let svc: MachineClient;
  let apiBasic: { clientId: string; secret: string };
  let apiJwt: { clientId: string; keyId: string; pem: string };
  let web: { id: string; clientId: string; secret: string };
  const rest = restClient(
    () => platform,
    () => owner,
  );
  const created = async (path: string, json: unknown): Promise<Json> => {
    const r = await rest("POST", path, { json });
    assert.equal(r.status, 201, r.text);
    return r.json;
  };
  const audience = () => `urn:platform:iam:org:project:id:${projectId}:aud`;
  const svcToken = async (scope: string) => {
    const r = await postForm(
      `${platform.url}/oauth/v2/token`,
      { grant_type: "client_credentials", scope },
      basic(svc.clientId, svc.clientSecret),
    );
    assert.equal(r.status, 200, r.text);
    return r.json.access_token as string;
  };
  /** A code for the admin user, as the authorization endpoint will issue it. */
  const code = async (clientId: string, scope: string) => {
    const verifier = client.randomPKCECodeVerifier();
    const value = await platform.oidc.issueAuthorizationCode({
      instanceId: platform.bootstrapResult!.instanceId,
      issuer: platform.url,
      clientId,
      redirectUri: REDIRECT,
      scope: scope.split(" "),
      codeChallenge: await client.calculatePKCECodeChallenge(verifier),
      userId: platform.bootstrapResult!.adminUserId,
      authTime: new Date(),
      amr: ["pwd"],
    });
    return {
      verifier,
      url: new URL(`${REDIRECT}?code=${encodeURIComponent(value)}&iss=${encodeURIComponent(platform.url)}`),
    };
  };

  before(async () => {
    platform = await startPlatform({ listen: true });
    owner = await ownerToken(platform);
    orgId = platform.bootstrapResult!.orgId;
    projectId = (await created(PROJECTS, { name: "Shop" })).details.id;
    for (const key of ["reader", "writer"]) {
      await created(`${PROJECTS}/${projectId}/roles`, { key, display_name: key });
    }
    const basicApp = await created(`${PROJECTS}/${projectId}/apps`, {
      name: "api-basic",
      api: { auth_method: "API_AUTH_METHOD_TYPE_BASIC" },
    });
    apiBasic = { clientId: basicApp.client_id, secret: basicApp.client_secret };
    const jwtApp = await created(`${PROJECTS}/${projectId}/apps`, {
      name: "api-jwt",
      api: { auth_method: "API_AUTH_METHOD_TYPE_PRIVATE_KEY_JWT" },
    });
    const key = await created(`${PROJECTS}/${projectId}/apps/${jwtApp.details.id}/keys`, {});
    const file = JSON.parse(Buffer.from(key.key_content, "base64").toString("utf8"));
    apiJwt = { clientId: jwtApp.client_id, keyId: file.keyId, pem: file.key };
    const webApp = await created(`${PROJECTS}/${projectId}/apps`, {
      name: "web",
      oidc: {
        redirect_uris: [REDIRECT],
        response_types: ["OIDC_RESPONSE_TYPE_CODE"],
        grant_types: ["OIDC_GRANT_TYPE_AUTHORIZATION_CODE", "OIDC_GRANT_TYPE_REFRESH_TOKEN"],
        app_type: "OIDC_APP_TYPE_WEB",
        auth_method: "OIDC_AUTH_METHOD_TYPE_BASIC",
        access_token_type: "OIDC_TOKEN_TYPE_JWT",
        access_token_role_assertion: true,
        id_token_role_assertion: true,
      },
    });
    web = { id: webApp.details.id, clientId: webApp.client_id, secret: webApp.client_secret };
    svc = await machineClient(platform, owner, "svc");
    await created("/resources/v3alpha/user_grants", {
      user_id: platform.bootstrapResult!.adminUserId,
      project_id: projectId,
      role_keys: ["reader"],
    });
    await created("/resources/v3alpha/user_grants", {
      user_id: svc.userId,
      project_id: projectId,
      role_keys: ["writer"],
    });
  });
  after(() => platform?.stop());

  it("introspection as an API app, with client_secret_basic and private_key_jwt: active when its project is in the audience", async () => {
    const token = await svcToken(`openid ${audience()} urn:platform:iam:org:projects:roles`);
    const viaBasic = await discover(
      platform.url,
      apiBasic.clientId,
      client.ClientSecretBasic(apiBasic.secret),
    );
    const privateKey = await importPKCS8(apiJwt.pem, "RS256");
    const viaJwt = await discover(
      platform.url,
      apiJwt.clientId,
      client.PrivateKeyJwt({ key: privateKey, kid: apiJwt.keyId }),
    );
    const roles = { writer: { [orgId]: "platform.localhost" } };
    for (const config of [viaBasic, viaJwt]) {
      const r = await client.tokenIntrospection(config, token);
      assert.equal(r.active, true);
      assert.equal(r.sub, svc.userId);
      assert.equal(r.client_id, svc.clientId);
      assert.deepEqual(r.aud, [svc.clientId, projectId]);
      assert.equal(r.username, "svc@platform.localhost");
      assert.deepEqual(r[ROLES_CLAIM], roles);
      assert.deepEqual(r[`urn:platform:iam:org:project:${projectId}:roles`], roles);
    }
    // Not in the audience: inactive for the API app.
    const elsewhere = await svcToken("openid");
    assert.deepEqual(await client.tokenIntrospection(viaBasic, elsewhere), { active: false });
    // An API app authenticates only with its own method.
    assertOAuthError(
      await postForm(`${platform.url}/oauth/v2/introspect`, { token }, basic(apiJwt.clientId, "x")),
      401,
      "invalid_client",
      /not registered for client_secret_basic/,
    );
  });

  it("an OIDC app: code flow through openid-client, its project in the audience, roles from user grants", async () => {
    const config = await discover(platform.url, web.clientId, client.ClientSecretBasic(web.secret));
    const c = await code(web.clientId, "openid profile offline_access urn:platform:iam:org:projects:roles");
    const tokens = await client.authorizationCodeGrant(config, c.url, { pkceCodeVerifier: c.verifier });
    const claims = tokens.claims()!;
    const roles = { reader: { [orgId]: "platform.localhost" } };
    assert.deepEqual(claims.aud, [web.clientId, projectId]);
    assert.equal(claims.azp, web.clientId);
    assert.deepEqual(claims[ROLES_CLAIM], roles, "id_token_role_assertion");
    // The app's access tokens are JWTs (access_token_type) with the roles (access_token_role_assertion).
    const jwks = createRemoteJWKSet(new URL(config.serverMetadata().jwks_uri!));
    const { payload } = await jwtVerify(tokens.access_token, jwks, {
      issuer: platform.url,
      audience: projectId,
    });
    assert.deepEqual(payload[ROLES_CLAIM], roles);
    assert.deepEqual(
      (await client.fetchUserInfo(config, tokens.access_token, claims.sub))[ROLES_CLAIM],
      roles,
    );
    // The API app of the same project sees the user's token.
    const viaApi = await discover(platform.url, apiBasic.clientId, client.ClientSecretBasic(apiBasic.secret));
    assert.equal((await client.tokenIntrospection(viaApi, tokens.access_token)).active, true);
    const refreshed = await client.refreshTokenGrant(config, tokens.refresh_token!);
    assert.deepEqual(decodeJwt(refreshed.access_token)[ROLES_CLAIM], roles);
  });

  it("project_role_assertion puts the roles into userinfo without a roles scope", async () => {
    const config = await discover(platform.url, web.clientId, client.ClientSecretBasic(web.secret));
    const c = await code(web.clientId, "openid");
    const tokens = await client.authorizationCodeGrant(config, c.url, { pkceCodeVerifier: c.verifier });
    const sub = tokens.claims()!.sub;
    assert.equal((await client.fetchUserInfo(config, tokens.access_token, sub))[ROLES_CLAIM], undefined);
    const patched = await rest("PATCH", `${PROJECTS}/${projectId}`, {
      json: { project_role_assertion: true },
    });
    assert.equal(patched.status, 200, patched.text);
    try {
      const info = await client.fetchUserInfo(config, tokens.access_token, sub);
      assert.deepEqual(info[ROLES_CLAIM], { reader: { [orgId]: "platform.localhost" } });
    } finally {
      await rest("PATCH", `${PROJECTS}/${projectId}`, { json: { project_role_assertion: false } });
    }
  });

  it("an OIDC app may not use client_credentials; a deleted app's client ID stops working at once", async () => {
    const token = `${platform.url}/oauth/v2/token`;
    assertOAuthError(
      await postForm(token, { grant_type: "client_credentials" }, basic(web.clientId, web.secret)),
      400,
      "unauthorized_client",
    );
    assertOAuthError(
      await postForm(token, { grant_type: "client_credentials" }, basic(apiBasic.clientId, apiBasic.secret)),
      400,
      "unauthorized_client",
    );
    const deleted = await rest("DELETE", `${PROJECTS}/${projectId}/apps/${web.id}`);
    assert.equal(deleted.status, 200, deleted.text);
    assertOAuthError(
      await postForm(
        token,
        { grant_type: "refresh_token", refresh_token: "x" },
        basic(web.clientId, web.secret),
      ),
      401,
      "invalid_client",
    );
  });
});
