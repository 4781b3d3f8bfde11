/**
 * The login policy in the sessions API: a password check where the user's organization rules passwords
 * out, or a check or challenge of a second factor it does not allow, is FAILED_PRECONDITION and stores
 * nothing. An account above its organization's owners (an instance role) follows the instance's policy
 * instead, whatever the organization's owner sets.
 */

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { generate } from "otplib";
import {
  addMachineUser,
  addOrg,
  assertRejected,
  restClient,
  startPlatform,
  type TestPlatform,
} from "../../../test/helpers.ts";
import { addHuman } from "../../../test/login.ts";
import { changeSettings } from "../../domain/settings/commands.ts";
import { LOGIN } from "../../domain/settings/login.ts";

const SESSIONS = "/resources/v3alpha/sessions";
const USERS = "/resources/v3alpha/users";
const MEMBERSHIPS = "/resources/v3alpha/memberships";
const LOGIN_SETTINGS = "/settings/v3alpha/login";
const PASSWORD = "Correct-Horse-1!";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const nowSeconds = () => Math.floor(Date.now() / 1000);
/** Waits for a fresh TOTP step when the current one ends within 10 s (codes computed now stay current). */
const freshStep = async () => {
  const left = 30 - (nowSeconds() % 30);
  if (left < 10) await sleep(left * 1000 + 200);
};

describe("sessions API under the login policy", () => {
  let platform: TestPlatform;
  let owner: string;
  let orgId: string;
  const rest = restClient(
    () => platform,
    () => owner,
  );

  before(async () => {
    platform = await startPlatform({ listen: true });
    ({ token: owner } = await addMachineUser(platform, {
      username: "owner",
      membership: { contextType: "instance", roles: ["IAM_OWNER"] },
    }));
    orgId = await addOrg(platform, "Passwordless");
    const instanceId = platform.bootstrapResult!.instanceId;
    await changeSettings(platform.eventStore, {
      category: LOGIN,
      owner: { type: 3, id: orgId },
      instanceId,
      creator: "test",
      set: { allow_username_password: false, second_factors: ["SECOND_FACTOR_TYPE_TOTP"] },
      reset: [],
    });
    await addHuman(platform, "carla", PASSWORD, { orgId });
    await addHuman(platform, "dora", PASSWORD);
  });
  after(() => platform.stop());

  it("refuses a password check where the user's organization rules passwords out", async () => {
    await assertRejected(
      platform,
      () =>
        rest("POST", SESSIONS, {
          json: { checks: { user: { login_name: "carla" }, password: { password: PASSWORD } } },
        }),
      400,
      9,
      /does not allow signing in with a password/,
    );
    // another organization's user: allowed as before
    const allowed = await rest("POST", SESSIONS, {
      json: { checks: { user: { login_name: "dora" }, password: { password: PASSWORD } } },
    });
    assert.equal(allowed.status, 201, allowed.text);
  });

  it("refuses a challenge or check of a second factor the policy does not allow", async () => {
    // the session itself (without a password) may be created
    const created = await rest("POST", SESSIONS, { json: { checks: { user: { login_name: "carla" } } } });
    assert.equal(created.status, 201, created.text);
    const { id } = created.json.details;
    const token = created.json.session_token;
    await assertRejected(
      platform,
      () =>
        rest("PATCH", `${SESSIONS}/${id}`, { json: { session_token: token, challenges: { otp_email: {} } } }),
      400,
      9,
      /does not allow codes by e-mail/,
    );
    await assertRejected(
      platform,
      () =>
        rest("PATCH", `${SESSIONS}/${id}`, {
          json: { session_token: token, checks: { otp_sms: { code: "123456" } } },
        }),
      400,
      9,
      /does not allow codes by SMS/,
    );
    await assertRejected(
      platform,
      () =>
        rest("POST", SESSIONS, {
          json: { checks: { user: { login_name: "carla" } }, challenges: { otp_sms: { return_code: true } } },
        }),
      400,
      9,
      /does not allow codes by SMS/,
    );
  });
});

