import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { ADMIN_PASSWORD, startPlatform, type TestPlatform } from "../../../test/helpers.ts";
import type { StoredEvent } from "../../eventstore/types.ts";
import { USER, UserEvent, UserState } from "../user/events.ts";
import {
  checkSession,
  createSession,
  factorCheckEvents,
  findUser,
  foldSession,
  foldUser,
  passwordCheckEvents,
  terminateSession,
} from "./commands.ts";
import { SESSION, SessionEvent } from "./events.ts";
import { lockoutSeconds } from "./lockout.ts";

let sequence = 0;
const event = (
  type: string,
  payload: Record<string, unknown> | null = null,
  aggregateType = USER,
): StoredEvent => ({
  instanceId: "i",
  aggregateType,
  aggregateId: "u1",
  sequence: ++sequence,
  type,
  payload,
  creator: "test",
  resourceOwner: "org1",
  createdAt: new Date(),
  position: sequence,
});

describe("session decisions (pure)", () => {
  const human = event(UserEvent.humanAdded, { username: "u", password_hash: "$argon2id$x" });

  it("counts failed password checks since the last success or unlock", () => {
    const failed = event(UserEvent.passwordCheckFailed);
    assert.equal(foldUser([human, failed, failed]).failedAttempts, 2);
    assert.equal(
      foldUser([human, failed, event(UserEvent.passwordCheckSucceeded), failed]).failedAttempts,
      1,
    );
    const locked = foldUser([human, failed, event(UserEvent.locked)]);
    assert.equal(locked.state, UserState.locked);
    const unlocked = foldUser([human, failed, event(UserEvent.locked), event(UserEvent.unlocked)]);
    assert.deepEqual([unlocked.state, unlocked.failedAttempts], [UserState.active, 0]);
    assert.equal(foldUser([human, event(UserEvent.removed)]).exists, false);
    assert.equal(
      foldUser([human, event(UserEvent.passwordChanged, { password_hash: "h2" })]).passwordHash,
      "h2",
    );
  });

  it("permanent lockout: locks when a failure reaches the maximum; 0 never locks", () => {
    const user = { ...foldUser([human]), failedAttempts: 9 };
    const types = (max: number, attempts = 9) =>
      passwordCheckEvents("u1", { ...user, failedAttempts: attempts }, false, {
        maxPasswordAttempts: max,
        lockout: "permanent",
      }).map((e) => e.type);
    assert.deepEqual(types(10), [UserEvent.passwordCheckFailed, UserEvent.locked]);
    assert.deepEqual(types(10, 8), [UserEvent.passwordCheckFailed]);
    assert.deepEqual(types(0, 100), [UserEvent.passwordCheckFailed]);
    assert.deepEqual(
      passwordCheckEvents("u1", user, true, { maxPasswordAttempts: 10 }).map((e) => e.type),
      [UserEvent.passwordCheckSucceeded],
    );
    // Nothing to reset: a right password records nothing on the user.
    assert.deepEqual(
      passwordCheckEvents("u1", { ...user, failedAttempts: 0 }, true, { maxPasswordAttempts: 10 }),
      [],
    );
  });

  it("temporary lockout (the default): from the maximum on, each failure locks out for longer, capped; never LOCKED", () => {
    const now = new Date("2026-01-01T00:00:00Z");
    const policy = { maxPasswordAttempts: 3, lockoutSeconds: 60, lockoutMaxSeconds: 300 };
    const waits = [0, 1, 2, 3, 4, 5, 6, 50].map((failedBefore) => {
      const events = passwordCheckEvents("u1", { failedAttempts: failedBefore }, false, policy, now);
      assert.deepEqual(
        events.map((e) => e.type),
        [UserEvent.passwordCheckFailed],
      );
      const until = events[0].payload?.locked_until as string | undefined;
      return until === undefined ? 0 : (new Date(until).getTime() - now.getTime()) / 1000;
    });
    assert.deepEqual(waits, [0, 0, 60, 120, 240, 300, 300, 300]);
    assert.equal(lockoutSeconds({ maxPasswordAttempts: 0 }, 100), 0);
    // folded: the failure's end of lockout; a right password, an unlock or a new password end it
    const failed = event(UserEvent.passwordCheckFailed, { locked_until: "2026-01-01T00:01:00Z" });
    const lockedOut = foldUser([human, failed]);
    assert.deepEqual(lockedOut.lockedUntil, new Date("2026-01-01T00:01:00Z"));
    assert.equal(lockedOut.state, UserState.active);
    for (const reset of [
      event(UserEvent.passwordCheckSucceeded),
      event(UserEvent.unlocked),
      event(UserEvent.passwordChanged, { password_hash: "h2", change_required: false }),
    ]) {
      const after = foldUser([human, failed, reset]);
      assert.deepEqual([after.failedAttempts, after.lockedUntil], [0, undefined], reset.type);
    }
  });

  it("second factors count on their own: a right password or another factor resets none; an unlock all", () => {
    const failed = (factor: string, locked_until?: string) =>
      event(UserEvent.factorCheckFailed, { factor, ...(locked_until ? { locked_until } : {}) });
    const passed = (factor: string) => event(UserEvent.factorCheckSucceeded, { factor });
    const user = foldUser([
      human,
      failed("totp"),
      event(UserEvent.passwordCheckSucceeded),
      failed("totp", "2026-01-01T00:01:00Z"),
      event(UserEvent.passwordChanged, { password_hash: "h2" }),
      failed("otp_sms"),
      passed("otp_sms"),
      failed("recovery_code"),
    ]);
    assert.equal(user.failedAttempts, 0, "factor failures are not password failures");
    assert.deepEqual(user.factorLockouts, {
      totp: { failedAttempts: 2, lockedUntil: new Date("2026-01-01T00:01:00Z") },
      recovery_code: { failedAttempts: 1, lockedUntil: undefined },
    });
    assert.deepEqual(foldUser([human, failed("totp"), event(UserEvent.unlocked)]).factorLockouts, {});
    // the events are decided on the factor's own count, by the password's rule
    const now = new Date("2026-01-01T00:00:00Z");
    const policy = { maxPasswordAttempts: 3, lockoutSeconds: 60, lockoutMaxSeconds: 300 };
    const third = factorCheckEvents("u1", user, "totp", false, policy, now);
    assert.deepEqual(third[0].payload, { factor: "totp", locked_until: "2026-01-01T00:01:00.000Z" });
    assert.deepEqual(factorCheckEvents("u1", user, "otp_email", false, policy, now)[0].payload, {
      factor: "otp_email",
    });
    assert.deepEqual(
      factorCheckEvents("u1", user, "totp", true, policy, now).map((e) => [e.type, e.payload]),
      [[UserEvent.factorCheckSucceeded, { factor: "totp" }]],
    );
    assert.deepEqual(factorCheckEvents("u1", user, "otp_sms", true, policy, now), []);
    // permanent: the factor's failure that reaches the maximum locks the user
    assert.deepEqual(
      factorCheckEvents("u1", user, "totp", false, { maxPasswordAttempts: 3, lockout: "permanent" }).map(
        (e) => e.type,
      ),
      [UserEvent.factorCheckFailed, UserEvent.locked],
    );
  });

  it("folds a session until it is terminated", () => {
    const added = event(SessionEvent.added, { user_id: "u1", org_id: "org1", token_hash: "h" }, SESSION);
    assert.deepEqual(
      { ...foldSession([added]), changeDate: undefined },
      {
        exists: true,
        userId: "u1",
        orgId: "org1",
        tokenHash: "h",
        sequence: added.sequence,
        changeDate: undefined,
        challenges: {},
      },
    );
    assert.equal(foldSession([added, event(SessionEvent.terminated, null, SESSION)]).exists, false);
  });

  it("keeps the last challenge of each type until a passed check consumes it or five wrong answers", () => {
    const added = event(SessionEvent.added, { user_id: "u1", org_id: "org1", token_hash: "h" }, SESSION);
    const challenge = (type: string, code: string) =>
      event(SessionEvent.challengeAdded, { type, code_hash: code }, SESSION);
    const wrong = (type: string) => event(SessionEvent.challengeCheckFailed, { type }, SESSION);
    const both = foldSession([
      added,
      challenge("otp_email", "a"),
      challenge("otp_email", "b"),
      challenge("otp_sms", "c"),
    ]);
    assert.deepEqual(both.challenges.otp_email?.payload, { code_hash: "b" });
    assert.deepEqual(both.challenges.otp_sms?.payload, { code_hash: "c" });
    const four = [added, challenge("otp_email", "a"), ...Array.from({ length: 4 }, () => wrong("otp_email"))];
    assert.equal(foldSession(four).challenges.otp_email?.failedAttempts, 4);
    assert.equal(foldSession([...four, wrong("otp_email")]).challenges.otp_email, undefined);
    const checked = event(SessionEvent.otpEmailChecked, null, SESSION);
    assert.equal(foldSession([added, challenge("otp_email", "a"), checked]).challenges.otp_email, undefined);
  });
});

