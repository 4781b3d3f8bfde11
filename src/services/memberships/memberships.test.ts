import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
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
import { addMembershipEvent } from "../../domain/membership/commands.ts";
import { ContextType } from "../../domain/membership/events.ts";
import { PlatformMemberships } from "../../gen/platform/resources/membership/v3alpha/membership_service_pb.ts";
import { newId } from "../../id.ts";

const MEMBERSHIPS = "/resources/v3alpha/memberships";

describe("memberships", () => {
  let platform: TestPlatform;
  let owner: string; // IAM_OWNER token
  let instanceId: string;
  let orgA: string;
  let orgB: string;

  const rest = restClient(
    () => platform,
    () => owner,
  );
  const member = async (username: string, orgId?: string) =>
    addMachineUser(platform, { username, orgId: orgId ?? platform.bootstrapResult!.orgId });

  before(async () => {
    platform = await startPlatform({ listen: true });
    instanceId = platform.bootstrapResult!.instanceId;
    ({ token: owner } = await addMachineUser(platform, {
      username: "owner",
      membership: { contextType: "instance", roles: ["IAM_OWNER"] },
    }));
    orgA = await addOrg(platform, "Members A");
    orgB = await addOrg(platform, "Members B");
  });
  after(() => platform.stop());

  it("create → get → patch → search → delete; the roles take effect at once", async () => {
    const { userId, token } = await member("manager", orgA);
    const someone = await member("someone", orgA);
    // Without a membership the user cannot read users of org A: they are unknown to it.
    assert.equal((await rest("GET", `/resources/v3alpha/users/${someone.userId}`, { token })).status, 404);

    const created = await rest("POST", `${MEMBERSHIPS}?ctx.org_id=${orgA}`, {
      json: { user_id: userId, roles: ["ORG_USER_MANAGER"] },
    });
    assert.equal(created.status, 201, created.text);
    const id = created.json.details.id;
    assert.deepEqual(created.json.details.resource_owner, { type: "OWNER_TYPE_ORG", id: orgA });
    assert.equal((await rest("GET", `/resources/v3alpha/users/${someone.userId}`, { token })).status, 200);

    const got = await rest("GET", `${MEMBERSHIPS}/${id}`);
    assert.equal(got.status, 200, got.text);
    assert.equal(got.json.membership.user_id, userId);
    assert.deepEqual(got.json.membership.roles, ["ORG_USER_MANAGER"]);
    assert.deepEqual(got.json.membership.context, { type: "MEMBERSHIP_CONTEXT_TYPE_ORG", id: orgA });
    assert.equal(got.json.membership.details.sequence, created.json.details.sequence);

    // Patch with no change: no event.
    const count = await eventCount(platform);
    for (const json of [{ roles: ["ORG_USER_MANAGER"] }, {}, undefined]) {
      const same = await rest("PATCH", `${MEMBERSHIPS}/${id}`, { json });
      assert.equal(same.status, 200, same.text);
      assert.equal(same.json.details.sequence, created.json.details.sequence);
    }
    assert.equal(await eventCount(platform), count);

    // Patch to a viewer role: reading still works, writing does not (the cache was dropped).
    const patched = await rest("PATCH", `${MEMBERSHIPS}/${id}`, { json: { roles: ["ORG_OWNER_VIEWER"] } });
    assert.equal(patched.status, 200, patched.text);
    assert.equal(patched.json.details.sequence, "2");
    assert.equal((await rest("GET", `/resources/v3alpha/users/${someone.userId}`, { token })).status, 200);
    assert.equal(
      (await rest("POST", `/resources/v3alpha/users/${someone.userId}/_lock`, { token })).status,
      403,
    );

    const found = await rest("POST", `${MEMBERSHIPS}/_search`, { json: [{ user: { user_id: userId } }] });
    assert.equal(found.status, 200, found.text);
    assert.deepEqual(
      found.json.result.map((m: Json) => [m.details.id, m.roles]),
      [[id, ["ORG_OWNER_VIEWER"]]],
    );
    const byRole = await rest("POST", `${MEMBERSHIPS}/_search`, {
      json: [{ role: { role: "ORG_OWNER_VIEWER" } }],
    });
    assert.deepEqual(
      byRole.json.result.map((m: Json) => m.details.id),
      [id],
    );

    const deleted = await rest("DELETE", `${MEMBERSHIPS}/${id}`);
    assert.equal(deleted.status, 200, deleted.text);
    assert.equal((await rest("GET", `${MEMBERSHIPS}/${id}`)).status, 404);
    assert.equal((await rest("DELETE", `${MEMBERSHIPS}/${id}`)).status, 404);
    assert.equal((await rest("GET", `/resources/v3alpha/users/${someone.userId}`, { token })).status, 404);
    // After removal the same user may become a member again.
    const again = await rest("POST", `${MEMBERSHIPS}?ctx.org_id=${orgA}`, {
      json: { user_id: userId, roles: ["ORG_OWNER"] },
    });
    assert.equal(again.status, 201, again.text);
  });

  it("patch replaces the roles only when given; user and context stay (REST and gRPC)", async () => {
    const { userId } = await member("presence", orgB);
    const created = await rest("POST", `${MEMBERSHIPS}?ctx.org_id=${orgB}`, {
      json: { user_id: userId, roles: ["ORG_USER_MANAGER", "ORG_PROJECT_CREATOR"] },
    });
    const id = created.json.details.id;
    /** The membership without its details (its sequence changes with every patch). */
    const read = async () => ({
      ...(await rest("GET", `${MEMBERSHIPS}/${id}`)).json.membership,
      details: undefined,
    });
    const initial = await read();
    assert.equal(
      (await rest("PATCH", `${MEMBERSHIPS}/${id}`, { json: { roles: ["ORG_OWNER_VIEWER"] } })).status,
      200,
    );
    assert.deepEqual(await read(), { ...initial, roles: ["ORG_OWNER_VIEWER"] });
    const grpc = (request: Json) =>
      grpcCall(platform, owner, PlatformMemberships, "PatchMembership", { id, ...request });
    await grpc({ membership: { roles: [] } });
    assert.deepEqual(
      await read(),
      { ...initial, roles: ["ORG_OWNER_VIEWER"] },
      "an empty list is absent in binary",
    );
    await grpc({ membership: { roles: ["ORG_OWNER"] } });
    assert.deepEqual(await read(), { ...initial, roles: ["ORG_OWNER"] });
    const emptied = "membership.roles: must not be empty; delete the membership to take all its roles away";
    const count = await eventCount(platform);
    const reply = await rest("PATCH", `${MEMBERSHIPS}/${id}`, { json: { roles: [] } });
    assert.equal(reply.status, 400, reply.text);
    assert.equal(reply.json.message, emptied);
    await assert.rejects(
      grpc({ update_mask: "roles" }),
      (e) => e instanceof ConnectError && e.code === Code.InvalidArgument && e.rawMessage === emptied,
    );
    assert.equal(await eventCount(platform), count);
    assert.deepEqual(await read(), { ...initial, roles: ["ORG_OWNER"] });
  });

  it("a second membership of the same user in the same context is 409 ALREADY_EXISTS", async () => {
    const { userId } = await member("twice");
    const first = await rest("POST", MEMBERSHIPS, { json: { user_id: userId, roles: ["IAM_OWNER_VIEWER"] } });
    assert.equal(first.status, 201, first.text);
    assert.deepEqual(first.json.details.resource_owner, { type: "OWNER_TYPE_INSTANCE", id: instanceId });
    const before = await eventCount(platform);
    const second = await rest("POST", MEMBERSHIPS, { json: { user_id: userId, roles: ["IAM_OWNER"] } });
    assert.equal(second.status, 409, second.text);
    assert.equal(second.json.code, 6);
    assert.equal(await eventCount(platform), before);
    // Another context is another membership.
    const inOrg = await rest("POST", `${MEMBERSHIPS}?ctx.org_id=${orgB}`, {
      json: { user_id: userId, roles: ["ORG_OWNER"] },
    });
    assert.equal(inOrg.status, 201, inOrg.text);
  });

  it("roles are validated against the context; available roles per context", async () => {
    const roles = async (query: string) => {
      const r = await rest("GET", `${MEMBERSHIPS}/roles${query}`);
      assert.equal(r.status, 200, r.text);
      return r.json.roles;
    };
    assert.deepEqual(await roles(""), [
      "IAM_OWNER",
      "IAM_OWNER_VIEWER",
      "IAM_ORG_MANAGER",
      "IAM_USER_MANAGER",
      "IAM_END_USER_IMPERSONATOR",
    ]);
    assert.deepEqual(await roles(`?ctx.org_id=${orgA}`), [
      "ORG_OWNER",
      "ORG_OWNER_VIEWER",
      "ORG_USER_MANAGER",
      "ORG_PROJECT_CREATOR",
      "ORG_END_USER_IMPERSONATOR",
    ]);
    const [project] = await platform.db.query<{ id: string }>("SELECT id FROM projects LIMIT 1");
    assert.deepEqual(await roles(`?project_id=${project.id}`), ["PROJECT_OWNER", "PROJECT_OWNER_VIEWER"]);
    assert.equal((await rest("GET", `${MEMBERSHIPS}/roles?project_id=${newId()}`)).status, 404);
    assert.equal((await rest("GET", `${MEMBERSHIPS}/roles?ctx.org_id=${newId()}`)).status, 404);

    const { userId } = await member("roles");
    const before = await eventCount(platform);
    const cases: Array<[string, unknown, RegExp]> = [
      [
        "",
        { user_id: userId, roles: ["ORG_OWNER"] },
        /^membership\.roles\[0\]: "ORG_OWNER" is not a role of instance/,
      ],
      [
        `?ctx.org_id=${orgA}`,
        { user_id: userId, roles: ["ORG_OWNER", "IAM_OWNER"] },
        /^membership\.roles\[1\]: "IAM_OWNER" is not a role/,
      ],
      ["", { user_id: userId, roles: [] }, /^membership\.roles: is required$/],
      ["", { user_id: userId }, /^membership\.roles: is required$/],
      ["", { user_id: "", roles: ["IAM_OWNER"] }, /^membership\.user_id: is required$/],
      [
        "",
        { user_id: "x".repeat(201), roles: ["IAM_OWNER"] },
        /^membership\.user_id: must be at most 200 characters$/,
      ],
      [
        "",
        { user_id: userId, roles: ["IAM_OWNER", "IAM_OWNER"] },
        /^membership\.roles\[1\]: must be unique$/,
      ],
      ["", { user_id: userId, roles: [""] }, /^membership\.roles\[0\]: must not be empty$/],
      [
        "",
        { user_id: userId, roles: ["R".repeat(201)] },
        /^membership\.roles\[0\]: must be at most 200 characters$/,
      ],
      ["", { user_id: userId, roles: "IAM_OWNER" }, /roles/],
      ["", { user_id: 12, roles: ["IAM_OWNER"] }, /user_id/],
      [
        "",
        { user_id: userId, roles: ["IAM_OWNER"], project_id: "" },
        /^membership\.project_id: must not be empty$/,
      ],
      ["", { user_id: userId, roles: ["IAM_OWNER"], context: 1 }, /context/],
      ["", undefined, /^membership: is required$/],
    ];
    for (const [query, json, message] of cases) {
      const r = await rest("POST", `${MEMBERSHIPS}${query}`, { json });
      assert.equal(r.status, 400, `${JSON.stringify(json)} → ${r.text}`);
      assert.equal(r.json.code, 3);
      assert.match(r.json.message, message);
    }
    const unknownEnum = await rest("POST", `${MEMBERSHIPS}/_search`, {
      json: [{ context: { type: "MEMBERSHIP_CONTEXT_TYPE_GALAXY" } }],
    });
    assert.equal(unknownEnum.status, 400);
    assert.match(unknownEnum.json.message, /^filters\[0\]\.context\.type: unknown value/);
    const unknownUser = await rest("POST", MEMBERSHIPS, { json: { user_id: newId(), roles: ["IAM_OWNER"] } });
    assert.equal(unknownUser.status, 404);
    const unknownProject = await rest("POST", MEMBERSHIPS, {
      json: { user_id: userId, roles: ["PROJECT_OWNER"], project_id: newId() },
    });
    assert.equal(unknownProject.status, 404);
    assert.equal(await eventCount(platform), before);

    // Project memberships.
    const inProject = await rest("POST", MEMBERSHIPS, {
      json: { user_id: userId, roles: ["PROJECT_OWNER"], project_id: project.id },
    });
    assert.equal(inProject.status, 201, inProject.text);
    const got = await rest("GET", `${MEMBERSHIPS}/${inProject.json.details.id}`);
    assert.deepEqual(got.json.membership.context, {
      type: "MEMBERSHIP_CONTEXT_TYPE_PROJECT",
      id: project.id,
    });
    const patch = await rest("PATCH", `${MEMBERSHIPS}/${inProject.json.details.id}`, {
      json: { roles: ["ORG_OWNER"] },
    });
    assert.equal(patch.status, 400);
    assert.match(patch.json.message, /^membership\.roles\[0\]: /);
  });

  it("permissions: membership.write in the context; searches show only readable memberships", async () => {
    const a = await addMachineUser(platform, {
      username: "org-a-owner",
      orgId: orgA,
      membership: { contextType: "org", contextId: orgA, roles: ["ORG_OWNER"] },
    });
    const target = await member("target-b", orgB);
    // ORG_OWNER of A may not add members to B nor to the instance.
    const toB = await rest("POST", `${MEMBERSHIPS}?ctx.org_id=${orgB}`, {
      json: { user_id: target.userId, roles: ["ORG_OWNER"] },
      token: a.token,
    });
    assert.equal(toB.status, 403, toB.text);
    assert.equal(
      (
        await rest("POST", MEMBERSHIPS, {
          json: { user_id: target.userId, roles: ["IAM_OWNER"] },
          token: a.token,
        })
      ).status,
      403,
    );
    const targetA = await member("target-a", orgA);
    const inA = await rest("POST", `${MEMBERSHIPS}?ctx.org_id=${orgA}`, {
      json: { user_id: targetA.userId, roles: ["ORG_OWNER_VIEWER"] },
      token: a.token,
    });
    assert.equal(inA.status, 201, inA.text);

    // A's owner reads org A memberships only (not B's, not the instance's).
    const seen = await rest("POST", `${MEMBERSHIPS}/_search`, { token: a.token });
    assert.equal(seen.status, 200, seen.text);
    assert.ok(seen.json.result.length >= 2);
    assert.ok(seen.json.result.every((m: Json) => m.details.resource_owner.id === orgA));
    assert.equal(
      (await rest("POST", `${MEMBERSHIPS}/_search?ctx.org_id=${orgB}`, { token: a.token })).json.result
        .length,
      0,
    );

    // A membership in org B is unknown to A's owner (no membership.read there): 404 for every operation
    // (IDs cannot be probed), nothing stored.
    const targetInB = await rest("POST", `${MEMBERSHIPS}?ctx.org_id=${orgB}`, {
      json: { user_id: target.userId, roles: ["ORG_OWNER_VIEWER"] },
    });
    assert.equal(targetInB.status, 201, targetInB.text);
    const beforeForeign = await eventCount(platform);
    for (const [method, json] of [
      ["GET", undefined],
      ["PATCH", { roles: ["ORG_OWNER"] }],
      ["DELETE", undefined],
    ] as const) {
      const r = await rest(method, `${MEMBERSHIPS}/${targetInB.json.details.id}`, { json, token: a.token });
      assert.equal(r.status, 404, `${method}: ${r.text}`);
      assert.deepEqual(r.json, { code: 5, message: "membership not found", details: [] });
    }
    assert.equal(await eventCount(platform), beforeForeign);

    const inB = await rest("POST", `${MEMBERSHIPS}?ctx.org_id=${orgB}`, {
      json: { user_id: a.userId, roles: ["ORG_OWNER_VIEWER"] },
    });
    assert.equal(inB.status, 201);
    // ...until the B membership (viewer) grants membership.read there: ORG_OWNER_VIEWER has it.
    const withB = await rest("POST", `${MEMBERSHIPS}/_search?ctx.org_id=${orgB}`, { token: a.token });
    assert.ok(withB.json.result.some((m: Json) => m.details.id === inB.json.details.id));
    assert.ok(withB.json.result.every((m: Json) => m.details.resource_owner.id === orgB));
    const idsInB = withB.json.result.length;
    // Readable now, but not writable: 403.
    assert.equal(
      (await rest("GET", `${MEMBERSHIPS}/${targetInB.json.details.id}`, { token: a.token })).status,
      200,
    );
    assert.equal(
      (await rest("DELETE", `${MEMBERSHIPS}/${inB.json.details.id}`, { token: a.token })).status,
      403,
    );
    assert.equal((await rest("DELETE", `${MEMBERSHIPS}/${inB.json.details.id}`)).status, 200);
    const afterRemoval = await rest("POST", `${MEMBERSHIPS}/_search?ctx.org_id=${orgB}`, { token: a.token });
    assert.equal(afterRemoval.json.result.length, 0, `${idsInB} before, none after the removal`);
    assert.equal((await rest("POST", `${MEMBERSHIPS}/_search`, { token: null })).status, 401);
  });

  it("a user the caller may not read is answered like an unknown user; readers may add other orgs' users", async () => {
    const ownerB = await addMachineUser(platform, {
      username: "probe-b-owner",
      orgId: orgB,
      membership: { contextType: "org", contextId: orgB, roles: ["ORG_OWNER"] },
    });
    const userOfA = await member("probed-a", orgA);
    // B's owner cannot read A's user: GET answers 404 ...
    assert.equal(
      (await rest("GET", `/resources/v3alpha/users/${userOfA.userId}`, { token: ownerB.token })).status,
      404,
    );
    // ... and so does CreateMembership, exactly as for an ID that exists nowhere; nothing is stored.
    const before = await eventCount(platform);
    const attempt = (userId: string) =>
      rest("POST", `${MEMBERSHIPS}?ctx.org_id=${orgB}`, {
        json: { user_id: userId, roles: ["ORG_OWNER_VIEWER"] },
        token: ownerB.token,
      });
    const unknown = await attempt(newId());
    const foreign = await attempt(userOfA.userId);
    assert.equal(unknown.status, 404, unknown.text);
    assert.deepEqual(unknown.json, { code: 5, message: "user not found", details: [] });
    assert.equal(foreign.status, unknown.status, foreign.text);
    assert.deepEqual(foreign.json, unknown.json);
    assert.equal(await eventCount(platform), before);
    // The same over gRPC.
    const client = createClient(PlatformMemberships, createGrpcTransport({ baseUrl: platform.url }));
    const grpcError = async (userId: string) => {
      try {
        await client.createMembership(
          {
            ctx: { context: { case: "orgId", value: orgB } },
            membership: { userId, roles: ["ORG_OWNER_VIEWER"] },
          },
          { headers: { authorization: `Bearer ${ownerB.token}` } },
        );
      } catch (e) {
        return e instanceof ConnectError ? [e.code, e.rawMessage] : e;
      }
      return "created";
    };
    assert.deepEqual(await grpcError(newId()), [Code.NotFound, "user not found"]);
    assert.deepEqual(await grpcError(userOfA.userId), [Code.NotFound, "user not found"]);
    // Searching by user ID tells nothing either: no membership of B for both.
    for (const userId of [newId(), userOfA.userId]) {
      const found = await rest("POST", `${MEMBERSHIPS}/_search`, {
        json: [{ user: { user_id: userId } }],
        token: ownerB.token,
      });
      assert.equal(found.status, 200, found.text);
      assert.equal(found.json.details.total_result, "0");
    }
    assert.equal(await eventCount(platform), before);

    // Cross-organization memberships are a feature for callers who may read the user: the IAM_OWNER adds
    // A's user to B; B's owner then sees that membership in its organization.
    const crossOrg = await rest("POST", `${MEMBERSHIPS}?ctx.org_id=${orgB}`, {
      json: { user_id: userOfA.userId, roles: ["ORG_OWNER"] },
    });
    assert.equal(crossOrg.status, 201, crossOrg.text);
    const seen = await rest("POST", `${MEMBERSHIPS}/_search?ctx.org_id=${orgB}`, {
      json: [{ user: { user_id: userOfA.userId } }],
      token: ownerB.token,
    });
    assert.deepEqual(
      seen.json.result.map((m: Json) => m.details.id),
      [crossOrg.json.details.id],
    );
    // A user is readable to itself: A's user, now owner of B, gets ALREADY_EXISTS for itself, not 404.
    const self = await rest("POST", `${MEMBERSHIPS}?ctx.org_id=${orgB}`, {
      json: { user_id: userOfA.userId, roles: ["ORG_OWNER_VIEWER"] },
      token: userOfA.token,
    });
    assert.equal(self.status, 409, self.text);
    // An IAM_ORG_MANAGER (user.read everywhere) may add other organizations' users too (with roles whose
    // permissions it holds: docs/permissions.md, "No control over a more privileged account").
    const manager = await addMachineUser(platform, {
      username: "probe-org-manager",
      orgId: orgB,
      membership: { contextType: "instance", roles: ["IAM_ORG_MANAGER"] },
    });
    const byManager = await rest("POST", `${MEMBERSHIPS}?ctx.org_id=${orgB}`, {
      json: { user_id: (await member("managed-a", orgA)).userId, roles: ["ORG_PROJECT_CREATOR"] },
      token: manager.token,
    });
    assert.equal(byManager.status, 201, byManager.text);
  });

  it("deleting a user removes its memberships and frees their contexts", async () => {
    const { userId } = await member("leaving", orgA);
    for (const query of ["", `?ctx.org_id=${orgA}`]) {
      const r = await rest("POST", `${MEMBERSHIPS}${query}`, {
        json: { user_id: userId, roles: [query ? "ORG_OWNER" : "IAM_USER_MANAGER"] },
      });
      assert.equal(r.status, 201, r.text);
    }
    assert.equal((await rest("DELETE", `/resources/v3alpha/users/${userId}`)).status, 200);
    const left = await rest("POST", `${MEMBERSHIPS}/_search`, { json: [{ user: { user_id: userId } }] });
    assert.equal(left.json.details.total_result, "0");
    const events = await platform.db.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM events WHERE event_type = 'membership.removed' AND payload->>'user_id' = $1",
      [userId],
    );
    assert.equal(Number(events[0].n), 2);
    const constraints = await platform.db.query(
      "SELECT 1 FROM unique_constraints WHERE unique_type = 'membership' AND unique_field LIKE $1",
      [`%:${userId}`],
    );
    assert.equal(constraints.length, 0);
  });

  it("search paging: default 100, descending by creation, limit 1000 accepted, 1001 rejected", async () => {
    const org = await addOrg(platform, "Members Paging");
    const ids: string[] = [];
    await platform.eventStore.push({ instanceId, creator: "test" }, async () =>
      Array.from({ length: 110 }, () => {
        const id = newId();
        ids.push(id);
        return addMembershipEvent(id, org, {
          context_type: ContextType.org,
          context_id: org,
          user_id: newId(),
          roles: ["ORG_OWNER_VIEWER"],
        });
      }),
    );
    let r = await rest("POST", `${MEMBERSHIPS}/_search?ctx.org_id=${org}`);
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.result.length, 100);
    assert.equal(r.json.details.total_result, "110");
    assert.deepEqual(
      r.json.result.map((m: Json) => m.details.id),
      [...ids].reverse().slice(0, 100),
    );
    r = await rest("POST", `${MEMBERSHIPS}/_search?query.limit=1000`);
    assert.equal(r.status, 200);
    assert.equal(r.json.details.applied_limit, 1000);
    r = await rest("POST", `${MEMBERSHIPS}/_search?query.limit=1001`);
    assert.equal(r.status, 400);
    assert.match(r.json.message, /^query\.limit: /);
  });

  it("is served over gRPC", async () => {
    const client = createClient(PlatformMemberships, createGrpcTransport({ baseUrl: platform.url }));
    const headers = { authorization: `Bearer ${owner}` };
    const { roles } = await client.listAvailableRoles({}, { headers });
    assert.ok(roles.includes("IAM_OWNER"));
    await assert.rejects(
      client.createMembership({ membership: { userId: "", roles: ["IAM_OWNER"] } }, { headers }),
      (e) =>
        e instanceof ConnectError &&
        e.code === Code.InvalidArgument &&
        /membership\.user_id/.test(e.rawMessage),
    );
  });
});
