import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { exportSPKI, generateKeyPair, type JWTPayload, SignJWT } from "jose";
import { restClient, startPlatform, type TestPlatform } from "../../test/helpers.ts";

const INSTANCES = "/resources/v3alpha/instances";

/** System users (PLATFORM_SYSTEM_API_USERS) call with JWTs they sign: which ones are accepted. */
describe("system users' JWTs", () => {
  let platform: TestPlatform;
  let privateKey: CryptoKey;
  let external: string;
  let tenantHost: string;

  /** A system user's JWT with these claims (iss = sub = ops-robot unless overridden). */
  const sign = (claims: JWTPayload) =>
    new SignJWT({ iss: "ops-robot", sub: "ops-robot", ...claims })
      .setProtectedHeader({ alg: "RS256" })
      .sign(privateKey);
  const now = () => Math.floor(Date.now() / 1000);
  const rest = restClient(() => platform);
  /** A call in the tenant instance (Host: tenant.localhost) with that token. */
  const atTenant = (token: string) =>
    rest("GET", "/resources/v3alpha/organizations/_instance_default", { token, host: tenantHost });

  before(async () => {
    const keys = await generateKeyPair("RS256");
    privateKey = keys.privateKey as CryptoKey;
    platform = await startPlatform({
      listen: true,
      env: { PLATFORM_SYSTEM_API_USERS: JSON.stringify({ "ops-robot": await exportSPKI(keys.publicKey) }) },
    });
    // The external URL: PLATFORM_EXTERNAL_DOMAIN (localhost) on the port the server listens on.
    external = platform.url;
    tenantHost = `tenant.localhost:${new URL(platform.url).port}`;
    const created = await rest("POST", INSTANCES, {
      token: await sign({ aud: external, iat: now(), exp: now() + 300 }),
      json: {
        name: "Tenant",
        domains: ["tenant.localhost"],
        first_org_name: "Tenant Org",
        admin: { username: "tenant-admin", password: "Tenant-Password-1!" },
      },
    });
    assert.equal(created.status, 201, created.text);
  });
  after(() => platform?.stop());

  it("the external URL is the audience at every instance; the Host the request names is not", async () => {
    const ok = await atTenant(await sign({ aud: external, iat: now(), exp: now() + 300 }));
    assert.equal(ok.status, 200, ok.text);
    assert.equal(ok.json.organization.organization.name, "Tenant Org");
    // Signed for the tenant's own address (its Host): not the external URL, refused.
    const byHost = await atTenant(await sign({ aud: `http://${tenantHost}`, iat: now(), exp: now() + 300 }));
    assert.equal(byHost.status, 401, byHost.text);
    assert.match(byHost.json.message, /aud/);
  });

  it("exp and iat are required, exp at most an hour after iat", async () => {
    const cases: Array<[string, JWTPayload, RegExp]> = [
      ["no exp", { aud: external, iat: now() }, /exp/],
      ["no iat", { aud: external, exp: now() + 300 }, /iat/],
      ["exp 2 h after iat", { aud: external, iat: now(), exp: now() + 7200 }, /at most 3600 seconds/],
      ["issued 2 h ago, still unexpired", { aud: external, iat: now() - 7200, exp: now() + 300 }, /iat/],
      ["issued in the future", { aud: external, iat: now() + 600, exp: now() + 900 }, /iat/],
      ["expired", { aud: external, iat: now() - 600, exp: now() - 60 }, /exp/],
    ];
    for (const [why, claims, message] of cases) {
      const reply = await atTenant(await sign(claims));
      assert.equal(reply.status, 401, `${why}: ${reply.text}`);
      assert.match(reply.json.message, message, why);
    }
    // An hour exactly is accepted.
    const hour = await atTenant(await sign({ aud: external, iat: now(), exp: now() + 3600 }));
    assert.equal(hour.status, 200, hour.text);
  });
});