describe("session commands without the API layer (as the login UI calls them)", () => {
  let platform: TestPlatform;
  before(async () => {
    platform = await startPlatform();
  });
  after(() => platform.stop());

  it("creates, checks and terminates a session", async () => {
    const { instanceId } = platform.bootstrapResult!;
    const actor = { instanceId, creator: "login-ui" };
    const policy = { maxPasswordAttempts: 10 };
    const user = await findUser(platform.db, instanceId, { loginName: "ADMIN@platform.localhost" });
    assert.equal(user.id, platform.bootstrapResult!.adminUserId);
    const created = await createSession(platform.eventStore, actor, { user }, policy);
    await assert.rejects(
      checkSession(platform.eventStore, actor, { sessionId: created.sessionId, token: "nope" }, policy),
      /session token is invalid/,
    );
    await assert.rejects(
      checkSession(
        platform.eventStore,
        actor,
        { sessionId: created.sessionId, token: created.token, password: "wrong" },
        policy,
      ),
      /password is wrong/,
    );
    const checked = await checkSession(
      platform.eventStore,
      actor,
      { sessionId: created.sessionId, token: created.token, password: ADMIN_PASSWORD },
      policy,
    );
    assert.equal(checked.sequence, created.sequence + 1);
    const [row] = await platform.db.query<{ password_checked_at: Date | null; creator: string }>(
      "SELECT password_checked_at, creator FROM sessions WHERE id = $1",
      [created.sessionId],
    );
    assert.ok(row.password_checked_at);
    assert.equal(row.creator, "login-ui");
    await terminateSession(platform.eventStore, actor, {
      sessionId: created.sessionId,
      token: created.token,
    });
    assert.equal(
      (await platform.db.query("SELECT 1 FROM sessions WHERE id = $1", [created.sessionId])).length,
      0,
    );
    await assert.rejects(
      findUser(platform.db, instanceId, { loginName: "admin@elsewhere.localhost" }),
      /user not found/,
    );
  });
});
