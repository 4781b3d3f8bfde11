import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import {
  ADMIN_PASSWORD,
  addMachineUser,
  addOrg,
  eventCount,
  grpcCall,
  type Json,
  type RestReply,
  restClient,
  startPlatform,
  type TestPlatform,
} from "../../../test/helpers.ts";
import { hashPassword } from "../../crypto/password.ts";
import { SESSION } from "../../domain/session/events.ts";
import { addHumanEvent } from "../../domain/user/commands.ts";
import { USER, UserEvent, UserState } from "../../domain/user/events.ts";
import { PlatformSessions } from "../../gen/platform/resources/session/v3alpha/session_service_pb.ts";
import { newId } from "../../id.ts";

const BASE = "/resources/v3alpha/sessions";
const USERS = "/resources/v3alpha/users";

/** A human user with a password, created through events (the users API is written in parallel). */
async function addHuman(platform: TestPlatform, username: string, password: string): Promise<string> {
  const userId = newId();
  const orgId = platform.bootstrapResult!.orgId;
  const event = addHumanEvent(userId, orgId, {
    username,
    profile: { given_name: "Test", family_name: username, display_name: `Test ${username}` },
    email: { address: `${username}@example.com`, is_verified: true },
    password_hash: await hashPassword(password),
  });
  await platform.eventStore.push(
    { instanceId: platform.bootstrapResult!.instanceId, creator: "test" },
    async () => [event],
  );
  return userId;
}

async function userState(platform: TestPlatform, userId: string): Promise<number> {
  const rows = await platform.db.query<{ state: number }>("SELECT state FROM users WHERE id = $1", [userId]);
  return Number(rows[0].state);
}

async function eventsOfType(platform: TestPlatform, userId: string, type: string): Promise<number> {
  const rows = await platform.db.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM events WHERE aggregate_type = $1 AND aggregate_id = $2 AND event_type = $3",
    [USER, userId, type],
  );
  return Number(rows[0].n);
}

