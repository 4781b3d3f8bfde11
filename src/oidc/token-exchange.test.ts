import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import {
  createRemoteJWKSet,
  decodeJwt,
  decodeProtectedHeader,
  generateKeyPair,
  importPKCS8,
  jwtVerify,
  SignJWT,
} from "jose";
import {
  ADMIN_PASSWORD,
  addOrg,
  eventCount,
  type Json,
  restClient,
  startPlatform,
  type TestPlatform,
} from "../../test/helpers.ts";
import { client, discover, type MachineClient, machineClient, ownerToken } from "../../test/oidc.ts";

const TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange";
const TT = {
  access: "urn:ietf:params:oauth:token-type:access_token",
  refresh: "urn:ietf:params:oauth:token-type:refresh_token",
  id: "urn:ietf:params:oauth:token-type:id_token",
  jwt: "urn:ietf:params:oauth:token-type:jwt",
  userId: "urn:platform:params:oauth:token-type:user_id",
};
const PROJECTS = "/resources/v3alpha/projects";
const MEMBERSHIPS = "/resources/v3alpha/memberships";
const USERS = "/resources/v3alpha/users";
const REDIRECT = "https://shop.example.com/callback";
const AUD_PLATFORM = "urn:platform:iam:org:project:id:platform:aud";
const audScope = (projectId: string) => `urn:platform:iam:org:project:id:${projectId}:aud`;

interface App {
  id: string;
  clientId: string;
  secret?: string;
}

/**
 * Token exchange (RFC 8693) driven by openid-client's generic grant request: every row of
 * the token type table (docs/token-exchange.md), allowed and refused, the feature flag, audiences, impersonation and what
 * an exchanged token is good for (introspection, userinfo, the management APIs), and how long.
 */
