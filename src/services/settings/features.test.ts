import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { exportSPKI, generateKeyPair, SignJWT } from "jose";
import {
  addMachineUser,
  addOrg,
  eventCount,
  grpcCall,
  type Json,
  restClient,
  startPlatform,
  type TestPlatform,
} from "../../../test/helpers.ts";

import { PlatformFeatureSettings } from "../../gen/platform/settings/feature/v3alpha/feature_service_pb.ts";

const FEATURES = "/settings/v3alpha/features";

describe("feature settings", () => {
  let platform: TestPlatform;
  let owner: string;
  let viewer: string;
  let nobody: string;
  let systemToken: string;
  let instanceId: string;
  let privateKey: CryptoKey;

  const rest = restClient(
    () => platform,
    () => owner,
  );

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
    const { status, json: body } = await rest("GET", FEATURES);
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
    let result = await rest("PATCH", FEATURES, {
      json: { token_exchange: { set: true }, actions: { set: false } },
    });
    assert.equal(result.status, 200);
    assert.equal(result.json.details.sequence, "1");
    result = await rest("GET", FEATURES);
    assert.deepEqual(result.json.settings.token_exchange, { value: true });
    assert.deepEqual(result.json.settings.actions, { value: false });
    result = await rest("PATCH", FEATURES, {
      json: { tokenExchange: { reset: true }, actions: { reset: true } },
    });
    assert.equal(result.status, 200);
    result = await rest("GET", FEATURES);
    assert.deepEqual(result.json.settings.token_exchange, {
      value: false,
      owner: { type: "OWNER_TYPE_SYSTEM", id: "system" },
    });
    assert.equal(result.json.settings.actions.value, true);
  });

  it("a patch sets or resets only the flags it gives (REST and gRPC)", async () => {
    const flags = async () => (await rest("GET", FEATURES)).json.settings;
    const initial = await flags();
    assert.equal((await rest("PATCH", FEATURES, { json: { token_exchange: { set: true } } })).status, 200);
    assert.deepEqual(await flags(), { ...initial, token_exchange: { value: true } });
    const grpc = (settings: Json) =>
      grpcCall(platform, owner, PlatformFeatureSettings, "SetFeatures", { settings });
    await grpc({ multitenancy_settings: { set: false } }); // false: a oneof member, present in binary too
    assert.deepEqual(await flags(), {
      ...initial,
      token_exchange: { value: true },
      multitenancy_settings: { value: false },
    });
    await grpc({});
    await grpc({ multitenancy_settings: { reset: true } });
    assert.deepEqual(await flags(), { ...initial, token_exchange: { value: true } });
    await grpc({ token_exchange: { reset: true } });
    assert.deepEqual(await flags(), initial);
  });

  it("viewers read but cannot write; users without an instance role get 403; no token 401", async () => {
    const before = await eventCount(platform);
    assert.equal((await rest("GET", FEATURES, { token: viewer })).status, 200);
    const denied = await rest("PATCH", FEATURES, { token: viewer, json: { actions: { set: false } } });
    assert.equal(denied.status, 403);
    assert.equal(denied.json.code, 7);
    assert.equal((await rest("GET", FEATURES, { token: nobody })).status, 403);
    const orgOwner = await addMachineUser(platform, {
      username: "org-owner",
      membership: { contextType: "org", roles: ["ORG_OWNER"] },
    });
    assert.equal(
      (await rest("GET", FEATURES, { token: orgOwner.token })).status,
      403,
      "features are instance-wide: org roles do not grant them",
    );
    const count = await eventCount(platform);
    assert.equal((await rest("PATCH", FEATURES, { token: "garbage", json: {} })).status, 401);
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
      const result = await rest("PATCH", FEATURES, { json });
      assert.equal(result.status, 400, JSON.stringify(json));
      assert.equal(result.json.code, 3);
    }
    const orgId = await addOrg(platform, "Flagless");
    const afterOrg = await eventCount(platform);
    const org = await rest("GET", `${FEATURES}?ctx.org_id=${orgId}`);
    assert.equal(org.status, 400);
    assert.match(org.json.message, /^ctx: feature flags exist for the system and for instances/);
    assert.equal(await eventCount(platform), afterOrg);
    assert.ok(afterOrg > before);
  });

  it("system users set defaults for every instance in the system context; instance owners may not", async () => {
    const denied = await rest("PATCH", `${FEATURES}?ctx.system=true`, { json: { actions: { set: false } } });
    assert.equal(denied.status, 403);

    let result = await rest("PATCH", `${FEATURES}?ctx.system=true`, {
      token: systemToken,
      json: { actions: { set: false } },
    });
    assert.equal(result.status, 200, JSON.stringify(result.json));
    assert.deepEqual(result.json.details.owner, { type: "OWNER_TYPE_SYSTEM", id: "system" });
    result = await rest("GET", FEATURES);
    assert.deepEqual(result.json.settings.actions, {
      value: false,
      owner: { type: "OWNER_TYPE_SYSTEM", id: "system" },
    });

    // The instance's own value wins over the system default.
    await rest("PATCH", FEATURES, { json: { actions: { set: true } } });
    result = await rest("GET", FEATURES);
    assert.deepEqual(result.json.settings.actions, { value: true });
    await rest("PATCH", FEATURES, { json: { actions: { reset: true } } });
    await rest("PATCH", `${FEATURES}?ctx.system=true`, {
      token: systemToken,
      json: { actions: { reset: true } },
    });
    assert.equal((await rest("GET", FEATURES)).json.settings.actions.value, true);
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
    assert.equal((await rest("GET", `${FEATURES}?ctx.system=true`, { token: wrongAudience })).status, 401);
    const other = await generateKeyPair("RS256");
    const wrongKey = await new SignJWT({})
      .setProtectedHeader({ alg: "RS256" })
      .setIssuer("ops-robot")
      .setSubject("ops-robot")
      .setAudience(platform.url)
      .setIssuedAt()
      .setExpirationTime("5m")
      .sign(other.privateKey);
    assert.equal((await rest("GET", `${FEATURES}?ctx.system=true`, { token: wrongKey })).status, 401);
  });
});
