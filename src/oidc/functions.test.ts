import assert from "node:assert/strict";
import { after, before, beforeEach, describe, it } from "node:test";
import { decodeJwt } from "jose";
import { type RestCall, startPlatform, type TestPlatform } from "../../test/helpers.ts";
import {
  assertOAuthError,
  basic,
  client,
  discover,
  fixtureClient,
  machineClient,
  ownerToken,
  postForm,
  registerFixtures,
} from "../../test/oidc.ts";
import { sha256 } from "../crypto/tokens.ts";
import { actionsClient, TestTarget } from "../execution/testing.ts";

const SECRET = "web-app-secret-0123456789";
const REDIRECT = "https://app.example/callback";
const LOG_USERINFO = "urn:platform:iam:action:preuserinfo:log";
const LOG_ACCESS_TOKEN = "urn:platform:iam:action:preaccesstoken:log";

/** The function conditions through the real endpoints: userinfo, introspection, ID tokens, JWT access tokens. */
describe("OIDC: preuserinfo and preaccesstoken", () => {
  let platform: TestPlatform;
  let target: TestTarget;
  let rest: RestCall;
  let actions: ReturnType<typeof actionsClient>;
  let owner: string;
  let names = 0;
  const name = (prefix: string) => `${prefix}-${++names}`;

  before(async () => {
    platform = await startPlatform({ listen: true });
    target = await TestTarget.start();
    owner = await ownerToken(platform);
    actions = actionsClient(platform, owner);
    rest = actions.rest;
    registerFixtures(platform, [
      fixtureClient(platform, { clientId: "web-app", secretHash: sha256(SECRET) }),
      fixtureClient(platform, {
        clientId: "web-app-full",
        secretHash: sha256(SECRET),
        idTokenUserinfoAssertion: true,
      }),
    ]);
  });
  after(async () => {
    await platform.stop();
    await target.close();
  });
  beforeEach(async () => {
    for (const fn of ["preuserinfo", "preaccesstoken"])
      await rest("DELETE", `/resources/v3alpha/executions/function.${fn}`);
  });

  /** A function target answering `answer`; returns its path. */
  const functionTarget = async (fn: string, answer: object, options: { interrupt?: boolean } = {}) => {
    const path = `/${name(fn)}`;
    target.on(path, () => ({ body: answer }));
    const { id } = await actions.target(name(fn), target.url(path), {
      type: "rest_request_response",
      interrupt: options.interrupt,
    });
    await actions.execution({ function: fn }, [id]);
    return { path, id };
  };

  const tokenFor = async (username: string, accessTokenType: "BEARER" | "JWT" = "BEARER") => {
    const machine = await machineClient(platform, owner, username, { accessTokenType });
    const config = await discover(
      platform.url,
      machine.clientId,
      client.ClientSecretBasic(machine.clientSecret),
    );
    const tokens = await client.clientCredentialsGrant(config, { scope: "openid profile" });
    return { machine, config, token: tokens.access_token };
  };

  it("preuserinfo appends claims to userinfo and introspection, refuses reserved ones, stores metadata", async () => {
    const { path } = await functionTarget("preuserinfo", {
      append_claims: [
        { key: "department", value: "R&D" },
        { key: "sub", value: "someone-else" },
        { key: "urn:platform:iam:org:id", value: "other-org" },
      ],
      set_user_metadata: [{ key: "seen", value: Buffer.from("yes").toString("base64") }],
      append_log_claims: ["checked by HR"],
    });
    const { machine, config, token } = await tokenFor("svc-userinfo");

    const info = await client.fetchUserInfo(config, token, machine.userId);
    assert.equal(info.department, "R&D");
    assert.equal(info.sub, machine.userId, "a reserved claim is refused");
    assert.equal(info["urn:platform:iam:org:id"], undefined);
    const log = info[LOG_USERINFO] as string[];
    assert.equal(log.length, 3, JSON.stringify(log));
    assert.match(log[0], /^target \S+: claim "sub" is a reserved claim$/);
    assert.match(log[1], /^target \S+: claim "urn:platform:iam:org:id" is reserved/);
    assert.equal(log[2], "checked by HR");

    const [call] = target.callsTo(path);
    assert.equal(call.json.function, "preuserinfo");
    assert.equal(call.json.user.id, machine.userId);
    assert.equal(call.json.user.username, "svc-userinfo");
    assert.equal(call.json.client.client_id, machine.clientId);
    assert.equal(call.json.claims.sub, machine.userId);

    const introspected = await client.tokenIntrospection(config, token);
    assert.equal(introspected.active, true);
    assert.equal(introspected.department, "R&D");
    assert.equal(introspected.sub, machine.userId);
    assert.equal(introspected.client_id, machine.clientId);

    const user = await rest("GET", `/resources/v3alpha/users/${machine.userId}`);
    assert.deepEqual(user.json.user.metadata, { seen: Buffer.from("yes").toString("base64") });
  });

  it("preaccesstoken appends claims to a JWT access token; reserved claims are refused", async () => {
    const { path } = await functionTarget("preaccesstoken", {
      append_claims: [
        { key: "tier", value: "gold" },
        { key: "aud", value: "evil" },
        { key: "exp", value: 9999999999 },
      ],
    });
    const { machine, token } = await tokenFor("svc-jwt", "JWT");
    const payload = decodeJwt(token);
    assert.equal(payload.tier, "gold");
    assert.ok(Array.isArray(payload.aud) && payload.aud.includes(machine.clientId), "aud kept");
    assert.ok(payload.exp! < 9999999999, "exp kept");
    assert.deepEqual(
      (payload[LOG_ACCESS_TOKEN] as string[]).map((line) => line.replace(/^target \S+: /, "")),
      ['claim "aud" is a reserved claim', 'claim "exp" is a reserved claim'],
    );
    // userinfo is preuserinfo's business, not preaccesstoken's
    const info = await fetch(`${platform.url}/oidc/v1/userinfo`, {
      headers: { authorization: `Bearer ${token}` },
    });
    assert.equal(((await info.json()) as { tier?: string }).tier, undefined);
    // an opaque access token carries no claims: nothing is called for it
    const calls = target.callsTo(path).length;
    await tokenFor("svc-opaque");
    assert.equal(target.callsTo(path).length, calls);
  });

  it("an ID token with the userinfo claims gets preuserinfo's claims; one without them does not", async () => {
    await functionTarget("preuserinfo", { append_claims: [{ key: "department", value: "R&D" }] });
    const redeem = async (clientId: string) => {
      const config = await discover(platform.url, clientId, client.ClientSecretBasic(SECRET));
      const verifier = client.randomPKCECodeVerifier();
      const nonce = client.randomNonce();
      const code = await platform.oidc.issueAuthorizationCode({
        instanceId: platform.bootstrapResult!.instanceId,
        issuer: platform.url,
        clientId,
        redirectUri: REDIRECT,
        scope: ["openid", "profile"],
        nonce,
        codeChallenge: await client.calculatePKCECodeChallenge(verifier),
        codeChallengeMethod: "S256",
        userId: platform.bootstrapResult!.adminUserId,
        sessionId: "session-1",
        authTime: new Date(Date.now() - 5000),
        amr: ["pwd"],
      });
      const url = new URL(
        `${REDIRECT}?code=${encodeURIComponent(code)}&iss=${encodeURIComponent(platform.url)}`,
      );
      const tokens = await client.authorizationCodeGrant(config, url, {
        pkceCodeVerifier: verifier,
        expectedNonce: nonce,
        idTokenExpected: true,
      });
      return tokens.claims()!;
    };
    const full = await redeem("web-app-full");
    assert.equal(full.department, "R&D");
    assert.equal(full.sub, platform.bootstrapResult!.adminUserId);
    const plain = await redeem("web-app");
    assert.equal(plain.department, undefined, "its userinfo claims come from userinfo");
  });

  it("an interrupting target fails the token request: server_error, or temporarily_unavailable on a timeout", async () => {
    const path = `/${name("broken")}`;
    target.on(path, () => ({ status: 500 }));
    const { id } = await actions.target("broken-claims", target.url(path), { type: "rest_request_response" });
    await actions.execution({ function: "preaccesstoken" }, [id]);
    const machine = await machineClient(platform, owner, "svc-broken", { accessTokenType: "JWT" });
    const tokenUrl = `${platform.url}/oauth/v2/token`;
    const grant = { grant_type: "client_credentials", scope: "openid" };
    const failed = await postForm(tokenUrl, grant, basic(machine.clientId, machine.clientSecret));
    assertOAuthError(
      failed,
      500,
      "server_error",
      new RegExp(`^target broken-claims \\(${id}\\) answered HTTP 500$`),
    );

    const slow = `/${name("slow")}`;
    target.on(slow, () => ({ delayMs: 2500 }));
    const { id: slowId } = await actions.target("slow-claims", target.url(slow), {
      type: "rest_request_response",
      timeout: "1s",
    });
    await actions.execution({ function: "preaccesstoken" }, [slowId]);
    const timedOut = await postForm(tokenUrl, grant, basic(machine.clientId, machine.clientSecret));
    assertOAuthError(timedOut, 503, "temporarily_unavailable", /timed out after 1s$/);
  });
});
