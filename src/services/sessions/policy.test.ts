/**
 * The login policy in the sessions API: a password check where the user's organization rules passwords
 * out, or a check or challenge of a second factor it does not allow, is FAILED_PRECONDITION and stores
 * nothing.
 */

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
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
const PASSWORD = "Correct-Horse-1!";

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