describe("sessions API: an account above its organization follows the instance's login policy", () => {
  let platform: TestPlatform;
  /** IAM_OWNER of the instance. */
  let root: string;
  /** ORG_OWNER of the tenant organization. */
  let tenantOwner: string;
  let tenant: string;
  const secrets = new Map<string, string>();
  const rest = restClient(
    () => platform,
    () => root,
  );

  /** A human of the tenant with an active authenticator app (its registration used the previous step). */
  const withTotp = async (username: string) => {
    const id = await addHuman(platform, username, PASSWORD, { orgId: tenant });
    const secret = (await rest("POST", `${USERS}/${id}/totp`)).json.secret as string;
    const verified = await rest("POST", `${USERS}/${id}/totp/_verify`, {
      json: { code: await generate({ secret, epoch: nowSeconds() - 30 }) },
    });
    assert.equal(verified.status, 200, verified.text);
    secrets.set(username, secret);
    return id;
  };

  before(async () => {
    platform = await startPlatform({ listen: true });
    ({ token: root } = await addMachineUser(platform, {
      username: "root",
      membership: { contextType: "instance", roles: ["IAM_OWNER"] },
    }));
    tenant = await addOrg(platform, "Tenant");
    ({ token: tenantOwner } = await addMachineUser(platform, {
      username: "tenant-owner",
      orgId: tenant,
      membership: { contextType: "org", roles: ["ORG_OWNER"] },
    }));
    const adaId = await withTotp("ada");
    const admin = await rest("POST", MEMBERSHIPS, { json: { user_id: adaId, roles: ["IAM_OWNER"] } });
    assert.equal(admin.status, 201, admin.text);
    await withTotp("pia");
    // the tenant's owner rules out passwords and every second factor but SMS codes in its organization
    const changed = await rest("PATCH", `${LOGIN_SETTINGS}?ctx.org_id=${tenant}`, {
      token: tenantOwner,
      json: {
        allow_username_password: { set: false },
        second_factors: { set: { value: ["SECOND_FACTOR_TYPE_OTP_SMS"] } },
      },
    });
    assert.equal(changed.status, 200, changed.text);
  });
  after(() => platform.stop());

  it("the instance administrator checks its password and TOTP as the instance allows", async () => {
    await freshStep();
    const created = await rest("POST", SESSIONS, {
      json: { checks: { user: { login_name: "ada" }, password: { password: PASSWORD } } },
    });
    assert.equal(created.status, 201, created.text);
    const { id } = created.json.details;
    const patched = await rest("PATCH", `${SESSIONS}/${id}`, {
      json: {
        session_token: created.json.session_token,
        checks: { totp: { code: await generate({ secret: secrets.get("ada")! }) } },
      },
    });
    assert.equal(patched.status, 200, patched.text);
    const factors = (await rest("GET", `${SESSIONS}/${id}`)).json.session.session.factors;
    assert.ok(factors.password?.verified_at, JSON.stringify(factors));
    assert.ok(factors.totp?.verified_at, JSON.stringify(factors));
  });

  it("a plain user of the organization follows the organization's policy", async () => {
    await assertRejected(
      platform,
      () =>
        rest("POST", SESSIONS, {
          json: { checks: { user: { login_name: "pia" }, password: { password: PASSWORD } } },
        }),
      400,
      9,
      /^the login policy of the user's organization does not allow signing in with a password/,
    );
    const created = await rest("POST", SESSIONS, { json: { checks: { user: { login_name: "pia" } } } });
    assert.equal(created.status, 201, created.text);
    await assertRejected(
      platform,
      async () =>
        rest("PATCH", `${SESSIONS}/${created.json.details.id}`, {
          json: {
            session_token: created.json.session_token,
            checks: { totp: { code: await generate({ secret: secrets.get("pia")! }) } },
          },
        }),
      400,
      9,
      /does not allow TOTP/,
    );
  });

  it("what the instance's policy rules out is refused to the administrator, saying whose policy it is", async () => {
    const instanceId = platform.bootstrapResult!.instanceId;
    const instance = { type: 2 as const, id: instanceId };
    await changeSettings(platform.eventStore, {
      category: LOGIN,
      owner: instance,
      instanceId,
      creator: "test",
      set: { second_factors: ["SECOND_FACTOR_TYPE_TOTP"] },
      reset: [],
    });
    try {
      await assertRejected(
        platform,
        () =>
          rest("POST", SESSIONS, {
            json: { checks: { user: { login_name: "ada" } }, challenges: { otp_sms: { return_code: true } } },
          }),
        400,
        9,
        /^the instance's login policy \(the user holds roles above its organization\) does not allow codes by SMS/,
      );
    } finally {
      await changeSettings(platform.eventStore, {
        category: LOGIN,
        owner: instance,
        instanceId,
        creator: "test",
        set: {},
        reset: ["second_factors"],
      });
    }
  });
});
