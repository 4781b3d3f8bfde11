import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { restClient, startPlatform, type TestPlatform } from "../../test/helpers.ts";
import {
  basic,
  client,
  discover,
  type MachineClient,
  machineClient,
  ownerToken,
  postForm,
} from "../../test/oidc.ts";
import { randomToken, sha256 } from "../crypto/tokens.ts";
import { createInstance, removeInstance } from "../domain/instance/commands.ts";

const AUD_PLATFORM = "urn:platform:iam:org:project:id:platform:aud";

/** The OIDC provider of every instance: its own issuer, keys and clients; tokens do not cross instances. */
describe("OIDC per instance", () => {
  let platform: TestPlatform;
  let first: string; // issuer of the first instance (localhost)
  let second: string; // issuer of the second instance (127.0.0.1)
  let a: MachineClient; // "svc" in the first instance
  let b: MachineClient; // "svc" in the second instance: same client ID, another client
  let aJwt: MachineClient;
  let secondId: string;

  const token = async (issuer: string, c: MachineClient, scope = `openid ${AUD_PLATFORM}`) => {
    const r = await postForm(
      `${issuer}/oauth/v2/token`,
      { grant_type: "client_credentials", scope },
      basic(c.clientId, c.clientSecret),
    );
    assert.equal(r.status, 200, r.text);
    return r.json.access_token as string;
  };

  before(async () => {
    platform = await startPlatform({ listen: true });
    first = platform.url;
    second = `http://127.0.0.1:${new URL(platform.url).port}`;
    const pat = randomToken();
    ({ instanceId: secondId } = await createInstance(platform.eventStore, "test", {
      name: "second",
      domains: ["127.0.0.1"],
      orgName: "Second",
      admin: { username: "admin", passwordHash: "x", passwordChangeRequired: false },
      machine: { username: "owner2", patHash: sha256(pat) },
    }));
    const owner = await ownerToken(platform);
    a = await machineClient(platform, owner, "svc");
    aJwt = await machineClient(platform, owner, "svc-jwt", { accessTokenType: "JWT" });
    b = await machineClient({ ...platform, url: second } as TestPlatform, pat, "svc");
    for (const [url, pat_, c] of [
      [first, owner, a],
      [second, pat, b],
    ] as const) {
      const rest = restClient({ url }, () => pat_);
      const m = await rest("POST", "/resources/v3alpha/memberships", {
        json: { user_id: c.userId, roles: ["IAM_OWNER"] },
      });
      assert.equal(m.status, 201, m.text);
    }
    assert.equal(a.clientId, b.clientId);
  });
  after(() => platform?.stop());

  it("each instance has its own issuer and keys", async () => {
    const one = await discover(first, a.clientId, client.ClientSecretBasic(a.clientSecret));
    const two = await discover(second, b.clientId, client.ClientSecretBasic(b.clientSecret));
    assert.equal(one.serverMetadata().issuer, first);
    assert.equal(two.serverMetadata().issuer, second);
    assert.equal(two.serverMetadata().token_endpoint, `${second}/oauth/v2/token`);
    const kids = async (issuer: string) =>
      ((await (await fetch(`${issuer}/oauth/v2/keys`)).json()) as { keys: Array<{ kid: string }> }).keys.map(
        (k) => k.kid,
      );
    const [k1, k2] = [await kids(first), await kids(second)];
    assert.equal(k1.length, 1);
    assert.equal(k2.length, 1);
    assert.notEqual(k1[0], k2[0]);
    // The second instance's client works there, with openid-client.
    const tokens = await client.clientCredentialsGrant(two, { scope: "openid profile" });
    assert.equal((await client.tokenIntrospection(two, tokens.access_token)).active, true);
  });

  it("clients are per instance: the first instance's credentials fail at the second", async () => {
    const r = await postForm(
      `${second}/oauth/v2/token`,
      { grant_type: "client_credentials" },
      basic(a.clientId, a.clientSecret),
    );
    assert.equal(r.status, 401);
    assert.equal(r.json.error, "invalid_client");
  });

  it("tokens of one instance are worthless at another: introspection, userinfo, revocation, the APIs", async () => {
    const opaque = await token(first, a);
    const jwt = await token(first, aJwt);
    for (const t of [opaque, jwt]) {
      const introspected = await postForm(
        `${second}/oauth/v2/introspect`,
        { token: t },
        basic(b.clientId, b.clientSecret),
      );
      assert.deepEqual(introspected.json, { active: false }, "same client ID, another instance");
      const info = await fetch(`${second}/oidc/v1/userinfo`, { headers: { authorization: `Bearer ${t}` } });
      assert.equal(info.status, 401);
      const api = await fetch(`${second}/settings/v3alpha/languages`, {
        headers: { authorization: `Bearer ${t}` },
      });
      assert.equal(api.status, 401);
    }
    // revoking at the other instance changes nothing
    await postForm(`${second}/oauth/v2/revoke`, { token: opaque }, basic(b.clientId, b.clientSecret));
    const still = await postForm(
      `${first}/oauth/v2/introspect`,
      { token: opaque },
      basic(a.clientId, a.clientSecret),
    );
    assert.equal(still.json.active, true);
    // and each works at home
    const home = await fetch(`${first}/settings/v3alpha/languages`, {
      headers: { authorization: `Bearer ${opaque}` },
    });
    assert.equal(home.status, 200);
    const there = await fetch(`${second}/settings/v3alpha/languages`, {
      headers: { authorization: `Bearer ${await token(second, b)}` },
    });
    assert.equal(there.status, 200);
  });

  it("removing an instance deletes its keys, tokens and codes", async () => {
    const t = await token(second, b);
    await fetch(`${second}/oauth/v2/keys`);
    const rows = async () => {
      let n = 0;
      for (const table of ["oidc_signing_keys", "oidc_access_tokens"]) {
        n += (await platform.db.query(`SELECT 1 FROM ${table} WHERE instance_id = $1`, [secondId])).length;
      }
      return n;
    };
    assert.ok((await rows()) >= 2);
    await removeInstance(platform.eventStore, { instanceId: secondId, creator: "test" });
    assert.equal(await rows(), 0);
    assert.equal(
      (await fetch(`${second}/oidc/v1/userinfo`, { headers: { authorization: `Bearer ${t}` } })).status,
      404,
    );
  });
});
