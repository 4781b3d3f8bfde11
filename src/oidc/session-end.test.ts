import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { decodeJwt } from "jose";
import { authorizePath, responseParams, signInThroughUi } from "../../test/authorize.ts";
import { type Json, restClient, startPlatform, type TestPlatform } from "../../test/helpers.ts";
import { addHuman, HttpBrowser } from "../../test/login.ts";
import { client, discover, ownerToken } from "../../test/oidc.ts";
import { newId } from "../id.ts";
import type { Queryable } from "../storage/database.ts";
import { parseHandle, type RefreshTokenRecord } from "./token-store.ts";

const PROJECTS = "/resources/v3alpha/projects";
const CALLBACK = "https://portal.example/callback";
const PASSWORD = "Secret-Passw0rd!";
const AUD_PLATFORM = "urn:platform:iam:org:project:id:platform:aud";
const SCOPE = `openid profile offline_access ${AUD_PLATFORM}`;

/** An authorization request's answer, waiting to be redeemed. */
interface PendingCode {
  url: URL;
  verifier: string;
  state: string;
  nonce: string;
}

/**
 * However a browser session ends — the login UI's sign-out, DELETE of the session through the sessions API,
 * the removal of its user or of the user's organization — the access and refresh tokens issued from it stop
 * being credentials everywhere (introspection, userinfo, the refresh grant, the management APIs, whose cache
 * drops them at once) and its authorization codes not yet redeemed are void. A deactivated or locked user's
 * tokens are refused while the user is not active.
 */