// The permanent lockout of these tests is an explicit setting; the default (temporary) is ./password.test.ts.
describe("sessions", () => {
  let platform: TestPlatform;
  const texts: string[] = [];
  const rest = restClient(
    () => platform,
    undefined,
    (reply) => texts.push(reply.text),
  );
  let owner: string; // IAM_OWNER
  let orgManager: string; // ORG_USER_MANAGER of the default org
  let otherManager: { userId: string; token: string }; // ORG_USER_MANAGER of another org
  let nobody: { userId: string; token: string }; // no role
  let viewer: { userId: string; token: string }; // ORG_OWNER_VIEWER of the default org (reads, no writes)
  let orgId: string;
  let adminId: string;

  const createSession = (checks: unknown, token: string | null = owner) =>
    rest("POST", BASE, { token, json: { checks } });

  before(async () => {
    platform = await startPlatform({ listen: true, env: { PLATFORM_PASSWORD_LOCKOUT: "permanent" } });
    orgId = platform.bootstrapResult!.orgId;
    adminId = platform.bootstrapResult!.adminUserId;
    ({ token: owner } = await addMachineUser(platform, {
      username: "owner",
      membership: { contextType: "instance", roles: ["IAM_OWNER"] },
    }));
    ({ token: orgManager } = await addMachineUser(platform, {
      username: "org-manager",
      membership: { contextType: "org", roles: ["ORG_USER_MANAGER"] },
    }));
    const otherOrg = await addOrg(platform, "Other Org");
    otherManager = await addMachineUser(platform, {
      username: "other-manager",
      orgId: otherOrg,
      membership: { contextType: "org", contextId: otherOrg, roles: ["ORG_USER_MANAGER"] },
    });
    nobody = await addMachineUser(platform, { username: "nobody" });
    viewer = await addMachineUser(platform, {
      username: "org-viewer",
      membership: { contextType: "org", roles: ["ORG_OWNER_VIEWER"] },
    });
  });
  after(() => platform.stop());

  it("creates by login name, domain login name and user ID; gets, patches, searches and deletes", async () => {
    const startedAt = new Date(Date.now() - 1000).toISOString();
    const byName = await createSession({ user: { login_name: "admin" } });
    assert.equal(byName.status, 201, byName.text);
    assert.deepEqual(Object.keys(byName.json).sort(), ["details", "session_token"]);
    assert.match(byName.json.session_token, /^[\w-]{43}$/);
    assert.deepEqual(byName.json.details.resource_owner, { type: "OWNER_TYPE_ORG", id: orgId });
    assert.equal(byName.json.details.sequence, "2");

    const byDomain = await createSession({ user: { loginName: "Admin@Platform.LOCALHOST" } });
    assert.equal(byDomain.status, 201, byDomain.text);
    const byId = await createSession({ user: { user_id: adminId } });
    assert.equal(byId.status, 201, byId.text);
    // With the password right away.
    const withPassword = await createSession({
      user: { login_name: "admin@platform.localhost" },
      password: { password: ADMIN_PASSWORD },
    });
    assert.equal(withPassword.status, 201, withPassword.text);

    // Get: the user and the factors with their times, no token.
    const got = await rest("GET", `${BASE}/${byName.json.details.id}`, { token: owner });
    assert.equal(got.status, 200, got.text);
    const session = got.json.session.session;
    assert.equal(session.id, byName.json.details.id);
    assert.deepEqual(session.user, {
      id: adminId,
      login_name: "admin@platform.localhost",
      display_name: session.user.display_name,
      org_id: orgId,
    });
    assert.ok(session.user.display_name.length > 0);
    assert.ok(Date.parse(session.factors.user.verified_at) >= Date.parse(startedAt));
    assert.equal(session.factors.password, undefined, "no password check yet");
    assert.equal(got.json.session.details.sequence, byName.json.details.sequence);
    const withPw = await rest("GET", `${BASE}/${withPassword.json.details.id}`, { token: owner });
    assert.ok(withPw.json.session.session.factors.password.verified_at);

    // Patch: add the password check, proven by the session token.
    const patched = await rest("PATCH", `${BASE}/${byName.json.details.id}`, {
      token: owner,
      json: { session_token: byName.json.session_token, checks: { password: { password: ADMIN_PASSWORD } } },
    });
    assert.equal(patched.status, 200, patched.text);
    assert.equal(patched.json.details.sequence, "3");
    const afterPatch = await rest("GET", `${BASE}/${byName.json.details.id}`, { token: owner });
    const factors = afterPatch.json.session.session.factors;
    assert.ok(Date.parse(factors.password.verified_at) >= Date.parse(factors.user.verified_at));
    assert.equal(afterPatch.json.session.details.sequence, "3");

    // A patch with no checks changes nothing and succeeds; renewing the user check works.
    const noChange = await rest("PATCH", `${BASE}/${byName.json.details.id}`, {
      token: owner,
      json: { session_token: byName.json.session_token },
    });
    assert.equal(noChange.status, 200, noChange.text);
    assert.equal(noChange.json.details.sequence, "3");
    const recheck = await rest("PATCH", `${BASE}/${byName.json.details.id}`, {
      token: owner,
      json: { session_token: byName.json.session_token, checks: { user: { login_name: "admin" } } },
    });
    assert.equal(recheck.status, 200, recheck.text);
    assert.equal(recheck.json.details.sequence, "4");

    // Search: by user, newest first by default, and by creation date.
    const ids = [byName, byDomain, byId, withPassword].map((s) => s.json.details.id);
    const found = await rest("POST", `${BASE}/_search`, {
      token: owner,
      json: [{ user_id: { user_id: adminId } }],
    });
    assert.equal(found.status, 200, found.text);
    assert.deepEqual(
      found.json.result.map((r: Json) => r.session.id),
      [...ids].reverse(),
    );
    assert.equal(found.json.details.total_result, "4");
    assert.equal(found.json.details.applied_limit, 100);
    assert.equal(found.json.details.end_of_list, true);
    assert.equal(found.json.sorting_column, "SESSION_FIELD_NAME_UNSPECIFIED");
    const asc = await rest("POST", `${BASE}/_search?query.asc=true&query.limit=2`, {
      token: owner,
      json: [{ user_id: { user_id: adminId } }],
    });
    assert.deepEqual(
      asc.json.result.map((r: Json) => r.session.id),
      ids.slice(0, 2),
    );
    assert.equal(asc.json.details.end_of_list, false);
    const createdAt = found.json.result.at(-1).session.creation_date; // the oldest
    const exact = await rest("POST", `${BASE}/_search`, {
      token: owner,
      json: [{ creation_date: { creation_date: createdAt } }],
    });
    assert.deepEqual(
      exact.json.result.map((r: Json) => r.session.id),
      [ids[0]],
    );
    const newer = await rest("POST", `${BASE}/_search`, {
      token: owner,
      json: [
        { user_id: { user_id: adminId } },
        { creation_date: { creation_date: createdAt, method: "TIMESTAMP_Filter_METHOD_GREATER" } },
      ],
    });
    assert.deepEqual(
      newer.json.result.map((r: Json) => r.session.id),
      ids.slice(1).reverse(),
    );
    const byIds = await rest("POST", `${BASE}/_search?sorting_column=SESSION_FIELD_NAME_ID&query.asc=true`, {
      token: owner,
      json: [{ in_ids: { ids: [ids[2], ids[0]] } }],
    });
    assert.deepEqual(
      byIds.json.result.map((r: Json) => r.session.id),
      [ids[0], ids[2]].sort(),
    );

    // Delete: with session.delete, and with the session's own token by a caller without permission.
    const before = await eventCount(platform);
    const hidden = await rest("DELETE", `${BASE}/${ids[1]}`, { token: nobody.token });
    assert.equal(hidden.status, 404, "a session the caller may not read is unknown to it");
    const denied = await rest("DELETE", `${BASE}/${ids[1]}`, { token: viewer.token });
    assert.equal(denied.status, 403, denied.text);
    assert.equal(denied.json.message, "permission denied: session.delete is required");
    const wrongToken = await rest("DELETE", `${BASE}/${ids[1]}?session_token=${byName.json.session_token}`, {
      token: nobody.token,
    });
    assert.equal(wrongToken.status, 403, wrongToken.text);
    assert.deepEqual(wrongToken.json, { code: 7, message: "session token is invalid", details: [] });
    assert.equal(await eventCount(platform), before);

    const deleted = await rest("DELETE", `${BASE}/${ids[0]}`, { token: owner });
    assert.equal(deleted.status, 200, deleted.text);
    assert.equal(deleted.json.details.id, ids[0]);
    assert.equal(deleted.json.details.sequence, "5");
    const byToken = await rest(
      "DELETE",
      `${BASE}/${ids[1]}?session_token=${encodeURIComponent(byDomain.json.session_token)}`,
      { token: nobody.token },
    );
    assert.equal(byToken.status, 200, byToken.text);
    for (const id of ids.slice(0, 2)) {
      const gone = await rest("GET", `${BASE}/${id}`, { token: owner });
      assert.equal(gone.status, 404);
      assert.deepEqual(gone.json, { code: 5, message: "session not found", details: [] });
      assert.equal((await rest("DELETE", `${BASE}/${id}`, { token: owner })).status, 404);
      const patchGone = await rest("PATCH", `${BASE}/${id}`, {
        token: owner,
        json: { session_token: byName.json.session_token },
      });
      assert.equal(patchGone.status, 404);
    }
    const remaining = await rest("POST", `${BASE}/_search`, {
      token: owner,
      json: [{ user_id: { user_id: adminId } }],
    });
    assert.deepEqual(
      remaining.json.result.map((r: Json) => r.session.id),
      [ids[3], ids[2]],
    );
  });

  it("gRPC gives the same answers", async () => {
    const client = createClient(PlatformSessions, createGrpcTransport({ baseUrl: platform.url }));
    const headers = { authorization: `Bearer ${owner}` };
    const created = await client.createSession(
      { session: { checks: { user: { search: { case: "loginName", value: "admin" } } } } },
      { headers },
    );
    assert.ok(created.sessionToken);
    const got = await client.getSession({ id: created.details!.id }, { headers });
    assert.equal(got.session?.session?.user?.loginName, "admin@platform.localhost");
    await assert.rejects(
      client.patchSession(
        { id: created.details!.id, session: { sessionToken: "wrong", checks: {} } },
        { headers },
      ),
      (e) => e instanceof ConnectError && e.code === Code.PermissionDenied,
    );
    await client.deleteSession({ id: created.details!.id, sessionToken: created.sessionToken }, { headers });
  });

  it("a patch adds the checks it gives and keeps the session's other factors (REST and gRPC)", async () => {
    const created = await createSession({ user: { login_name: "admin" } });
    const id = created.json.details.id;
    const token = created.json.session_token;
    const read = async () => (await rest("GET", `${BASE}/${id}`, { token: owner })).json.session.session;
    const initial = await read();
    await grpcCall(platform, owner, PlatformSessions, "PatchSession", {
      id,
      session: { session_token: token, checks: { password: { password: ADMIN_PASSWORD } } },
    });
    const withPassword = await read();
    assert.deepEqual(withPassword.factors.user, initial.factors.user, "the user check stays as it was");
    assert.ok(withPassword.factors.password.verified_at);
    assert.deepEqual(
      { ...withPassword, factors: undefined, change_date: undefined },
      { ...initial, factors: undefined, change_date: undefined },
    );
    // Checks absent: nothing changes, over either protocol.
    const count = await eventCount(platform);
    await grpcCall(platform, owner, PlatformSessions, "PatchSession", {
      id,
      session: { session_token: token },
    });
    const reply = await rest("PATCH", `${BASE}/${id}`, {
      token: owner,
      json: { session_token: token, checks: {} },
    });
    assert.equal(reply.status, 200, reply.text);
    assert.equal(await eventCount(platform), count);
    assert.deepEqual(await read(), withPassword);
  });

  it("the user's organization decides the permissions", async () => {
    const before = await eventCount(platform);
    // No session.write anywhere: 403 before the user is even looked up.
    let answer = await createSession({ user: { login_name: "no-such-user" } }, nobody.token);
    assert.equal(answer.status, 403, answer.text);
    assert.equal(answer.json.message, "permission denied: session.write is required");
    answer = await createSession({ user: { login_name: "admin" } }, nobody.token);
    assert.equal(answer.status, 403);
    // session.write in another organization only: a user it may not read is unknown to it.
    answer = await createSession({ user: { login_name: "admin" } }, otherManager.token);
    assert.equal(answer.status, 404, answer.text);
    assert.deepEqual(answer.json, { code: 5, message: "user not found", details: [] });
    // user.read without session.write in the user's organization: 403.
    answer = await createSession({ user: { login_name: "admin" } }, viewer.token);
    assert.equal(answer.status, 403, answer.text);
    assert.equal(answer.json.message, "permission denied: session.write is required");
    answer = await createSession({ user: { login_name: "admin" } }, null);
    assert.equal(answer.status, 401);
    // Unknown users.
    answer = await createSession({ user: { login_name: "no-such-user" } });
    assert.equal(answer.status, 404);
    assert.deepEqual(answer.json, { code: 5, message: "user not found", details: [] });
    answer = await createSession({ user: { login_name: "admin@other-org.localhost" } });
    assert.equal(answer.status, 404, "the domain must be the user's organization's");
    answer = await createSession({ user: { user_id: "12345" } });
    assert.equal(answer.status, 404);
    assert.equal(await eventCount(platform), before);

    // ORG_USER_MANAGER of the user's org may create, patch, read and delete.
    const created = await createSession({ user: { login_name: "admin" } }, orgManager);
    assert.equal(created.status, 201, created.text);
    const id = created.json.details.id;
    assert.equal((await rest("GET", `${BASE}/${id}`, { token: orgManager })).status, 200);
    // The other org's manager can neither read, patch nor delete it, nor find it: to it the session
    // does not exist (404, as an unknown ID).
    const foreign = await rest("GET", `${BASE}/${id}`, { token: otherManager.token });
    assert.equal(foreign.status, 404, foreign.text);
    assert.deepEqual(foreign.json, { code: 5, message: "session not found", details: [] });
    const patch = await rest("PATCH", `${BASE}/${id}`, {
      token: otherManager.token,
      json: { session_token: created.json.session_token, checks: { user: { login_name: "admin" } } },
    });
    assert.equal(patch.status, 404, patch.text);
    assert.equal((await rest("DELETE", `${BASE}/${id}`, { token: otherManager.token })).status, 404);
    // A caller that may read the session but not write it: 403.
    assert.equal((await rest("GET", `${BASE}/${id}`, { token: viewer.token })).status, 200);
    const readOnlyPatch = await rest("PATCH", `${BASE}/${id}`, {
      token: viewer.token,
      json: { session_token: created.json.session_token, checks: { user: { login_name: "admin" } } },
    });
    assert.equal(readOnlyPatch.status, 403, readOnlyPatch.text);
    assert.equal((await rest("DELETE", `${BASE}/${id}`, { token: viewer.token })).status, 403);
    const search = await rest("POST", `${BASE}/_search`, { token: otherManager.token });
    assert.equal(search.status, 200);
    assert.deepEqual(search.json.result, []);
    assert.equal(search.json.details.total_result, "0");
    assert.equal((await rest("GET", `${BASE}/12345`, { token: owner })).status, 404);

    // A caller sees its own sessions (as their user) without session.read.
    const ownSession = await createSession({ user: { user_id: nobody.userId } });
    assert.equal(ownSession.status, 201, ownSession.text);
    const own = await rest("POST", `${BASE}/_search`, { token: nobody.token });
    assert.deepEqual(
      own.json.result.map((r: Json) => r.session.id),
      [ownSession.json.details.id],
    );
    assert.equal(
      (await rest("GET", `${BASE}/${ownSession.json.details.id}`, { token: nobody.token })).status,
      200,
    );
    // An org context narrows the search to the organization's users.
    const unknownOrg = await rest("POST", `${BASE}/_search?ctx.org_id=12345`, { token: owner });
    assert.equal(unknownOrg.status, 404, unknownOrg.text);
    const inOrg = await rest("POST", `${BASE}/_search?ctx.org_id=${orgId}`, { token: owner });
    assert.ok(inOrg.json.result.length >= 2);
    assert.ok(inOrg.json.result.every((r: Json) => r.details.resource_owner.id === orgId));

    // The user of a session cannot change; the token is checked before anything else.
    const before2 = await eventCount(platform);
    const change = await rest("PATCH", `${BASE}/${id}`, {
      token: owner,
      json: { session_token: created.json.session_token, checks: { user: { user_id: nobody.userId } } },
    });
    assert.equal(change.status, 400);
    assert.deepEqual(change.json, {
      code: 9,
      message: "the user of a session cannot be changed",
      details: [],
    });
    const wrong = await rest("PATCH", `${BASE}/${id}`, {
      token: owner,
      json: { session_token: "x".repeat(43), checks: { password: { password: "wrong-password" } } },
    });
    assert.equal(wrong.status, 403);
    assert.deepEqual(wrong.json, { code: 7, message: "session token is invalid", details: [] });
    assert.equal(await eventCount(platform), before2, "a wrong token counts no password attempt");
  });

  it("rejects bad input naming the field, storing nothing", async () => {
    const before = await eventCount(platform);
    const cases: [unknown, number, RegExp][] = [
      [undefined, 400, /^session: is required$/],
      [{}, 400, /^session\.checks: is required$/],
      [{ checks: {} }, 400, /^session\.checks\.user: is required$/],
      [{ checks: { user: {} } }, 400, /^session\.checks\.user\.search: /],
      [{ checks: { user: { login_name: "" } } }, 400, /^session\.checks\.user\.login_name: /],
      [{ checks: { user: { login_name: "a".repeat(501) } } }, 400, /^session\.checks\.user\.login_name: /],
      [{ checks: { user: { user_id: "1".repeat(201) } } }, 400, /^session\.checks\.user\.user_id: /],
      [
        { checks: { user: { user_id: 5 } } },
        400,
        /^session\.checks\.user\.user_id: invalid value: expected string, got 5$/,
      ],
      [{ checks: { user: { user_id: "1", login_name: "admin" } } }, 400, /user_id|login_name|oneof/],
      [
        { checks: { user: { login_name: "admin" }, password: {} } },
        400,
        /^session\.checks\.password\.password: is required$/,
      ],
      [
        { checks: { user: { login_name: "admin" }, password: { password: "p".repeat(1001) } } },
        400,
        /^session\.checks\.password\.password: /,
      ],
      [
        { checks: { user: { login_name: "admin" }, password: { password: 12 } } },
        400,
        /^session\.checks\.password\.password: invalid value: expected string, got 12$/,
      ],
      [{ checks: { user: { login_name: "admin" } }, unknown: 1 }, 400, /unknown/],
    ];
    for (const [body, status, message] of cases) {
      const answer = await rest("POST", BASE, { token: owner, json: body });
      assert.equal(answer.status, status, `${JSON.stringify(body)}: ${answer.text}`);
      assert.equal(answer.json.code, 3, answer.text);
      assert.match(answer.json.message, message, JSON.stringify(body));
    }
    // Patch without a token.
    const patch = await rest("PATCH", `${BASE}/1`, { token: owner, json: { checks: {} } });
    assert.equal(patch.status, 400);
    assert.equal(patch.json.message, "session.session_token: is required");
    // Path id too long.
    const long = await rest("GET", `${BASE}/${"1".repeat(201)}`, { token: owner });
    assert.equal(long.status, 400);
    assert.match(long.json.message, /^id: /);
    assert.equal(await eventCount(platform), before);

    // Search limits: 1000 accepted, 1001 rejected; filters validated.
    assert.equal((await rest("POST", `${BASE}/_search?query.limit=1000`, { token: owner })).status, 200);
    const tooMany = await rest("POST", `${BASE}/_search?query.limit=1001`, { token: owner });
    assert.equal(tooMany.status, 400);
    assert.deepEqual(tooMany.json, { code: 3, message: "query.limit: must be at most 1000", details: [] });
    const emptyFilter = await rest("POST", `${BASE}/_search`, { token: owner, json: [{}] });
    assert.equal(emptyFilter.status, 400);
    assert.match(emptyFilter.json.message, /^filters\[0\]\.filter: /);
    const noUser = await rest("POST", `${BASE}/_search`, { token: owner, json: [{ user_id: {} }] });
    assert.match(noUser.json.message, /^filters\[0\]\.user_id\.user_id: is required$/);
    const badMethod = await rest("POST", `${BASE}/_search`, {
      token: owner,
      json: [{ creation_date: { creation_date: "2024-01-01T00:00:00Z", method: 9 } }],
    });
    assert.equal(badMethod.status, 400);
    assert.match(badMethod.json.message, /^filters\[0\]\.creation_date\.method: /);
  });

  it("PLATFORM_PASSWORD_LOCKOUT=permanent locks a user at the 10th wrong password; unlocking lets the right password pass again", async () => {
    const password = "Correct-Horse-1!";
    const userId = await addHuman(platform, "lockme", password);
    const check = (pw: string) =>
      createSession({ user: { login_name: "lockme" }, password: { password: pw } });

    // A right password with no failure before records nothing on the user (only the session's events).
    assert.equal((await check(password)).status, 201);
    assert.equal(await eventsOfType(platform, userId, UserEvent.passwordCheckSucceeded), 0);
    // A wrong one, then a right one: the success is recorded because it resets the count.
    assert.equal((await check("wrong-0")).status, 400);
    assert.equal((await check(password)).status, 201);
    assert.equal(await eventsOfType(platform, userId, UserEvent.passwordCheckSucceeded), 1);
    for (let i = 1; i <= 9; i++) {
      const before = await eventCount(platform);
      const wrong = await check(`wrong-${i}`);
      assert.equal(wrong.status, 400);
      assert.deepEqual(wrong.json, { code: 3, message: "password is wrong", details: [] });
      assert.equal(await eventCount(platform), before + 1, "only the failed check is stored, no session");
      assert.equal(await userState(platform, userId), UserState.active);
    }
    assert.equal(await eventsOfType(platform, userId, UserEvent.passwordCheckFailed), 10);
    const sessionsBefore = await platform.db.query("SELECT id FROM sessions WHERE user_id = $1", [userId]);
    assert.equal(sessionsBefore.length, 2, "only the sessions of the right passwords");

    // The 10th wrong password locks.
    const tenth = await check("wrong-10");
    assert.equal(tenth.status, 400);
    assert.equal(tenth.json.message, "password is wrong");
    assert.equal(await userState(platform, userId), UserState.locked);
    assert.equal(await eventsOfType(platform, userId, UserEvent.locked), 1);

    // Locked: even the right password fails, and nothing is stored.
    const before = await eventCount(platform);
    const locked = await check(password);
    assert.equal(locked.status, 400);
    assert.deepEqual(locked.json, { code: 9, message: "user is locked", details: [] });
    const userOnly = await createSession({ user: { user_id: userId } });
    assert.equal(userOnly.json.message, "user is locked");
    assert.equal(await eventCount(platform), before);
    assert.deepEqual(
      await platform.db.query("SELECT id FROM sessions WHERE user_id = $1", [userId]),
      sessionsBefore,
    );

    // The users API shows the lock; its `_unlock` (POST /resources/v3alpha/users/{id}/_unlock) restores
    // login. It needs user.write in the user's organization.
    const user = await rest("GET", `${USERS}/${userId}`, { token: owner });
    assert.equal(user.json.user.state, "USER_STATE_LOCKED");
    const beforeUnlock = await eventCount(platform);
    const notAllowed = await rest("POST", `${USERS}/${userId}/_unlock`, { token: viewer.token });
    assert.equal(notAllowed.status, 403, notAllowed.text);
    assert.equal(await eventCount(platform), beforeUnlock);
    assert.equal(await userState(platform, userId), UserState.locked);
    const unlocked = await rest("POST", `${USERS}/${userId}/_unlock`, { token: owner });
    assert.equal(unlocked.status, 200, unlocked.text);
    assert.equal(await eventsOfType(platform, userId, UserEvent.unlocked), 1);
    assert.equal(await userState(platform, userId), UserState.active);
    assert.equal(
      (await rest("GET", `${USERS}/${userId}`, { token: owner })).json.user.state,
      "USER_STATE_ACTIVE",
    );
    const passed = await check(password);
    assert.equal(passed.status, 201, passed.text);
    // The count restarted: one wrong password does not lock.
    assert.equal((await check("wrong-again")).status, 400);
    assert.equal(await userState(platform, userId), UserState.active);

    // Wrong passwords through PATCH count too, and leave the session unchanged.
    const session = await rest("GET", `${BASE}/${passed.json.details.id}`, { token: owner });
    const patched = await rest("PATCH", `${BASE}/${passed.json.details.id}`, {
      token: owner,
      json: { session_token: passed.json.session_token, checks: { password: { password: "nope" } } },
    });
    assert.equal(patched.status, 400);
    assert.equal(patched.json.message, "password is wrong");
    assert.equal(await eventsOfType(platform, userId, UserEvent.passwordCheckFailed), 13);
    const answer = ({ status, json, text }: RestReply) => ({ status, json, text });
    assert.deepEqual(answer(await rest("GET", `${BASE}/${passed.json.details.id}`, { token: owner })), {
      ...answer(session),
    });

    // Inactive users cannot pass checks; machine users have no password.
    assert.equal((await rest("POST", `${USERS}/${userId}/_deactivate`, { token: owner })).status, 200);
    const inactive = await check(password);
    assert.deepEqual(inactive.json, { code: 9, message: "user is inactive", details: [] });
    const machine = await createSession({ user: { user_id: nobody.userId }, password: { password: "x" } });
    assert.equal(machine.status, 400);
    assert.deepEqual(machine.json, { code: 9, message: "machine users have no password", details: [] });
  });

  it("counts concurrent wrong passwords exactly (optimistic lock on the user)", async () => {
    const userId = await addHuman(platform, "racer", "Racer-Password-1");
    const answers = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        createSession({ user: { login_name: "racer" }, password: { password: `wrong-${i}` } }),
      ),
    );
    const messages = answers.map((a) => a.json.message).sort();
    assert.deepEqual(messages, [...Array(10).fill("password is wrong"), "user is locked", "user is locked"]);
    assert.equal(await eventsOfType(platform, userId, UserEvent.passwordCheckFailed), 10);
    assert.equal(await eventsOfType(platform, userId, UserEvent.locked), 1);
    assert.equal(await userState(platform, userId), UserState.locked);
  });

  it("never answers a token hash or a password", async () => {
    const hashes = await platform.db.query<{ payload: { token_hash: string } }>(
      "SELECT payload FROM events WHERE aggregate_type = $1 AND event_type = 'session.added'",
      [SESSION],
    );
    assert.ok(hashes.length > 0);
    const all = texts.join("\n");
    for (const { payload } of hashes) assert.ok(!all.includes(payload.token_hash), "no token hash");
    assert.ok(!all.includes(ADMIN_PASSWORD), "no password");
    assert.ok(!all.includes("Correct-Horse-1!"), "no password");
    assert.ok(!/\$argon2/.test(all), "no password hash");
    // Tokens appear only in the answers of CreateSession.
    const tokens = texts
      .map((t) => (t.startsWith("{") ? JSON.parse(t) : {}))
      .filter((b: Json) => b.session_token)
      .map((b: Json) => b.session_token as string);
    assert.ok(tokens.length > 0);
    for (const token of tokens) {
      assert.equal(texts.filter((t) => t.includes(token)).length, 1, "a token is answered once");
    }
  });
});

describe("sessions without lockout (PLATFORM_MAX_PASSWORD_ATTEMPTS=0)", () => {
  let platform: TestPlatform;
  const rest = restClient(() => platform);
  before(async () => {
    platform = await startPlatform({ listen: true, env: { PLATFORM_MAX_PASSWORD_ATTEMPTS: "0" } });
  });
  after(() => platform.stop());

  it("never locks", async () => {
    const { token } = await addMachineUser(platform, {
      username: "owner",
      membership: { contextType: "instance", roles: ["IAM_OWNER"] },
    });
    const userId = await addHuman(platform, "neverlocked", "Right-Password-1");
    const check = (password: string) =>
      rest("POST", BASE, {
        token,
        json: { checks: { user: { login_name: "neverlocked" }, password: { password } } },
      });
    for (let i = 0; i < 12; i++) assert.equal((await check(`wrong-${i}`)).status, 400);
    assert.equal(await eventsOfType(platform, userId, UserEvent.passwordCheckFailed), 12);
    assert.equal(await eventsOfType(platform, userId, UserEvent.locked), 0);
    assert.equal(await userState(platform, userId), UserState.active);
    assert.equal((await check("Right-Password-1")).status, 201);
  });
});
