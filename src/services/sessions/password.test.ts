/**
 * Password checks of the sessions API under the default lockout (temporary, growing, never LOCKED), the
 * lockout as the users API shows it, and a password that must be changed.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import {
  addMachineUser,
  eventCount,
  type Json,
  restClient,
  startPlatform,
  type TestPlatform,
} from "../../../test/helpers.ts";
import { addHuman } from "../../../test/login.ts";
import { USER, UserEvent } from "../../domain/user/events.ts";

const SESSIONS = "/resources/v3alpha/sessions";
const USERS = "/resources/v3alpha/users";
const PASSWORD = "Correct-Horse-1!";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("password lockout by default: temporary and growing, never a permanent lock", () => {
  let platform: TestPlatform;
  let owner: string;
  const rest = restClient(
    () => platform,
    () => owner,
  );

  before(async () => {
    platform = await startPlatform({
      listen: true,
      env: {
        PLATFORM_MAX_PASSWORD_ATTEMPTS: "3",
        PLATFORM_PASSWORD_LOCKOUT_SECONDS: "1",
        PLATFORM_PASSWORD_LOCKOUT_MAX_SECONDS: "2",
      },
    });
    ({ token: owner } = await addMachineUser(platform, {
      username: "owner",
      membership: { contextType: "instance", roles: ["IAM_OWNER"] },
    }));
  });
  after(() => platform.stop());

  const check = (loginName: string, password: string) =>
    rest("POST", SESSIONS, { json: { checks: { user: { login_name: loginName }, password: { password } } } });
  const human = async (id: string) => (await rest("GET", `${USERS}/${id}`)).json.user;
  /** Seconds of the lockout each failure started (0: none), from the failure events. */
  const lockoutsOf = async (userId: string) => {
    const rows = await platform.db.query<{ payload: Json; created_at: Date }>(
      `SELECT payload, created_at FROM events WHERE aggregate_type = $1 AND aggregate_id = $2 AND event_type = $3
       ORDER BY sequence`,
      [USER, userId, UserEvent.passwordCheckFailed],
    );
    return rows.map((r) =>
      r.payload?.locked_until
        ? Math.round((new Date(r.payload.locked_until).getTime() - new Date(r.created_at).getTime()) / 1000)
        : 0,
    );
  };
  /** Waits until the user's lockout (as the users API shows it) is over. */
  const waitForLockoutEnd = async (userId: string) => {
    const until = (await human(userId)).human.password_locked_until;
    assert.ok(until, "locked out");
    await sleep(Math.max(0, new Date(until).getTime() - Date.now()) + 100);
    assert.equal((await human(userId)).human.password_locked_until, undefined);
  };

  it("the maximum-th wrong password locks the checks out for a while, each further one for longer (capped); the right password works afterwards", async () => {
    const userId = await addHuman(platform, "target", PASSWORD);
    for (let i = 1; i <= 2; i++) {
      const wrong = await check("target", `wrong-${i}`);
      assert.deepEqual(wrong.json, { code: 3, message: "password is wrong", details: [] });
    }
    assert.equal((await human(userId)).human.failed_password_attempts, 2);
    assert.equal((await human(userId)).human.password_locked_until, undefined);

    // the 3rd starts the lockout: still ACTIVE, not LOCKED
    assert.equal((await check("target", "wrong-3")).json.message, "password is wrong");
    const user = await human(userId);
    assert.equal(user.state, "USER_STATE_ACTIVE");
    assert.equal(user.human.failed_password_attempts, 3);
    assert.ok(new Date(user.human.password_locked_until).getTime() > Date.now());

    // while it lasts, no password is verified or counted — not even the right one
    const before = await eventCount(platform);
    for (const password of [PASSWORD, "wrong-4"]) {
      const refused = await check("target", password);
      assert.equal(refused.status, 400);
      assert.equal(refused.json.code, 9);
      assert.match(refused.json.message, /^user is locked until \S+Z after too many wrong passwords$/);
    }
    assert.equal(await eventCount(platform), before, "nothing stored");

    // afterwards the next wrong password locks out twice as long, then at most the maximum (2 s)
    await waitForLockoutEnd(userId);
    assert.equal((await check("target", "wrong-5")).json.message, "password is wrong");
    await waitForLockoutEnd(userId);
    assert.equal((await check("target", "wrong-6")).json.message, "password is wrong");
    assert.deepEqual(await lockoutsOf(userId), [0, 0, 1, 2, 2]);

    // the owner signs in once it is over; the count starts again; the user was never LOCKED
    await waitForLockoutEnd(userId);
    const signedIn = await check("target", PASSWORD);
    assert.equal(signedIn.status, 201, signedIn.text);
    const reset = await human(userId);
    assert.equal(reset.state, "USER_STATE_ACTIVE");
    assert.equal(reset.human.failed_password_attempts, 0);
    assert.equal(reset.human.password_locked_until, undefined);
    const locked = await platform.db.query(
      "SELECT 1 FROM events WHERE aggregate_id = $1 AND event_type = $2",
      [userId, UserEvent.locked],
    );
    assert.equal(locked.length, 0);
  });

  it("an administrator sees the lockout in the users API and ends it early with _unlock", async () => {
    const userId = await addHuman(platform, "early", PASSWORD);
    for (let i = 1; i <= 3; i++) await check("early", `wrong-${i}`);
    assert.ok((await human(userId)).human.password_locked_until);
    assert.equal((await check("early", PASSWORD)).json.code, 9);
    const unlocked = await rest("POST", `${USERS}/${userId}/_unlock`);
    assert.equal(unlocked.status, 200, unlocked.text);
    const user = await human(userId);
    assert.equal(user.human.password_locked_until, undefined);
    assert.equal(user.human.failed_password_attempts, 0);
    assert.equal((await check("early", PASSWORD)).status, 201);
    // neither locked nor locked out: nothing to unlock
    const nothing = await rest("POST", `${USERS}/${userId}/_unlock`);
    assert.equal(nothing.status, 400);
    assert.equal(nothing.json.code, 9);
  });

  it("a new password (_set_password) ends the lockout and resets the count", async () => {
    const userId = await addHuman(platform, "renewed", PASSWORD);
    for (let i = 1; i <= 3; i++) await check("renewed", `wrong-${i}`);
    const set = await rest("POST", `${USERS}/${userId}/_set_password`, {
      json: { password: "Brand-New-Passw0rd!", change_required: false },
    });
    assert.equal(set.status, 200, set.text);
    assert.equal((await human(userId)).human.failed_password_attempts, 0);
    assert.equal((await check("renewed", "Brand-New-Passw0rd!")).status, 201);
  });
});

describe("a password that must be changed, in the sessions API", () => {
  let platform: TestPlatform;
  let owner: string;
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
  });
  after(() => platform.stop());

  it("the password factor says change_required until the user sets a new password", async () => {
    const userId = await addHuman(platform, "initial", PASSWORD);
    const factorOf = async () => {
      const created = await rest("POST", SESSIONS, {
        json: { checks: { user: { login_name: "initial" }, password: { password: PASSWORD } } },
      });
      assert.equal(created.status, 201, created.text);
      const got = await rest("GET", `${SESSIONS}/${created.json.details.id}`);
      return got.json.session.session.factors.password;
    };
    assert.equal((await factorOf()).change_required ?? false, false);
    const set = await rest("POST", `${USERS}/${userId}/_set_password`, {
      json: { password: PASSWORD, change_required: true },
    });
    assert.equal(set.status, 200, set.text);
    const factor = await factorOf();
    assert.equal(factor.change_required, true);
    assert.ok(factor.verified_at);
  });
});
