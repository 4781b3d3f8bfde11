import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { exportSPKI, generateKeyPair, SignJWT } from "jose";
import {
  addMachineUser,
  addOrg,
  eventCount,
  startPlatform,
  type TestPlatform,
} from "../../../test/helpers.ts";

describe("feature settings", () => {
  let platform: TestPlatform;
  let owner: string;
  let viewer: string;
  let nobody: string;
  let systemToken: string;
  let instanceId: string;
  let privateKey: CryptoKey;

  const call = async (
    method: "GET" | "PATCH",
    token: string,
    options: { json?: unknown; query?: string } = {},
  ) => {
    const response = await fetch(`${platform.url}/settings/v3alpha/features${options.query ?? ""}`, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        ...(options.json !== undefined ? { "content-type": "application/json" } : {}),
      },
      body: options.json !== undefined ? JSON.stringify(options.json) : undefined,
    });
    // biome-ignore lint/suspicious/noExplicitAny: JSON bodies of the tests
    return { status: response.status, body: (await response.json()) as Record<string, any> };
  };

  before(async () => {
    const keys = await generateKeyPair("RS256");
    privateKey = keys.privateKey as CryptoKey;
    const pem = await exportSPKI(keys.publicKey);
    platform = await startPlatform({
      listen: true,
      env: { PLATFORM_SYSTEM_API_USERS: JSON.stringify({ "ops-robot": pem }) },
    });
    instanceId = platform.bootstrapResult!.instanceId;
    ({ token: owner } = await addMachineUser(platform, {
      username: "owner",
      membership: { contextType: "instance", roles: ["IAM_OWNER"] },
    }));
    ({ token: viewer } = await addMachineUser(platform, {
      username: "viewer",
      membership: { contextType: "instance", roles: ["IAM_OWNER_VIEWER"] },
    }));
    ({ token: nobody } = await addMachineUser(platform, { username: "nobody" }));
    systemToken = await new SignJWT({})
      .setProtectedHeader({ alg: "RS256" })
      .setIssuer("ops-robot")
      .setSubject("ops-robot")
      .setAudience(platform.url)
      .setIssuedAt()
      .setExpirationTime("5m")
      .sign(privateKey);
  });
  after(() => platform.stop());

  it("a new instance has every flag on except token_exchange, inherited from the system", async () => {
    const { status, body } = await call("GET", owner);
    assert.equal(status, 200);
    const system = { type: "OWNER_TYPE_SYSTEM", id: "system" };
    assert.deepEqual(body.settings, {
      multitenancy_resources_api: { value: true, owner: system },
      multitenancy_settings: { value: true, owner: system },
      actions: { value: true, owner: system },
      token_exchange: { value: false, owner: system },
    });
    assert.deepEqual(body.details, { sequence: "0", owner: { type: "OWNER_TYPE_INSTANCE", id: instanceId } });
  });

  it("an IAM_OWNER sets and resets an instance flag", async () => {
    let result = await call("PATCH", owner, {
      json: { token_exchange: { set: true }, actions: { set: false } },
    });
    assert.equal(result.status, 200);
    assert.equal(result.body.details.sequence, "1");
    result = await call("GET", owner);
    assert.deepEqual(result.body.settings.token_exchange, { value: true });
    assert.deepEqual(result.body.settings.actions, { value: false });
    result = await call("PATCH", owner, {
      json: { tokenExchange: { reset: true }, actions: { reset: true } },
    });
    assert.equal(result.status, 200);
    result = await call("GET", owner);
    assert.deepEqual(result.body.settings.token_exchange, {
      value: false,
      owner: { type: "OWNER_TYPE_SYSTEM", id: "system" },
    });
    assert.equal(result.body.settings.actions.value, true);
  });

  it("viewers read but cannot write; users without an instance role get 403; no token 401", async () => {
    const before = await eventCount(platform);
    assert.equal((await call("GET", viewer)).status, 200);
    const denied = await call("PATCH", viewer, { json: { actions: { set: false } } });
    assert.equal(denied.status, 403);
    assert.equal(denied.body.code, 7);
    assert.equal((await call("GET", nobody)).status, 403);
    const orgOwner = await addMachineUser(platform, {
      username: "org-owner",
      membership: { contextType: "org", roles: ["ORG_OWNER"] },
    });
    assert.equal(
      (await call("GET", orgOwner.token)).status,
      403,
      "features are instance-wide: org roles do not grant them",
    );
    const count = await eventCount(platform);
    assert.equal((await call("PATCH", "garbage", { json: {} })).status, 401);
    assert.equal(await eventCount(platform), count);
    assert.ok(count > before);
  });

  it("rejects malformed flag values and organization contexts with 400", async () => {
    const before = await eventCount(platform);
    for (const json of [
      { actions: {} },
      { actions: { reset: false } },
      { actions: { set: "yes" } },
      { unknown_flag: { set: true } },
    ]) {
      const result = await call("PATCH", owner, { json });
      assert.equal(result.status, 400, JSON.stringify(json));
      assert.equal(result.body.code, 3);
    }
    const orgId = await addOrg(platform, "Flagless");
    const afterOrg = await eventCount(platform);
    const org = await call("GET", owner, { query: `?ctx.org_id=${orgId}` });
    assert.equal(org.status, 400);
    assert.match(org.body.message, /^ctx: feature flags exist for the system and for instances/);
    assert.equal(await eventCount(platform), afterOrg);
    assert.ok(afterOrg > before);
  });

  it("system users set defaults for every instance in the system context; instance owners may not", async () => {
    const denied = await call("PATCH", owner, {
      query: "?ctx.system=true",
      json: { actions: { set: false } },
    });
    assert.equal(denied.status, 403);

    let result = await call("PATCH", systemToken, {
      query: "?ctx.system=true",
      json: { actions: { set: false } },
    });
    assert.equal(result.status, 200, JSON.stringify(result.body));
    assert.deepEqual(result.body.details.owner, { type: "OWNER_TYPE_SYSTEM", id: "system" });
    result = await call("GET", owner);
    assert.deepEqual(result.body.settings.actions, {
      value: false,
      owner: { type: "OWNER_TYPE_SYSTEM", id: "system" },
    });

    // The instance's own value wins over the system default.
    await call("PATCH", owner, { json: { actions: { set: true } } });
    result = await call("GET", owner);
    assert.deepEqual(result.body.settings.actions, { value: true });
    await call("PATCH", owner, { json: { actions: { reset: true } } });
    await call("PATCH", systemToken, { query: "?ctx.system=true", json: { actions: { reset: true } } });
    assert.equal((await call("GET", owner)).body.settings.actions.value, true);
  });

  it("a system token with the wrong audience or signer is 401", async () => {
    const wrongAudience = await new SignJWT({})
      .setProtectedHeader({ alg: "RS256" })
      .setIssuer("ops-robot")
      .setSubject("ops-robot")
      .setAudience("https://elsewhere.example")
      .setIssuedAt()
      .setExpirationTime("5m")
      .sign(privateKey);
    assert.equal((await call("GET", wrongAudience, { query: "?ctx.system=true" })).status, 401);
    const other = await generateKeyPair("RS256");
    const wrongKey = await new SignJWT({})
      .setProtectedHeader({ alg: "RS256" })
      .setIssuer("ops-robot")
      .setSubject("ops-robot")
      .setAudience(platform.url)
      .setIssuedAt()
      .setExpirationTime("5m")
      .sign(other.privateKey);
    assert.equal((await call("GET", wrongKey, { query: "?ctx.system=true" })).status, 401);
  });
});