describe("OIDC token exchange", () => {
  let platform: TestPlatform;
  let owner: string;
  let instanceId: string;
  let orgId: string;
  let orgB: string;
  let adminId: string;
  let adminSession: string; // a session of the admin (the sessions API): what its tokens were issued in
  let shopId: string;
  let ordersId: string;
  let web: App; // code flow, opaque access tokens
  let webJwt: App; // code flow, JWT access tokens
  let exchanger: App; // token exchange + refresh (+ code flow), client_secret_basic
  let exchangerPost: App;
  let exchangerPublic: App;
  let exchangerKeyed: App & { kid: string; key: CryptoKey };
  let shopApi: App; // introspects tokens of the Shop project
  let ordersApi: App; // the downstream API
  let support: MachineClient; // IAM_END_USER_IMPERSONATOR (and IAM_OWNER, to impersonate admin)
  let orgSupport: MachineClient; // ORG_END_USER_IMPERSONATOR of the first organization
  let otherSupport: MachineClient; // ORG_END_USER_IMPERSONATOR of organization B
  let iamOwner: MachineClient; // IAM_OWNER: owning does not imply impersonating
  let plain: MachineClient; // no role
  let robotB: { userId: string; pat: string; patId: string }; // a machine user of organization B
  let ex: client.Configuration; // exchanger
  let introspector: client.Configuration; // shopApi

  const rest = restClient(
    () => platform,
    () => owner,
  );
  const created = async (path: string, json: unknown): Promise<Json> => {
    const r = await rest("POST", path, { json });
    assert.equal(r.status, 201, r.text);
    return r.json;
  };
  const app = async (projectId: string, name: string, config: Json): Promise<App> => {
    const a = await created(`${PROJECTS}/${projectId}/apps`, { name, ...config });
    return { id: a.details.id, clientId: a.client_id, secret: a.client_secret };
  };
  const oidcApp = (name: string, oidc: Json) =>
    app(shopId, name, {
      oidc: {
        redirect_uris: [],
        response_types: [],
        grant_types: ["OIDC_GRANT_TYPE_TOKEN_EXCHANGE"],
        app_type: "OIDC_APP_TYPE_WEB",
        auth_method: "OIDC_AUTH_METHOD_TYPE_BASIC",
        ...oidc,
      },
    });
  const member = async (userId: string, roles: string[], org?: string) => {
    await created(org ? `${MEMBERSHIPS}?ctx.org_id=${org}` : MEMBERSHIPS, { user_id: userId, roles });
  };
  const config = (a: App, auth?: client.ClientAuth) =>
    discover(
      platform.url,
      a.clientId,
      auth ?? (a.secret ? client.ClientSecretBasic(a.secret) : client.None()),
    );

  /** The admin's tokens from the code flow of `a` (as the authorization endpoint will issue the code). */
  const adminTokens = async (a: App = web, scope = `openid profile offline_access ${AUD_PLATFORM}`) => {
    const verifier = client.randomPKCECodeVerifier();
    const code = await platform.oidc.issueAuthorizationCode({
      instanceId,
      issuer: platform.url,
      clientId: a.clientId,
      redirectUri: REDIRECT,
      scope: scope.split(" "),
      codeChallenge: await client.calculatePKCECodeChallenge(verifier),
      userId: adminId,
      sessionId: adminSession,
      authTime: new Date(),
      amr: ["pwd"],
    });
    const url = new URL(
      `${REDIRECT}?code=${encodeURIComponent(code)}&iss=${encodeURIComponent(platform.url)}`,
    );
    return client.authorizationCodeGrant(await config(a), url, { pkceCodeVerifier: verifier });
  };
  /**
   * A machine user's own access token (client_credentials), naming the Shop project (of the exchanging
   * clients) in its audience: a confidential client exchanges only tokens issued to it or naming it.
   */
  const machineToken = async (m: MachineClient, scope = `openid ${AUD_PLATFORM} ${audScope(shopId)}`) =>
    (await client.clientCredentialsGrant(await machineConfig(m), { scope })).access_token;
  const machineConfig = (m: MachineClient) =>
    discover(platform.url, m.clientId, client.ClientSecretBasic(m.clientSecret));
  const exchange = (params: Record<string, string> | URLSearchParams, c: client.Configuration = ex) =>
    client.genericGrantRequest(c, TOKEN_EXCHANGE, params);
  /** The exchange fails with that OAuth error (and description). */
  const refused = async (promise: Promise<unknown>, error: string, description?: RegExp, status = 400) => {
    await assert.rejects(promise, (e: client.ResponseBodyError) => {
      assert.equal(e.error, error, `${e.error}: ${e.error_description}`);
      assert.equal(e.status, status);
      if (description) assert.match(e.error_description ?? "", description);
      return true;
    });
  };
  const introspect = (token: string, c: client.Configuration = introspector) =>
    client.tokenIntrospection(c, token);
  const tokenRows = async () =>
    Number(
      (await platform.db.query<{ n: number }>("SELECT count(*)::int AS n FROM oidc_access_tokens"))[0].n,
    );
  /** Runs `fn` and asserts that it stored neither an event nor a token. */
  const nothingStored = async (fn: () => Promise<void>) => {
    const [events, tokens] = [await eventCount(platform), await tokenRows()];
    await fn();
    assert.equal(await eventCount(platform), events, "no event stored");
    assert.equal(await tokenRows(), tokens, "no token stored");
  };
  const setFlag = async (on: boolean) => {
    const r = await rest("PATCH", "/settings/v3alpha/features", {
      json: { token_exchange: on ? { set: true } : { reset: true } },
    });
    assert.equal(r.status, 200, r.text);
  };
  const clientJwt = (
    sub: string,
    key = exchangerKeyed.key,
    kid = exchangerKeyed.kid,
    aud: string | string[] = platform.url,
  ) =>
    new SignJWT({})
      .setProtectedHeader({ alg: "RS256", kid })
      .setIssuer(exchangerKeyed.clientId)
      .setSubject(sub)
      .setAudience(aud)
      .setIssuedAt()
      .setExpirationTime("5m")
      .sign(key);

  before(async () => {
    platform = await startPlatform({ listen: true });
    owner = await ownerToken(platform);
    instanceId = platform.bootstrapResult!.instanceId;
    orgId = platform.bootstrapResult!.orgId;
    adminId = platform.bootstrapResult!.adminUserId;
    const session = await created("/resources/v3alpha/sessions", {
      checks: { user: { user_id: adminId }, password: { password: ADMIN_PASSWORD } },
    });
    adminSession = session.details.id;
    orgB = await addOrg(platform, "Other");
    shopId = (await created(PROJECTS, { name: "Shop" })).details.id;
    ordersId = (await created(PROJECTS, { name: "Orders" })).details.id;
    const code = {
      redirect_uris: [REDIRECT],
      response_types: ["OIDC_RESPONSE_TYPE_CODE"],
      grant_types: ["OIDC_GRANT_TYPE_AUTHORIZATION_CODE", "OIDC_GRANT_TYPE_REFRESH_TOKEN"],
    };
    web = await oidcApp("web", code);
    webJwt = await oidcApp("web-jwt", { ...code, access_token_type: "OIDC_TOKEN_TYPE_JWT" });
    exchanger = await oidcApp("exchanger", {
      ...code,
      grant_types: [...code.grant_types, "OIDC_GRANT_TYPE_TOKEN_EXCHANGE"],
    });
    exchangerPost = await oidcApp("exchanger-post", { auth_method: "OIDC_AUTH_METHOD_TYPE_POST" });
    // A public client uses the code flow with PKCE too (the apps API asks for it).
    exchangerPublic = await oidcApp("exchanger-public", {
      ...code,
      grant_types: ["OIDC_GRANT_TYPE_AUTHORIZATION_CODE", "OIDC_GRANT_TYPE_TOKEN_EXCHANGE"],
      app_type: "OIDC_APP_TYPE_USER_AGENT",
      auth_method: "OIDC_AUTH_METHOD_TYPE_NONE",
    });
    const keyed = await oidcApp("exchanger-keyed", { auth_method: "OIDC_AUTH_METHOD_TYPE_PRIVATE_KEY_JWT" });
    const key = await created(`${PROJECTS}/${shopId}/apps/${keyed.id}/keys`, {});
    const file = JSON.parse(Buffer.from(key.key_content, "base64").toString("utf8"));
    exchangerKeyed = { ...keyed, kid: file.keyId, key: await importPKCS8(file.key, "RS256") };
    shopApi = await app(shopId, "shop-api", { api: { auth_method: "API_AUTH_METHOD_TYPE_BASIC" } });
    ordersApi = await app(ordersId, "orders-api", { api: { auth_method: "API_AUTH_METHOD_TYPE_BASIC" } });

    support = await machineClient(platform, owner, "support", { withKey: true });
    // IAM_OWNER too: only an IAM_OWNER controls admin's account (docs/permissions.md).
    await member(support.userId, ["IAM_END_USER_IMPERSONATOR", "IAM_OWNER"]);
    orgSupport = await machineClient(platform, owner, "org-support");
    await member(orgSupport.userId, ["ORG_END_USER_IMPERSONATOR"], orgId);
    otherSupport = await machineClient(platform, owner, "other-support");
    await member(otherSupport.userId, ["ORG_END_USER_IMPERSONATOR"], orgB);
    iamOwner = await machineClient(platform, owner, "iam-owner");
    await member(iamOwner.userId, ["IAM_OWNER"]);
    plain = await machineClient(platform, owner, "plain");
    const robot = await created(`${USERS}?ctx.org_id=${orgB}`, {
      username: "robot-b",
      machine: { name: "robot of B", access_token_type: "ACCESS_TOKEN_TYPE_BEARER" },
    });
    const pat = await created(`${USERS}/${robot.details.id}/pats`, {});
    robotB = { userId: robot.details.id, pat: pat.token, patId: pat.pat_id };

    ex = await config(exchanger);
    introspector = await config(shopApi);
    await setFlag(true);
  });
  after(() => platform?.stop());

  it("the token_exchange flag: off → unsupported_grant_type and not in discovery; on → listed and served", async () => {
    const listed = async () =>
      (
        (await (await fetch(`${platform.url}/.well-known/openid-configuration`)).json()) as Json
      ).grant_types_supported.includes(TOKEN_EXCHANGE);
    const subject = (await adminTokens()).access_token;
    await setFlag(false);
    try {
      assert.equal(await listed(), false);
      await nothingStored(() =>
        refused(
          exchange({ subject_token: subject, subject_token_type: TT.access }),
          "unsupported_grant_type",
          /token_exchange/,
        ),
      );
    } finally {
      await setFlag(true);
    }
    assert.equal(await listed(), true);
    const tokens = await exchange({ subject_token: subject, subject_token_type: TT.access });
    assert.equal(tokens.issued_token_type, TT.access);
  });

  it("subject access tokens (opaque, JWT, PAT) → an opaque access token for the subject, with its scope and audience", async () => {
    for (const from of [web, webJwt]) {
      const subject = await adminTokens(from, `openid profile ${AUD_PLATFORM}`);
      if (from === webJwt) assert.equal(subject.access_token.split(".").length, 3, "a JWT subject token");
      const tokens = await exchange({ subject_token: subject.access_token, subject_token_type: TT.access });
      assert.equal(tokens.token_type, "bearer");
      assert.equal(tokens.issued_token_type, TT.access);
      assert.equal(tokens.access_token.split(".").length, 2, "requested access_token: opaque");
      assert.equal(tokens.scope, `openid profile ${AUD_PLATFORM}`, "the subject's scope");
      assert.ok(tokens.expires_in! <= subject.expires_in!);
      assert.equal(tokens.refresh_token, undefined, "no offline_access: no refresh token");
      assert.ok(tokens.id_token, "openid: an ID token");
      assert.equal(tokens.claims()!.sub, adminId);
      const info = await introspect(tokens.access_token);
      assert.equal(info.active, true);
      assert.equal(info.sub, adminId);
      assert.equal(info.client_id, exchanger.clientId);
      assert.deepEqual(info.aud, (await introspect(subject.access_token)).aud, "the subject's audience");
      assert.equal(info.act, undefined, "no actor: no act");
      assert.equal(info.username, "admin@platform.localhost");
      assert.equal(
        (await client.fetchUserInfo(ex, tokens.access_token, adminId)).preferred_username,
        "admin",
      );
    }
    // A personal access token: its audience is the management API.
    const fromPat = await exchange({ subject_token: robotB.pat, subject_token_type: TT.access });
    assert.equal(fromPat.scope, undefined, "a PAT has no scope");
    const call = await rest("GET", "/settings/v3alpha/languages", { token: fromPat.access_token });
    assert.equal(call.status, 200, call.text);
    assert.equal((await client.fetchUserInfo(ex, fromPat.access_token, robotB.userId)).sub, robotB.userId);
  });

  it("requested types: jwt → a JWT access token; id_token → an ID token in access_token with token_type N_A", async () => {
    const subject = (await adminTokens()).access_token;
    const jwks = createRemoteJWKSet(new URL(ex.serverMetadata().jwks_uri!));
    const asJwt = await exchange({
      subject_token: subject,
      subject_token_type: TT.access,
      requested_token_type: TT.jwt,
    });
    assert.equal(asJwt.token_type, "bearer");
    assert.equal(asJwt.issued_token_type, TT.jwt);
    assert.equal(decodeProtectedHeader(asJwt.access_token).typ, "at+jwt");
    const { payload } = await jwtVerify(asJwt.access_token, jwks, { issuer: platform.url });
    assert.equal(payload.sub, adminId);
    assert.equal(payload.client_id, exchanger.clientId);
    assert.equal((await introspect(asJwt.access_token)).active, true);

    const asId = await exchange({
      subject_token: subject,
      subject_token_type: TT.access,
      requested_token_type: TT.id,
      scope: "openid profile",
    });
    assert.equal(asId.token_type, "n_a", "N_A (openid-client lower-cases token types)");
    assert.equal(asId.issued_token_type, TT.id);
    assert.equal(asId.id_token, undefined);
    assert.equal(asId.refresh_token, undefined);
    assert.equal(asId.scope, "openid profile");
    const id = await jwtVerify(asId.access_token, jwks, {
      issuer: platform.url,
      audience: exchanger.clientId,
    });
    assert.equal(id.protectedHeader.typ, "JWT");
    assert.equal(id.payload.sub, adminId);
    assert.equal(id.payload.azp, exchanger.clientId);
    assert.equal(id.payload.given_name, "Platform", "profile claims: no access token comes with it");
    assert.ok(asId.expires_in! > 0 && asId.expires_in! <= 12 * 3600);
    // It is not an access token.
    assert.deepEqual(await introspect(asId.access_token), { active: false });
  });

  it("scope as requested (else the subject's); offline_access → a refresh token, openid → an ID token", async () => {
    const subject = (await adminTokens()).access_token;
    const narrowed = await exchange({
      subject_token: subject,
      subject_token_type: TT.access,
      scope: "profile",
    });
    assert.equal(narrowed.scope, "profile");
    assert.equal(narrowed.id_token, undefined, "without openid: no ID token");
    assert.equal(narrowed.refresh_token, undefined);
    await refused(
      exchange({ subject_token: subject, subject_token_type: TT.access, scope: "openid bogus" }),
      "invalid_scope",
      /bogus/,
    );

    const offline = await exchange({
      subject_token: subject,
      subject_token_type: TT.access,
      scope: "openid offline_access",
    });
    assert.ok(offline.refresh_token);
    assert.ok(offline.id_token);
    const refreshed = await client.refreshTokenGrant(ex, offline.refresh_token!);
    assert.equal((await client.fetchUserInfo(ex, refreshed.access_token, adminId)).sub, adminId);
    // A client without the refresh_token grant gets none; offline_access is not granted then.
    const post = await config(exchangerPost, client.ClientSecretPost(exchangerPost.secret!));
    const without = await exchange(
      { subject_token: subject, subject_token_type: TT.access, scope: "openid offline_access" },
      post,
    );
    assert.equal(without.refresh_token, undefined);
    assert.equal(without.scope, "openid");
  });

  it("ID tokens as subject and actor, access tokens as actor (the same user: no impersonation, no act)", async () => {
    // An ID token is exchanged by the client it was issued to.
    const admin = await adminTokens(exchanger);
    const adminJwt = await adminTokens(webJwt);
    const idToken = admin.id_token!;
    const fromId = await exchange({ subject_token: idToken, subject_token_type: TT.id });
    assert.equal(fromId.scope, "openid", "an ID token's scope is openid");
    const info = await introspect(fromId.access_token);
    assert.equal(info.sub, adminId);
    assert.equal((decodeJwt(idToken).aud as string[]).length, 3, "the sign-in had the management API too");
    assert.deepEqual(
      info.aud,
      [exchanger.clientId, shopId],
      "an ID token passes on its client and project only",
    );
    const languages = await rest("GET", "/settings/v3alpha/languages", { token: fromId.access_token });
    assert.equal(languages.status, 401, "not a management token");

    for (const [actor, actorType] of [
      [adminJwt.access_token, TT.access],
      [admin.access_token, TT.access],
      [idToken, TT.id],
    ]) {
      const tokens = await exchange({
        subject_token: idToken,
        subject_token_type: TT.id,
        actor_token: actor,
        actor_token_type: actorType,
      });
      assert.equal((await introspect(tokens.access_token)).act, undefined);
    }
    // A JWT access token is not an ID token, nor an ID token an access token.
    await refused(
      exchange({ subject_token: adminJwt.access_token, subject_token_type: TT.id }),
      "invalid_request",
      /subject_token is invalid/,
    );
    await refused(
      exchange({ subject_token: idToken, subject_token_type: TT.access }),
      "invalid_request",
      /subject_token is invalid/,
    );
    // Nor another client's ID token, as subject or actor.
    await refused(
      exchange({ subject_token: adminJwt.id_token!, subject_token_type: TT.id }),
      "invalid_request",
      /subject_token is an ID token of another client/,
    );
    await refused(
      exchange({
        subject_token: idToken,
        subject_token_type: TT.id,
        actor_token: adminJwt.id_token!,
        actor_token_type: TT.id,
      }),
      "invalid_request",
      /actor_token is an ID token of another client/,
    );
  });

  it("subject jwt (signed by a key of the requesting client) and user_id: only with an actor token", async () => {
    const keyed = await config(
      exchangerKeyed,
      client.PrivateKeyJwt({ key: exchangerKeyed.key, kid: exchangerKeyed.kid }),
    );
    const actor = await machineToken(support);
    await refused(
      exchange({ subject_token: await clientJwt(adminId), subject_token_type: TT.jwt }, keyed),
      "invalid_request",
      /subject_token_type urn:ietf:params:oauth:token-type:jwt is allowed only with an actor_token/,
    );
    await refused(
      exchange({ subject_token: adminId, subject_token_type: TT.userId }),
      "invalid_request",
      /only with an actor_token/,
    );
    const viaJwt = await exchange(
      {
        subject_token: await clientJwt(adminId),
        subject_token_type: TT.jwt,
        actor_token: actor,
        actor_token_type: TT.access,
      },
      keyed,
    );
    // No audience of their own: the actor's (its client ID, the management project).
    const supportConfig = await machineConfig(support);
    assert.equal((await introspect(viaJwt.access_token, supportConfig)).sub, adminId);
    const viaUserId = await exchange({
      subject_token: adminId,
      subject_token_type: TT.userId,
      actor_token: actor,
      actor_token_type: TT.access,
    });
    const info = await introspect(viaUserId.access_token, supportConfig);
    assert.equal(info.sub, adminId);
    assert.deepEqual(info.act, { sub: support.userId });
    assert.equal(
      viaUserId.scope,
      `openid ${AUD_PLATFORM} ${audScope(shopId)}`,
      "no subject scope: the actor's",
    );

    // A JWT signed by another key, of an unknown user, or issued by someone else; an unknown user ID.
    const foreign = (await generateKeyPair("RS256")).privateKey;
    const withActor = { actor_token: actor, actor_token_type: TT.access };
    for (const jwt of [
      await clientJwt(adminId, foreign),
      await clientJwt("123456789"),
      await new SignJWT({})
        .setProtectedHeader({ alg: "RS256", kid: exchangerKeyed.kid })
        .setIssuer("someone-else")
        .setSubject(adminId)
        .setAudience(platform.url)
        .setIssuedAt()
        .setExpirationTime("5m")
        .sign(exchangerKeyed.key),
    ]) {
      await refused(
        exchange({ subject_token: jwt, subject_token_type: TT.jwt, ...withActor }, keyed),
        "invalid_request",
        /^subject_token /,
      );
    }
    // Its aud follows the rule of every assertion (docs/oidc.md "Audiences of assertions"): one audience
    // naming this server; an array naming another party too, or another endpoint, is refused.
    const [key, kid] = [exchangerKeyed.key, exchangerKeyed.kid];
    for (const aud of [[platform.url, "https://elsewhere.example"], `${platform.url}/oauth/v2/introspect`]) {
      const jwt = await clientJwt(adminId, key, kid, aud);
      await nothingStored(() =>
        refused(
          exchange({ subject_token: jwt, subject_token_type: TT.jwt, ...withActor }, keyed),
          "invalid_request",
          /^subject_token has a wrong audience: aud must /,
        ),
      );
    }
    const atTokenEndpoint = await exchange(
      {
        subject_token: await clientJwt(adminId, key, kid, [`${platform.url}/oauth/v2/token`]),
        subject_token_type: TT.jwt,
        ...withActor,
      },
      keyed,
    );
    assert.equal((await introspect(atTokenEndpoint.access_token, supportConfig)).sub, adminId);
    await refused(
      exchange({ subject_token: "123456789", subject_token_type: TT.userId, ...withActor }),
      "invalid_request",
      /subject_token names a user who does not exist/,
    );
  });

  it("every combination the table marks 'not allowed', and invalid tokens → invalid_request, nothing stored", async () => {
    const admin = await adminTokens();
    const access = admin.access_token;
    const cases: Array<[Record<string, string>, RegExp]> = [
      [
        { subject_token: admin.refresh_token!, subject_token_type: TT.refresh },
        /subject_token_type .*refresh_token is not allowed/,
      ],
      [
        {
          subject_token: access,
          subject_token_type: TT.access,
          actor_token: admin.refresh_token!,
          actor_token_type: TT.refresh,
        },
        /actor_token_type .*refresh_token is not allowed/,
      ],
      [
        {
          subject_token: access,
          subject_token_type: TT.access,
          actor_token: await clientJwt(adminId),
          actor_token_type: TT.jwt,
        },
        /actor_token_type .*jwt is not allowed/,
      ],
      [
        {
          subject_token: access,
          subject_token_type: TT.access,
          actor_token: adminId,
          actor_token_type: TT.userId,
        },
        /actor_token_type .*user_id is not allowed/,
      ],
      [
        { subject_token: access, subject_token_type: TT.access, requested_token_type: TT.refresh },
        /requested_token_type .*refresh_token is not allowed/,
      ],
      [
        { subject_token: access, subject_token_type: TT.access, requested_token_type: TT.userId },
        /requested_token_type .*user_id is not allowed/,
      ],
      [
        { subject_token: access, subject_token_type: "urn:ietf:params:oauth:token-type:saml2" },
        /not a supported token type/,
      ],
      [{ subject_token: access }, /subject_token_type is required/],
      [{ subject_token_type: TT.access }, /subject_token is required/],
      [
        { subject_token: access, subject_token_type: TT.access, actor_token: access },
        /actor_token_type is required/,
      ],
      [
        { subject_token: access, subject_token_type: TT.access, actor_token_type: TT.access },
        /without actor_token/,
      ],
      [{ subject_token: "garbage", subject_token_type: TT.access }, /subject_token is invalid or expired/],
      [
        { subject_token: `${access.slice(0, -2)}xx`, subject_token_type: TT.access },
        /subject_token is invalid/,
      ],
      [{ subject_token: "a.b.c", subject_token_type: TT.id }, /subject_token is invalid/],
      [
        {
          subject_token: access,
          subject_token_type: TT.access,
          actor_token: "garbage",
          actor_token_type: TT.access,
        },
        /actor_token is invalid or expired/,
      ],
    ];
    await nothingStored(async () => {
      for (const [params, description] of cases)
        await refused(exchange(params), "invalid_request", description);
    });

    // Revoked and expired subject tokens.
    const revoked = (await adminTokens()).access_token;
    await client.tokenRevocation(await config(web), revoked);
    await refused(
      exchange({ subject_token: revoked, subject_token_type: TT.access }),
      "invalid_request",
      /invalid or expired/,
    );
    const expiring = (await adminTokens()).access_token;
    const { jti } = await introspect(expiring);
    await platform.db.query(
      "UPDATE oidc_access_tokens SET expires_at = now() - interval '1 second' WHERE id = $1",
      [jti],
    );
    await refused(
      exchange({ subject_token: expiring, subject_token_type: TT.access }),
      "invalid_request",
      /invalid or expired/,
    );
  });

  it("invalid_target: an audience outside the subject's and actor's, resource, an audience scope outside", async () => {
    const admin = (await adminTokens()).access_token;
    const adminJwt = (await adminTokens(webJwt)).access_token;
    await nothingStored(async () => {
      await refused(
        exchange({ subject_token: admin, subject_token_type: TT.access, audience: ordersId }),
        "invalid_target",
        new RegExp(`audience ${ordersId} is not an audience`),
      );
      await refused(
        exchange({
          subject_token: admin,
          subject_token_type: TT.access,
          resource: "https://orders.example.com",
        }),
        "invalid_target",
        /resource is not supported/,
      );
      await refused(
        exchange({
          subject_token: admin,
          subject_token_type: TT.access,
          scope: `openid urn:platform:iam:org:project:id:${ordersId}:aud`,
        }),
        "invalid_target",
        /scope names the audience/,
      );
    });
    // Within the union of both tokens' audiences: repeated audience parameters.
    const params = new URLSearchParams({ subject_token: admin, subject_token_type: TT.access });
    params.append("actor_token", adminJwt);
    params.append("actor_token_type", TT.access);
    params.append("audience", shopId);
    params.append("audience", webJwt.clientId); // the actor's only
    const tokens = await exchange(params);
    assert.deepEqual((await introspect(tokens.access_token)).aud, [shopId, webJwt.clientId]);
  });

  it("delegation to a downstream API: the audience narrowed to its project, which alone may introspect it", async () => {
    const subject = (await adminTokens(web, `openid profile urn:platform:iam:org:project:id:${ordersId}:aud`))
      .access_token;
    const downstream = await exchange({
      subject_token: subject,
      subject_token_type: TT.access,
      audience: ordersId,
    });
    assert.equal(downstream.scope, `openid profile urn:platform:iam:org:project:id:${ordersId}:aud`);
    const orders = await config(ordersApi);
    const info = await introspect(downstream.access_token, orders);
    assert.equal(info.active, true);
    assert.deepEqual(info.aud, [ordersId]);
    assert.equal(info.sub, adminId);
    assert.deepEqual(
      await introspect(downstream.access_token),
      { active: false },
      "Shop is no longer an audience",
    );
    // Narrowing the audience drops the audience scopes it left out.
    const narrower = await exchange({
      subject_token: (await adminTokens()).access_token,
      subject_token_type: TT.access,
      audience: shopId,
    });
    assert.equal(narrower.scope, "openid profile offline_access");
    const refused401 = await rest("GET", "/settings/v3alpha/languages", { token: narrower.access_token });
    assert.equal(refused401.status, 401, "the management project is no longer in the audience");
  });

  it("impersonation: IAM_END_USER_IMPERSONATOR for any user, ORG_END_USER_IMPERSONATOR in the subject's organization", async () => {
    const admin = (await adminTokens()).access_token;
    const as = async (actor: MachineClient, subject: string) =>
      exchange({
        subject_token: subject,
        subject_token_type: TT.access,
        actor_token: await machineToken(actor),
        actor_token_type: TT.access,
        requested_token_type: TT.jwt,
      });
    for (const [actor, subject] of [
      [support, admin],
      [support, robotB.pat],
      [otherSupport, robotB.pat],
    ] as const) {
      const tokens = await as(actor, subject);
      assert.deepEqual(decodeJwt(tokens.access_token).act, { sub: actor.userId });
    }
    for (const [actor, subject, org] of [
      [orgSupport, robotB.pat, orgB],
      [otherSupport, admin, orgId],
      [iamOwner, admin, orgId],
      [plain, admin, orgId],
    ] as const) {
      const actorToken = await machineToken(actor);
      await nothingStored(() =>
        refused(
          exchange({
            subject_token: subject,
            subject_token_type: TT.access,
            actor_token: actorToken,
            actor_token_type: TT.access,
          }),
          "invalid_request",
          new RegExp(
            `needs the permission user\\.impersonate in the subject's organization \\(role IAM_END_USER_IMPERSONATOR, or ORG_END_USER_IMPERSONATOR of organization ${org}\\)`,
          ),
        ),
      );
    }
    // The first organization's impersonator: not its IAM_OWNER (no control over a more privileged account).
    const orgSupportToken = await machineToken(orgSupport);
    await nothingStored(() =>
      refused(
        exchange({
          subject_token: admin,
          subject_token_type: TT.access,
          actor_token: orgSupportToken,
          actor_token_type: TT.access,
        }),
        "invalid_request",
        /no control over a more privileged account/,
      ),
    );
    // An impersonation token cannot act in turn.
    const impersonating = await as(support, admin);
    await refused(
      exchange({
        subject_token: robotB.pat,
        subject_token_type: TT.access,
        actor_token: impersonating.access_token,
        actor_token_type: TT.access,
      }),
      "invalid_request",
      /actor_token is an impersonation token itself/,
    );
  });

  it("an impersonation token: act in the JWT, the ID token and introspection, a user.impersonated event; it acts as the subject", async () => {
    const actorToken = await machineToken(support);
    const eventsBefore = await eventCount(platform);
    const tokens = await exchange({
      subject_token: (await adminTokens()).access_token,
      subject_token_type: TT.access,
      actor_token: actorToken,
      actor_token_type: TT.access,
      requested_token_type: TT.jwt,
    });
    const claims = decodeJwt(tokens.access_token);
    assert.equal(claims.sub, adminId);
    assert.deepEqual(claims.act, { sub: support.userId });
    assert.deepEqual(tokens.claims()!.act, { sub: support.userId }, "in the ID token");
    assert.equal(
      tokens.claims()!.sid,
      undefined,
      "the actor's authentication (client_credentials: no session)",
    );
    const info = await introspect(tokens.access_token);
    assert.deepEqual(info.act, { sub: support.userId });
    assert.equal(info.sub, adminId);

    assert.equal(await eventCount(platform), eventsBefore + 1);
    const [event] = await platform.db.query<Json>(
      "SELECT aggregate_type, aggregate_id, event_type, creator, resource_owner, payload FROM events ORDER BY position DESC LIMIT 1",
    );
    assert.equal(event.event_type, "user.impersonated");
    assert.equal(event.aggregate_id, adminId);
    assert.equal(event.creator, support.userId);
    assert.equal(event.resource_owner, orgId);
    const payload = typeof event.payload === "string" ? JSON.parse(event.payload) : event.payload;
    assert.deepEqual(payload, {
      actor_user_id: support.userId,
      act: { sub: support.userId },
      client_id: exchanger.clientId,
      token_id: claims.jti,
      issued_token_type: TT.jwt,
    });
    assert.ok(!JSON.stringify(event).includes(tokens.access_token.split(".")[2]), "no token in the event");

    // Userinfo and the management APIs see the subject (IAM_OWNER).
    assert.equal((await client.fetchUserInfo(ex, tokens.access_token, adminId)).sub, adminId);
    const features = (token: string) => rest("GET", "/settings/v3alpha/features", { token });
    assert.equal((await features(tokens.access_token)).status, 200);
  });

  it("lifetime: no exchanged token (access, ID, refresh) ends after the subject or actor token", async () => {
    const lifetimes = platform.oidc.lifetimes;
    const saved = lifetimes.accessToken;
    lifetimes.accessToken = 60;
    let actorToken: string;
    try {
      actorToken = await machineToken(support);
    } finally {
      lifetimes.accessToken = saved;
    }
    const actorEnd = (await introspect(actorToken, await machineConfig(support))).exp!;
    const tokens = await exchange({
      subject_token: (await adminTokens()).access_token,
      subject_token_type: TT.access,
      actor_token: actorToken,
      actor_token_type: TT.access,
      scope: `openid offline_access ${AUD_PLATFORM}`,
    });
    assert.ok(tokens.expires_in! <= 60, `expires_in ${tokens.expires_in}`);
    assert.ok((await introspect(tokens.access_token)).exp! <= actorEnd);
    assert.ok(tokens.claims()!.exp <= actorEnd, "the ID token too");
    const refreshed = await client.refreshTokenGrant(ex, tokens.refresh_token!);
    assert.ok(refreshed.expires_in! <= 60, "a refreshed token too");
    assert.deepEqual(
      (await introspect(refreshed.access_token)).act,
      { sub: support.userId },
      "and keeps act",
    );
  });

  it("revoking the actor or subject token, removing a PAT or deactivating the actor ends the exchanged tokens at once", async () => {
    const supportConfig = await machineConfig(support);
    const features = (token: string) => rest("GET", "/settings/v3alpha/features", { token });
    const impersonate = async (subject: string, actor: string, extra: Record<string, string> = {}) =>
      exchange({
        subject_token: subject,
        subject_token_type: TT.access,
        actor_token: actor,
        actor_token_type: TT.access,
        scope: `openid offline_access ${AUD_PLATFORM}`,
        ...extra,
      });
    const ended = async (tokens: client.TokenEndpointResponse) => {
      assert.deepEqual(await introspect(tokens.access_token), { active: false });
      await assert.rejects(client.fetchUserInfo(ex, tokens.access_token, adminId));
      assert.equal((await features(tokens.access_token)).status, 401);
      if (tokens.refresh_token) {
        await refused(
          client.refreshTokenGrant(ex, tokens.refresh_token),
          "invalid_grant",
          /exchanged from is revoked/,
        );
      }
    };

    // The actor's token: the impersonation token, and a token exchanged from it in turn.
    const actorToken = await machineToken(support);
    const tokens = await impersonate((await adminTokens()).access_token, actorToken);
    assert.equal((await features(tokens.access_token)).status, 200, "in use (and cached) by the APIs");
    const onward = await exchange({ subject_token: tokens.access_token, subject_token_type: TT.access });
    assert.deepEqual(
      (await introspect(onward.access_token)).act,
      { sub: support.userId },
      "act is inherited",
    );
    await client.tokenRevocation(supportConfig, actorToken);
    await ended(tokens);
    await ended(onward);

    // The subject's token.
    const web0 = await config(web);
    const subject = (await adminTokens()).access_token;
    const fromSubject = await impersonate(subject, await machineToken(support));
    await client.tokenRevocation(web0, subject);
    await ended(fromSubject);

    // A refresh-token family of the subject revoked (its access tokens with it).
    const family = await adminTokens();
    const fromFamily = await exchange({ subject_token: family.access_token, subject_token_type: TT.access });
    await client.tokenRevocation(web0, family.refresh_token!);
    assert.deepEqual(await introspect(fromFamily.access_token), { active: false });

    // A removed PAT.
    const pat = await created(`${USERS}/${robotB.userId}/pats`, {});
    // A PAT has no scope of its own: the actor's is the bound (client_credentials grants no offline_access).
    const fromPat = await impersonate(pat.token, await machineToken(support), {
      scope: `openid ${AUD_PLATFORM}`,
    });
    const languages = (token: string) => rest("GET", "/settings/v3alpha/languages", { token });
    assert.equal(
      (await languages(fromPat.access_token)).status,
      200,
      "a PAT's audience: the management APIs",
    );
    assert.equal((await rest("DELETE", `${USERS}/${robotB.userId}/pats/${pat.pat_id}`)).status, 200);
    assert.equal((await languages(fromPat.access_token)).status, 401);

    // A deactivated actor.
    const temp = await machineClient(platform, owner, "temp-support");
    await member(temp.userId, ["IAM_END_USER_IMPERSONATOR", "IAM_OWNER"]);
    const fromTemp = await impersonate((await adminTokens()).access_token, await machineToken(temp));
    assert.equal((await features(fromTemp.access_token)).status, 200);
    assert.equal((await rest("POST", `${USERS}/${temp.userId}/_deactivate`)).status, 200);
    assert.equal((await features(fromTemp.access_token)).status, 401, "at once, despite the cache");
    assert.deepEqual(await introspect(fromTemp.access_token), { active: false });
  });

  it("client authentication: basic, post, client_id only, private_key_jwt; without the grant unauthorized_client", async () => {
    const subject = (await adminTokens()).access_token;
    const params = { subject_token: subject, subject_token_type: TT.access };
    for (const c of [
      ex,
      await config(exchangerPost, client.ClientSecretPost(exchangerPost.secret!)),
      await config(
        exchangerKeyed,
        client.PrivateKeyJwt({ key: exchangerKeyed.key, kid: exchangerKeyed.kid }),
      ),
    ]) {
      const tokens = await exchange(params, c);
      assert.equal((await introspect(tokens.access_token)).client_id, c.clientMetadata().client_id);
    }
    // A public client (client_id only) exchanges the tokens issued to it.
    const own = (await adminTokens(exchangerPublic)).access_token;
    const publicTokens = await exchange(
      { subject_token: own, subject_token_type: TT.access },
      await config(exchangerPublic, client.None()),
    );
    assert.equal((await introspect(publicTokens.access_token)).client_id, exchangerPublic.clientId);
    await nothingStored(async () => {
      await refused(
        exchange(params, await config(web)),
        "unauthorized_client",
        /OIDC_GRANT_TYPE_TOKEN_EXCHANGE/,
      );
      await refused(exchange(params, await machineConfig(support)), "unauthorized_client");
      // 401 with a Basic challenge: openid-client reports the challenge; the body says invalid_client.
      const wrong = await config({ ...exchanger, secret: "wrong" });
      const error = await exchange(params, wrong).then(
        () => assert.fail("a wrong secret must not pass"),
        (e: client.WWWAuthenticateChallengeError) => e,
      );
      assert.equal(error.status, 401);
      assert.equal(error.cause[0].scheme, "basic");
      assert.equal(((await error.response.json()) as Json).error, "invalid_client");
    });
  });
});
