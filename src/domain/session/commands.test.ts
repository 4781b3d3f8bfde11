import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { ADMIN_PASSWORD, startPlatform, type TestPlatform } from "../../../test/helpers.ts";
import type { StoredEvent } from "../../eventstore/types.ts";
import { USER, UserEvent, UserState } from "../user/events.ts";
import {
  checkSession,
  createSession,
  findUser,
  foldSession,
  foldUser,
  passwordCheckEvents,
  terminateSession,
} from "./commands.ts";
import { SESSION, SessionEvent } from "./events.ts";

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

  it("locks when a failure reaches the maximum; 0 never locks", () => {
    const user = { ...foldUser([human]), failedAttempts: 9 };
    const types = (max: number, attempts = 9) =>
      passwordCheckEvents("u1", { ...user, failedAttempts: attempts }, false, {
        maxPasswordAttempts: max,
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
      },
    );
    assert.equal(foldSession([added, event(SessionEvent.terminated, null, SESSION)]).exists, false);
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
