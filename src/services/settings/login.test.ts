import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import {
  addMachineUser,
  addOrg,
  assertRejected,
  grpcCall,
  type Json,
  restClient,
  startPlatform,
  type TestPlatform,
} from "../../../test/helpers.ts";
import { PlatformLoginSettings } from "../../gen/platform/settings/login/v3alpha/login_service_pb.ts";

const PATH = "/settings/v3alpha/login";

describe("login settings", () => {
  let platform: TestPlatform;
  let owner: string; // IAM_OWNER
  let nobody: string; // no role
  let instanceId: string;
  let orgId: string;
  const rest = restClient(
    () => platform,
    () => owner,
  );

  before(async () => {
    platform = await startPlatform({ listen: true });
    instanceId = platform.bootstrapResult!.instanceId;
    orgId = await addOrg(platform, "Customers");
    ({ token: owner } = await addMachineUser(platform, {
      username: "owner",
      membership: { contextType: "instance", roles: ["IAM_OWNER"] },
    }));
    ({ token: nobody } = await addMachineUser(platform, { username: "nobody" }));
  });
  after(() => platform.stop());

  it("registration is allowed by default, switchable per instance and organization, and resettable", async () => {
    let resolved = await rest("GET", PATH);
    assert.equal(resolved.status, 200, resolved.text);
    assert.deepEqual(resolved.json.settings.allow_register, {
      value: true,
      owner: { type: "OWNER_TYPE_SYSTEM", id: "system" },
    });

    const set = await rest("PATCH", PATH, { json: { allow_register: { set: false } } });
    assert.equal(set.status, 200, set.text);
    assert.deepEqual(set.json.details.owner, { type: "OWNER_TYPE_INSTANCE", id: instanceId });
    resolved = await rest("GET", PATH);
    assert.deepEqual(resolved.json.settings.allow_register, { value: false });
    assert.equal(await platform.login.allowRegister(instanceId, undefined), false);

    // the organization inherits the instance's value, then overrides it
    resolved = await rest("GET", `${PATH}?ctx.org_id=${orgId}`);
    assert.deepEqual(resolved.json.settings.allow_register, {
      value: false,
      owner: { type: "OWNER_TYPE_INSTANCE", id: instanceId },
    });
    await rest("PATCH", `${PATH}?ctx.org_id=${orgId}`, { json: { allowRegister: { set: true } } });
    assert.equal(await platform.login.allowRegister(instanceId, orgId), true);
    assert.equal(await platform.login.allowRegister(instanceId, undefined), false);

    // gRPC reads the same
    const client = createClient(PlatformLoginSettings, createGrpcTransport({ baseUrl: platform.url }));
    const viaGrpc = await client.resolveLoginSettings({}, { headers: { authorization: `Bearer ${owner}` } });
    assert.equal(viaGrpc.settings?.allowRegister?.value, false);

    await rest("PATCH", PATH, { json: { allow_register: { reset: true } } });
    assert.equal(await platform.login.allowRegister(instanceId, undefined), true);
  });

  it("hide_password_reset off and ignore_unknown_usernames on by default, inherited instance → organization", async () => {
    const system = { value: false, owner: { type: "OWNER_TYPE_SYSTEM", id: "system" } };
    const systemOn = { value: true, owner: { type: "OWNER_TYPE_SYSTEM", id: "system" } };
    let resolved = await rest("GET", PATH);
    assert.deepEqual(resolved.json.settings.hide_password_reset, system);
    assert.deepEqual(resolved.json.settings.ignore_unknown_usernames, systemOn);

    const set = await rest("PATCH", PATH, {
      json: { hide_password_reset: { set: true }, ignore_unknown_usernames: { set: true } },
    });
    assert.equal(set.status, 200, set.text);
    resolved = await rest("GET", `${PATH}?ctx.org_id=${orgId}`);
    const instance = { value: true, owner: { type: "OWNER_TYPE_INSTANCE", id: instanceId } };
    assert.deepEqual(resolved.json.settings.hide_password_reset, instance);
    assert.deepEqual(resolved.json.settings.ignore_unknown_usernames, instance);
    assert.equal(await platform.login.loginFlag(instanceId, orgId, "ignore_unknown_usernames"), true);

    // the organization turns one off again; the other stays inherited
    await rest("PATCH", `${PATH}?ctx.org_id=${orgId}`, { json: { ignoreUnknownUsernames: { set: false } } });
    resolved = await rest("GET", `${PATH}?ctx.org_id=${orgId}`);
    assert.deepEqual(resolved.json.settings.ignore_unknown_usernames, { value: false });
    assert.deepEqual(resolved.json.settings.hide_password_reset, instance);
    assert.equal(await platform.login.loginFlag(instanceId, orgId, "ignore_unknown_usernames"), false);
    assert.equal(await platform.login.loginFlag(instanceId, undefined, "ignore_unknown_usernames"), true);

    await rest("PATCH", `${PATH}?ctx.org_id=${orgId}`, {
      json: { ignore_unknown_usernames: { reset: true } },
    });
    await rest("PATCH", PATH, {
      json: { hide_password_reset: { reset: true }, ignore_unknown_usernames: { reset: true } },
    });
    resolved = await rest("GET", `${PATH}?ctx.org_id=${orgId}`);
    assert.deepEqual(resolved.json.settings.hide_password_reset, system);
    assert.deepEqual(resolved.json.settings.ignore_unknown_usernames, systemOn);
  });

  it("a patch changes only the context it names and only when the field is given (REST and gRPC)", async () => {
    const resolved = async (query = "") =>
      (await rest("GET", `${PATH}${query}`)).json.settings.allow_register;
    assert.equal(
      (await rest("PATCH", `${PATH}?ctx.org_id=${orgId}`, { json: { allow_register: { set: true } } }))
        .status,
      200,
    );
    const grpc = (request: Json) =>
      grpcCall(platform, owner, PlatformLoginSettings, "SetLoginSettings", request);
    await grpc({ settings: { allow_register: { set: false } } }); // false is a oneof member: present in binary
    assert.deepEqual(await resolved(), { value: false });
    assert.deepEqual(
      await resolved(`?ctx.org_id=${orgId}`),
      { value: true },
      "the organization's own value stays",
    );
    await grpc({ settings: {} });
    assert.equal((await rest("PATCH", PATH, { json: {} })).status, 200);
    assert.deepEqual(await resolved(), { value: false });
    await grpc({ settings: { allow_register: { reset: true } } });
    await rest("PATCH", `${PATH}?ctx.org_id=${orgId}`, { json: { allow_register: { reset: true } } });
    assert.deepEqual(await resolved(`?ctx.org_id=${orgId}`), {
      value: true,
      owner: { type: "OWNER_TYPE_SYSTEM", id: "system" },
    });
  });

  it("refuses bad input and callers without permission, storing nothing", async () => {
    await assertRejected(
      platform,
      () => rest("PATCH", PATH, { json: { allow_register: { reset: false } } }),
      400,
      3,
      "settings.allow_register.reset",
    );
    await assertRejected(
      platform,
      () => rest("PATCH", PATH, { json: { allow_register: { set: false } }, token: null }),
      401,
      16,
    );
    await assertRejected(
      platform,
      () => rest("PATCH", PATH, { json: { allow_register: { set: false } }, token: nobody }),
      403,
      7,
    );
  });
});