describe("OIDC: the end of a browser session ends its tokens", () => {
  let platform: TestPlatform;
  let owner: string;
  let config: client.Configuration; // confidential web app: code flow + refresh, opaque access tokens
  let configJwt: client.Configuration; // the same with JWT access tokens
  let clientIds: { opaque: string; jwt: string };

  const rest = restClient(
    () => platform,
    () => owner,
  );
  const created = async (path: string, json: unknown): Promise<Json> => {
    const r = await rest("POST", path, { json });
    assert.equal(r.status, 201, r.text);
    return r.json;
  };
  const managementApi = (token: string) => rest("GET", "/settings/v3alpha/features", { token });
  const userinfo = (token: string) =>
    fetch(`${platform.url}/oidc/v1/userinfo`, { headers: { authorization: `Bearer ${token}` } });

  /** A human with IAM_OWNER (so that her access tokens are management tokens), in `orgId` if given. */
  const addOwner = async (username: string, orgId?: string) => {
    const userId = await addHuman(platform, username, PASSWORD, { orgId });
    await created("/resources/v3alpha/memberships", { user_id: userId, roles: ["IAM_OWNER"] });
    return userId;
  };

  /** An authorization request of the browser for the app; answers the redirect to the callback. */
  const authorize = async (browser: HttpBrowser, app: client.Configuration, username?: string) => {
    const pending = {
      verifier: client.randomPKCECodeVerifier(),
      state: client.randomState(),
      nonce: client.randomNonce(),
    };
    const path = authorizePath({
      client_id: app.clientMetadata().client_id,
      redirect_uri: CALLBACK,
      response_type: "code",
      scope: SCOPE,
      state: pending.state,
      nonce: pending.nonce,
      code_challenge: await client.calculatePKCECodeChallenge(pending.verifier),
      code_challenge_method: "S256",
    });
    // The first time through the login UI; then single sign-on answers at once with a code.
    const answer = username
      ? await signInThroughUi(browser, path, username, PASSWORD)
      : await browser.follow(path);
    return { ...pending, url: responseParams(answer).url } satisfies PendingCode;
  };
  const redeem = (app: client.Configuration, code: PendingCode) =>
    client.authorizationCodeGrant(app, code.url, {
      pkceCodeVerifier: code.verifier,
      expectedState: code.state,
      expectedNonce: code.nonce,
      idTokenExpected: true,
    });

  /**
   * `username` signs in through the login UI for the app: her tokens (access, refresh, ID), the session's
   * ID, and a second code of the same session (single sign-on) not yet redeemed. Her tokens work, and the
   * management API has verified (and cached) her access token.
   */
  const signIn = async (username: string, app = config) => {
    const browser = new HttpBrowser(platform.url);
    const tokens = await redeem(app, await authorize(browser, app, username));
    const pending = await authorize(browser, app);
    const sessionId = String(decodeJwt(tokens.id_token!).sid);
    assert.equal((await managementApi(tokens.access_token)).status, 200, "a management token");
    assert.equal((await client.tokenIntrospection(app, tokens.access_token)).active, true);
    assert.equal((await userinfo(tokens.access_token)).status, 200);
    assert.ok(tokens.refresh_token, "offline_access: a refresh token");
    return { browser, tokens, pending, sessionId };
  };

  /** Every token of the session is refused, and so is its unredeemed code. */
  const assertEnded = async (
    app: client.Configuration,
    session: Awaited<ReturnType<typeof signIn>>,
    how: string,
  ) => {
    const { tokens, pending } = session;
    assert.equal(
      (await managementApi(tokens.access_token)).status,
      401,
      `${how}: the management API refuses the access token at once, despite its cache`,
    );
    assert.deepEqual(
      await client.tokenIntrospection(app, tokens.access_token),
      { active: false },
      `${how}: introspection`,
    );
    const info = await userinfo(tokens.access_token);
    assert.equal(info.status, 401, `${how}: userinfo`);
    assert.match(info.headers.get("www-authenticate") ?? "", /^Bearer .*error="invalid_token"/);
    await assert.rejects(
      client.refreshTokenGrant(app, tokens.refresh_token!),
      (e: client.ResponseBodyError) => e.error === "invalid_grant",
      `${how}: the refresh grant`,
    );
    await assert.rejects(
      redeem(app, pending),
      (e: client.ResponseBodyError) => e.error === "invalid_grant",
      `${how}: the code issued from the session but not redeemed`,
    );
  };

  /**
   * The session's access and refresh tokens not revoked in the database (a removed user's tokens are refused
   * at use time anyway: this shows they are revoked too, with the removal).
   */
  const unrevoked = (sessionId: string) =>
    platform.db.query(
      `SELECT id FROM oidc_access_tokens WHERE session_id = $1 AND revoked_at IS NULL
       UNION ALL SELECT id FROM oidc_refresh_tokens WHERE session_id = $1 AND revoked_at IS NULL`,
      [sessionId],
    );

  before(async () => {
    platform = await startPlatform({ listen: true });
    owner = await ownerToken(platform);
    const projectId = (await created(PROJECTS, { name: "Portal" })).details.id;
    const app = async (name: string, oidc: Json) => {
      const a = await created(`${PROJECTS}/${projectId}/apps`, {
        name,
        oidc: {
          redirect_uris: [CALLBACK],
          response_types: ["OIDC_RESPONSE_TYPE_CODE"],
          grant_types: ["OIDC_GRANT_TYPE_AUTHORIZATION_CODE", "OIDC_GRANT_TYPE_REFRESH_TOKEN"],
          app_type: "OIDC_APP_TYPE_WEB",
          auth_method: "OIDC_AUTH_METHOD_TYPE_BASIC",
          ...oidc,
        },
      });
      return {
        clientId: a.client_id as string,
        config: await discover(platform.url, a.client_id, client.ClientSecretBasic(a.client_secret)),
      };
    };
    const opaque = await app("portal", {});
    const jwt = await app("portal-jwt", { access_token_type: "OIDC_TOKEN_TYPE_JWT" });
    config = opaque.config;
    configJwt = jwt.config;
    clientIds = { opaque: opaque.clientId, jwt: jwt.clientId };
  });
  after(() => platform?.stop());

  it("the login UI's sign-out button (POST /ui/login/signout)", async () => {
    await addOwner("anna");
    for (const app of [config, configJwt]) {
      const session = await signIn("anna", app);
      const account = await session.browser.follow("/");
      assert.equal(account.status, 200, account.text.slice(0, 200));
      const signedOut = await session.browser.submit(account, "/ui/login/signout", {});
      assert.match(signedOut.text, /You are signed out/);
      await assertEnded(app, session, `sign-out (${app === config ? clientIds.opaque : clientIds.jwt})`);
    }
  });

  it("DELETE /resources/v3alpha/sessions/{id}; the browser's other session keeps its tokens", async () => {
    await addOwner("bruno");
    await addOwner("bianca");
    for (const app of [config, configJwt]) {
      const session = await signIn("bruno", app);
      const other = await signIn("bianca", app);
      const ended = await rest("DELETE", `/resources/v3alpha/sessions/${session.sessionId}`);
      assert.equal(ended.status, 200, ended.text);
      await assertEnded(app, session, "DELETE /sessions/{id}");

      // Another session's tokens are untouched.
      assert.equal((await managementApi(other.tokens.access_token)).status, 200);
      assert.equal((await client.tokenIntrospection(app, other.tokens.access_token)).active, true);
      const refreshed = await client.refreshTokenGrant(app, other.tokens.refresh_token!);
      assert.equal((await client.tokenIntrospection(app, refreshed.access_token)).active, true);
      await redeem(app, other.pending);
    }
  });

  it("the user's removal (DELETE /resources/v3alpha/users/{id}) revokes the tokens of her sessions", async () => {
    for (const [name, app] of [
      ["carla", config],
      ["chris", configJwt],
    ] as const) {
      const userId = await addOwner(name);
      const session = await signIn(name, app);
      const removed = await rest("DELETE", `/resources/v3alpha/users/${userId}`);
      assert.equal(removed.status, 200, removed.text);
      await assertEnded(app, session, "user removed");
      assert.deepEqual(await unrevoked(session.sessionId), [], "revoked, not only refused while she is gone");
    }
  });

  it("the removal of the user's organization", async () => {
    const orgId = (await created("/resources/v3alpha/organizations", { name: "Doomed" })).details.id;
    await addOwner("dora", orgId);
    const session = await signIn("dora");
    const removed = await rest("DELETE", `/resources/v3alpha/organizations/${orgId}`);
    assert.equal(removed.status, 200, removed.text);
    await assertEnded(config, session, "organization removed");
    assert.deepEqual(await unrevoked(session.sessionId), [], "revoked, not only refused while she is gone");
  });

  it("a deactivated or locked user's tokens are refused while she is not active", async () => {
    const userId = await addOwner("erin");
    for (const [action, undo] of [
      ["_deactivate", "_reactivate"],
      ["_lock", "_unlock"],
    ]) {
      const session = await signIn("erin");
      const changed = await rest("POST", `/resources/v3alpha/users/${userId}/${action}`, { json: {} });
      assert.equal(changed.status, 200, changed.text);
      await assertEnded(config, session, action);
      const back = await rest("POST", `/resources/v3alpha/users/${userId}/${undo}`, { json: {} });
      assert.equal(back.status, 200, back.text);
    }
  });

  /**
   * Writes what a token grant writes for the session in a transaction kept open (its rows locked) until the
   * end of the session, run meanwhile, waits for it; then commits. Answers the new tokens' revocation times.
   */
  const whileSessionEnds = async (
    sessionId: string,
    grant: (tx: Queryable, issue: (refresh: RefreshTokenRecord) => Promise<void>) => Promise<void>,
  ) => {
    const tokens = platform.oidc.tokens;
    const [refreshId, accessId] = [newId(), newId()];
    const issue = async (refresh: RefreshTokenRecord, tx: Queryable) => {
      await tokens.insertRefreshToken({ ...refresh, id: refreshId, issuedAt: new Date() }, tx);
      await tokens.insertAccessToken(
        {
          ...refresh,
          id: accessId,
          jwt: false,
          secretHash: "x",
          issuedAt: new Date(),
          expiresAt: new Date(Date.now() + 3_600_000),
        },
        tx,
      );
    };
    let commit!: () => void;
    const committing = new Promise<void>((resolve) => (commit = resolve));
    let wrote!: () => void;
    const written = new Promise<void>((resolve) => (wrote = resolve));
    const grantTx = platform.db.transaction(async (tx) => {
      await grant(tx, (refresh) => issue(refresh, tx));
      wrote();
      await committing;
    });
    await written;
    const ending = rest("DELETE", `/resources/v3alpha/sessions/${sessionId}`);
    // The end of the session reaches a row the grant locked and waits for it.
    for (let i = 0; ; i++) {
      const [waiting] = await platform.db.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity
         WHERE datname = current_database() AND wait_event_type = 'Lock'`,
      );
      if (waiting.n > 0) break;
      assert.ok(i < 300, "the end of the session waits for the grant's transaction");
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    commit();
    await grantTx;
    assert.equal((await ending).status, 200);
    const revokedAt = async (table: string, id: string) =>
      (await platform.db.query(`SELECT revoked_at FROM ${table} WHERE id = $1`, [id]))[0].revoked_at;
    return {
      access: await revokedAt("oidc_access_tokens", accessId),
      refresh: await revokedAt("oidc_refresh_tokens", refreshId),
    };
  };

  it("tokens of a refresh or a code redemption committing while the session ends are revoked too (PostgreSQL)", async (t) => {
    // PGlite runs one transaction at a time: nothing can interleave there.
    if (platform.db.kind !== "postgres") return t.skip("PostgreSQL only");
    await addOwner("fred");
    const instanceId = platform.bootstrapResult!.instanceId;
    const tokens = platform.oidc.tokens;

    // A rotation in flight, as the refresh grant makes it: the old token marked used, a new refresh and
    // access token of the same session.
    const refreshing = await signIn("fred");
    const old = (await tokens.findRefreshToken(
      instanceId,
      parseHandle(refreshing.tokens.refresh_token!)!.id,
    ))!;
    const rotated = await whileSessionEnds(refreshing.sessionId, async (tx, issue) => {
      assert.ok(await tokens.markRotated(tx, instanceId, old.id));
      await issue(old);
    });
    assert.ok(rotated.access, "the rotation's access token is revoked");
    assert.ok(rotated.refresh, "the rotation's refresh token is revoked");

    // A redemption in flight: the pending code marked redeemed, its tokens issued.
    const redeeming = await signIn("fred");
    const codeId = parseHandle(redeeming.pending.url.searchParams.get("code")!)!.id;
    const template = (await tokens.findRefreshToken(
      instanceId,
      parseHandle(redeeming.tokens.refresh_token!)!.id,
    ))!;
    const redeemed = await whileSessionEnds(redeeming.sessionId, async (tx, issue) => {
      assert.ok(await tokens.markRedeemed(tx, instanceId, codeId));
      await issue({ ...template, familyId: codeId });
    });
    assert.ok(redeemed.access, "the redemption's access token is revoked");
    assert.ok(redeemed.refresh, "the redemption's refresh token is revoked");
  });
});
