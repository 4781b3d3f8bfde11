/**
 * The console's OIDC app (src/domain/instance/console.ts): every instance gets a public "Console" app
 * (PKCE, no secret) in its management project at setup, and at start an instance without one (made before
 * the console existed, or whose app was removed) gets it, once. Seen through the public API, config.json
 * and the authorization endpoint.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { sha256 } from "../../src/crypto/tokens.ts";
import { createInstance } from "../../src/domain/instance/commands.ts";
import { authorizePath } from "../../test/authorize.ts";
import {
  eventCount,
  freshBackend,
  type Json,
  type RestCall,
  restClient,
  startPlatform,
  type TestBackend,
  type TestPlatform,
} from "../../test/helpers.ts";
import { ownerToken } from "../../test/oidc.ts";
import { freePort } from "../../test/process.ts";

let backend: TestBackend;
let port: number;
let platform: TestPlatform | undefined;
let rest: RestCall;
const OLD_HOST = "127.0.0.5";
const oldPat = "old-instance-owner-token-0123456789";

async function start(): Promise<TestPlatform> {
  platform = await startPlatform({
    listen: true,
    backend,
    env: { PLATFORM_PORT: String(port), PLATFORM_EXTERNAL_PORT: String(port) },
  });
  return platform;
}

async function restart(): Promise<TestPlatform> {
  await platform?.close();
  platform = undefined;
  return start();
}

before(async () => {
  [backend, port] = await Promise.all([freshBackend(), freePort()]);
  const first = await start();
  const owner = await ownerToken(first);
  rest = restClient(
    () => platform!,
    () => owner,
  );
});

after(async () => {
  await platform?.close();
  await backend?.cleanup();
});

/** config.json of the instance at `host` (undefined: the first instance). */
async function consoleConfig(host?: string) {
  const reply = await rest("GET", "/ui/console/config.json", {
    host: host ? `${host}:${port}` : undefined,
    raw: true,
  });
  return reply;
}

async function consoleApps(options: { host?: string; token?: string } = {}): Promise<Json[]> {
  const host = options.host ? `${options.host}:${port}` : undefined;
  const projects = await rest("POST", "/resources/v3alpha/projects/_search", {
    json: [],
    host,
    token: options.token,
  });
  assert.equal(projects.status, 200, projects.text);
  const management = projects.json.result.find((p: Json) => p.management_project === true);
  assert.ok(management, projects.text);
  const apps = await rest("POST", `/resources/v3alpha/projects/${management.details.id}/apps/_search`, {
    json: [],
    host,
    token: options.token,
  });
  assert.equal(apps.status, 200, apps.text);
  return apps.json.result.map((app: Json) => ({ ...app, projectId: management.details.id }));
}

describe("the console's app", () => {
  it("is made at setup: public, PKCE, exact redirect URIs for the external URL", async () => {
    const config = await consoleConfig();
    assert.equal(config.status, 200, config.text);
    const clientId = JSON.parse(config.text).client_id;
    const apps = await consoleApps();
    assert.equal(apps.length, 1, JSON.stringify(apps));
    const [app] = apps;
    assert.equal(app.app.name, "Console");
    assert.equal(app.client_id, clientId);
    assert.equal(app.has_client_secret, false);
    const { oidc } = app.app;
    assert.deepEqual(oidc.redirect_uris, [`http://localhost:${port}/ui/console/callback`]);
    assert.deepEqual(oidc.post_logout_redirect_uris, [`http://localhost:${port}/ui/console/`]);
    assert.equal(oidc.auth_method, "OIDC_AUTH_METHOD_TYPE_NONE");
    assert.deepEqual(oidc.grant_types, [
      "OIDC_GRANT_TYPE_AUTHORIZATION_CODE",
      "OIDC_GRANT_TYPE_REFRESH_TOKEN",
    ]);
    assert.equal(oidc.app_type, "OIDC_APP_TYPE_USER_AGENT");
    assert.equal(oidc.dev_mode, false, "a loopback URL needs no dev mode");

    // the authorization endpoint takes it with PKCE and sends the browser to the login UI
    const authorize = (redirectUri: string) =>
      fetch(
        `${platform!.url}${authorizePath({
          client_id: clientId,
          redirect_uri: redirectUri,
          response_type: "code",
          scope: "openid offline_access urn:platform:iam:org:project:id:platform:aud",
          code_challenge: "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
          code_challenge_method: "S256",
        })}`,
        { redirect: "manual" },
      );
    const good = await authorize(`http://localhost:${port}/ui/console/callback`);
    assert.equal(good.status, 302);
    assert.match(good.headers.get("location") ?? "", /\/ui\/login/);
    const other = await authorize(`http://localhost:${port}/ui/console/other`);
    assert.notEqual(other.status, 302, "the redirect URI is exact");
  });

  it("is added at start to an instance made without it, once, and made again when removed", async () => {
    // an instance as an earlier release made it: no console app
    await createInstance(platform!.eventStore, "test", {
      name: "Old",
      domains: [OLD_HOST],
      orgName: "Old",
      admin: { username: "old-admin", passwordHash: "x", passwordChangeRequired: false },
      machine: { username: "old-owner", patHash: sha256(oldPat) },
    });
    assert.equal((await consoleConfig(OLD_HOST)).status, 503);
    assert.equal((await consoleApps({ host: OLD_HOST, token: oldPat })).length, 0);

    await restart();
    const config = await consoleConfig(OLD_HOST);
    assert.equal(config.status, 200, config.text);
    const { client_id: clientId, issuer } = JSON.parse(config.text);
    assert.equal(issuer, `http://${OLD_HOST}:${port}`);
    const apps = await consoleApps({ host: OLD_HOST, token: oldPat });
    assert.equal(apps.length, 1);
    assert.equal(apps[0].app.name, "Console");
    assert.deepEqual(apps[0].app.oidc.redirect_uris, [`http://${OLD_HOST}:${port}/ui/console/callback`]);
    assert.equal(apps[0].client_id, clientId);

    // a further start adds nothing
    const events = await eventCount(platform!);
    await restart();
    assert.equal(await eventCount(platform!), events);
    assert.equal(JSON.parse((await consoleConfig(OLD_HOST)).text).client_id, clientId);

    // removed through the API: the next start makes a new one
    const removed = await rest(
      "DELETE",
      `/resources/v3alpha/projects/${apps[0].projectId}/apps/${apps[0].details.id}`,
      {
        host: `${OLD_HOST}:${port}`,
        token: oldPat,
      },
    );
    assert.equal(removed.status, 200, removed.text);
    assert.equal((await consoleConfig(OLD_HOST)).status, 503);
    await restart();
    const again = JSON.parse((await consoleConfig(OLD_HOST)).text).client_id;
    assert.ok(again && again !== clientId);
  });
});
