import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import {
  addMachineUser,
  addOrg,
  assertRejected,
  eventCount,
  restClient,
  startPlatform,
  type TestPlatform,
} from "../../../test/helpers.ts";
import { PlatformLoginSettings } from "../../gen/platform/settings/login/v3alpha/login_service_pb.ts";

const PATH = "/settings/v3alpha/login";
const SYSTEM = { type: "OWNER_TYPE_SYSTEM", id: "system" };

describe("login policy settings", () => {
  let platform: TestPlatform;
  let owner: string; // IAM_OWNER
  let orgOwner: string; // ORG_OWNER of orgId
  let instanceId: string;
  let orgId: string;
  let otherOrgId: string;
  const rest = restClient(
    () => platform,
    () => owner,
  );

  before(async () => {
    platform = await startPlatform({ listen: true });
    instanceId = platform.bootstrapResult!.instanceId;
    orgId = await addOrg(platform, "Customers");
    otherOrgId = await addOrg(platform, "Partners");
    ({ token: owner } = await addMachineUser(platform, {
      username: "owner",
      membership: { contextType: "instance", roles: ["IAM_OWNER"] },
    }));
    ({ token: orgOwner } = await addMachineUser(platform, {
      username: "org-owner",
      orgId,
      membership: { contextType: "org", roles: ["ORG_OWNER"] },
    }));
  });
  after(() => platform.stop());

  it("defaults: passwords, providers and passkeys allowed, MFA not forced, every factor, the lifetimes", async () => {
    const resolved = await rest("GET", PATH);
    assert.equal(resolved.status, 200, resolved.text);
    const s = resolved.json.settings;
    for (const [name, value] of Object.entries({
      allow_username_password: true,
      allow_external_idp: true,
      force_mfa: false,
      force_mfa_local_only: false,
      passwordless_allowed: true,
    }))
      assert.deepEqual(s[name], { value, owner: SYSTEM }, name);
    assert.deepEqual(s.second_factors, {
      value: [
        "SECOND_FACTOR_TYPE_TOTP",
        "SECOND_FACTOR_TYPE_U2F",
        "SECOND_FACTOR_TYPE_OTP_EMAIL",
        "SECOND_FACTOR_TYPE_OTP_SMS",
      ],
      owner: SYSTEM,
    });
    assert.deepEqual(s.multi_factors, { value: ["MULTI_FACTOR_TYPE_U2F_WITH_VERIFICATION"], owner: SYSTEM });
    assert.deepEqual(s.password_check_lifetime, { value: "864000s", owner: SYSTEM });
    assert.deepEqual(s.second_factor_check_lifetime, { value: "64800s", owner: SYSTEM });
    assert.deepEqual(s.multi_factor_check_lifetime, { value: "43200s", owner: SYSTEM });
    assert.deepEqual(s.mfa_init_skip_lifetime, { value: "0s", owner: SYSTEM });
  });

  it("set in the instance, overridden in part by an organization, reset again", async () => {
    const set = await rest("PATCH", PATH, {
      json: {
        force_mfa: { set: true },
        second_factors: { set: { value: ["SECOND_FACTOR_TYPE_TOTP", "SECOND_FACTOR_TYPE_TOTP"] } },
        password_check_lifetime: { set: "3600s" },
        mfaInitSkipLifetime: { set: "86400s" },
      },
    });
    assert.equal(set.status, 200, set.text);
    const instance = { type: "OWNER_TYPE_INSTANCE", id: instanceId };
    let org = (await rest("GET", `${PATH}?ctx.org_id=${orgId}`)).json.settings;
    assert.deepEqual(org.force_mfa, { value: true, owner: instance });
    // duplicates are stored once
    assert.deepEqual(org.second_factors, { value: ["SECOND_FACTOR_TYPE_TOTP"], owner: instance });
    assert.deepEqual(org.password_check_lifetime, { value: "3600s", owner: instance });
    assert.deepEqual(org.mfa_init_skip_lifetime, { value: "86400s", owner: instance });
    let policy = await platform.login.loginPolicy(instanceId, orgId);
    assert.equal(policy.force_mfa, true);
    assert.equal(policy.password_check_lifetime, 3600);

    await rest("PATCH", `${PATH}?ctx.org_id=${orgId}`, {
      json: { force_mfa: { set: false }, second_factors: { set: { value: [] } } },
    });
    org = (await rest("GET", `${PATH}?ctx.org_id=${orgId}`)).json.settings;
    assert.deepEqual(org.force_mfa, { value: false });
    assert.deepEqual(org.second_factors, { value: [] }, "an empty list is a value of its own");
    assert.deepEqual(org.password_check_lifetime, { value: "3600s", owner: instance });
    policy = await platform.login.loginPolicy(instanceId, orgId);
    assert.equal(policy.force_mfa, false);
    assert.deepEqual(policy.second_factors, []);
    assert.equal((await platform.login.loginPolicy(instanceId, undefined)).force_mfa, true);

    await rest("PATCH", `${PATH}?ctx.org_id=${orgId}`, {
      json: { force_mfa: { reset: true }, second_factors: { reset: true } },
    });
    await rest("PATCH", PATH, {
      json: {
        force_mfa: { reset: true },
        second_factors: { reset: true },
        password_check_lifetime: { reset: true },
        mfa_init_skip_lifetime: { reset: true },
      },
    });
    org = (await rest("GET", `${PATH}?ctx.org_id=${orgId}`)).json.settings;
    assert.deepEqual(org.force_mfa, { value: false, owner: SYSTEM });
    assert.equal(org.second_factors.value.length, 4);
    assert.deepEqual(org.password_check_lifetime, { value: "864000s", owner: SYSTEM });
    assert.equal((await platform.login.loginPolicy(instanceId, orgId)).force_mfa, false);
  });

  it("refuses unknown factor types and bad lifetimes, naming the field, storing nothing", async () => {
    const bad = async (json: unknown, field: string) =>
      assertRejected(platform, () => rest("PATCH", PATH, { json }), 400, 3, field);
    await bad(
      {
        force_mfa: { set: true },
        second_factors: { set: { value: ["SECOND_FACTOR_TYPE_TOTP", "SMOKE_SIGNALS"] } },
      },
      "settings.second_factors.set.value[1]",
    );
    await bad(
      { multi_factors: { set: { value: ["SECOND_FACTOR_TYPE_TOTP"] } } },
      "settings.multi_factors.set.value[0]",
    );
    await bad({ password_check_lifetime: { set: "-1s" } }, "settings.password_check_lifetime.set");
    await bad({ second_factor_check_lifetime: { set: "1.5s" } }, "settings.second_factor_check_lifetime.set");
    // ten years is the limit: one second more is refused, the limit itself accepted
    await bad(
      { multi_factor_check_lifetime: { set: "315360001s" } },
      "settings.multi_factor_check_lifetime.set",
    );
    const limit = await rest("PATCH", PATH, { json: { multi_factor_check_lifetime: { set: "315360000s" } } });
    assert.equal(limit.status, 200, limit.text);
    await rest("PATCH", PATH, { json: { multi_factor_check_lifetime: { reset: true } } });
    const zero = await rest("PATCH", PATH, { json: { mfa_init_skip_lifetime: { set: "0s" } } });
    assert.equal(zero.status, 200, zero.text);
    await rest("PATCH", PATH, { json: { mfa_init_skip_lifetime: { reset: true } } });
    assert.equal(
      (await rest("GET", PATH)).json.settings.force_mfa.value,
      false,
      "nothing of a bad patch stored",
    );
  });

  it("ORG_OWNER sets its own organization's policy only", async () => {
    const asOrgOwner = { token: orgOwner };
    const own = await rest("PATCH", `${PATH}?ctx.org_id=${orgId}`, {
      ...asOrgOwner,
      json: { allow_external_idp: { set: false } },
    });
    assert.equal(own.status, 200, own.text);
    assert.equal((await platform.login.loginPolicy(instanceId, orgId)).allow_external_idp, false);
    await assertRejected(
      platform,
      () =>
        rest("PATCH", `${PATH}?ctx.org_id=${otherOrgId}`, {
          ...asOrgOwner,
          json: { force_mfa: { set: true } },
        }),
      403,
      7,
    );
    await assertRejected(
      platform,
      () => rest("PATCH", PATH, { ...asOrgOwner, json: { force_mfa: { set: true } } }),
      403,
      7,
    );
    await rest("PATCH", `${PATH}?ctx.org_id=${orgId}`, { json: { allow_external_idp: { reset: true } } });
  });

  it("works over Connect: set, resolve, and the same refusal", async () => {
    const client = createClient(
      PlatformLoginSettings,
      createConnectTransport({ baseUrl: platform.url, httpVersion: "1.1" }),
    );
    const headers = { authorization: `Bearer ${owner}` };
    await client.setLoginSettings(
      {
        ctx: { context: { case: "orgId", value: orgId } },
        settings: {
          passwordlessAllowed: { value: { case: "set", value: false } },
          multiFactors: { value: { case: "set", value: { value: [] } } },
          secondFactorCheckLifetime: { value: { case: "set", value: { seconds: 60n, nanos: 0 } } },
        },
      },
      { headers },
    );
    const resolved = await client.resolveLoginSettings(
      { ctx: { context: { case: "orgId", value: orgId } } },
      { headers },
    );
    assert.equal(resolved.settings?.passwordlessAllowed?.value, false);
    assert.deepEqual(resolved.settings?.multiFactors?.value, []);
    assert.equal(resolved.settings?.secondFactorCheckLifetime?.value?.seconds, 60n);
    assert.equal(resolved.settings?.passwordCheckLifetime?.value?.seconds, 864000n);

    const before = await eventCount(platform);
    await assert.rejects(
      client.setLoginSettings(
        {
          settings: {
            secondFactors: { value: { case: "set", value: { value: ["SECOND_FACTOR_TYPE_SMOKE"] } } },
          },
        },
        { headers },
      ),
      (error: unknown) =>
        error instanceof ConnectError &&
        error.code === Code.InvalidArgument &&
        error.rawMessage.startsWith("settings.second_factors.set.value[0]"),
    );
    assert.equal(await eventCount(platform), before);
    await client.setLoginSettings(
      {
        ctx: { context: { case: "orgId", value: orgId } },
        settings: {
          passwordlessAllowed: { value: { case: "reset", value: true } },
          multiFactors: { value: { case: "reset", value: true } },
          secondFactorCheckLifetime: { value: { case: "reset", value: true } },
        },
      },
      { headers },
    );
  });
});
