import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import {
  addMachineUser,
  addOrg,
  assertRejected,
  eventCount,
  expectNothingStored,
  grpcCall,
  type Json,
  restClient,
  startPlatform,
  type TestPlatform,
} from "../../../test/helpers.ts";
import { PlatformUserGrants } from "../../gen/platform/resources/user_grant/v3alpha/user_grant_service_pb.ts";
import { newId } from "../../id.ts";
import { userGrantsOf } from "../../query/user_grants.ts";

const PROJECTS = "/resources/v3alpha/projects";
const GRANTS = "/resources/v3alpha/user_grants";

describe("user grants", () => {
  let platform: TestPlatform;
  let owner: string; // IAM_OWNER token
  let instanceId: string;
  let orgA: string; // owns the project
  let orgB: string; // granted some of its roles
  let projectId: string;
  let projectGrantId: string;

  const rest = restClient(
    () => platform,
    () => owner,
  );
  const grant = async (json: unknown, token?: string) => {
    const r = await rest("POST", GRANTS, { json, token });
    assert.equal(r.status, 201, r.text);
    return r.json.details.id as string;
  };
  const roleKeysOf = async (id: string) => (await rest("GET", `${GRANTS}/${id}`)).json.grant.grant.role_keys;

  before(async () => {
    platform = await startPlatform({ listen: true });
    instanceId = platform.bootstrapResult!.instanceId;
    ({ token: owner } = await addMachineUser(platform, {
      username: "owner",
      membership: { contextType: "instance", roles: ["IAM_OWNER"] },
    }));
    orgA = await addOrg(platform, "Owner org");
    orgB = await addOrg(platform, "Customer org");
    const project = await rest("POST", `${PROJECTS}?ctx.org_id=${orgA}`, { json: { name: "Shop" } });
    projectId = project.json.details.id;
    for (const key of ["admin", "editor", "viewer"]) {
      const r = await rest("POST", `${PROJECTS}/${projectId}/roles`, { json: { key, display_name: key } });
      assert.equal(r.status, 201, r.text);
    }
    const pg = await rest("POST", `${PROJECTS}/${projectId}/grants`, {
      json: { granted_org_id: orgB, role_keys: ["editor", "viewer"] },
    });
    projectGrantId = pg.json.details.id;
  });
  after(() => platform.stop());

  it("create → get → patch → search → delete; role claims from userGrantsOf", async () => {
    const { userId } = await addMachineUser(platform, { username: "ada", orgId: orgA });
    const created = await rest("POST", GRANTS, {
      json: { user_id: userId, project_id: projectId, role_keys: ["admin", "viewer"] },
    });
    assert.equal(created.status, 201, created.text);
    const id = created.json.details.id;
    assert.deepEqual(created.json.details.resource_owner, { type: "OWNER_TYPE_ORG", id: orgA });

    const got = await rest("GET", `${GRANTS}/${id}`);
    assert.equal(got.status, 200, got.text);
    assert.deepEqual(got.json.grant.grant, {
      user_id: userId,
      project_id: projectId,
      role_keys: ["admin", "viewer"],
    });
    assert.equal(got.json.grant.details.sequence, "1");

    const [claim] = await userGrantsOf(platform.db, instanceId, userId);
    assert.deepEqual(claim, {
      id,
      projectId,
      orgId: orgA,
      orgPrimaryDomain: "owner-org.localhost",
      roleKeys: ["admin", "viewer"],
    });
    assert.deepEqual(await userGrantsOf(platform.db, instanceId, userId, [newId()]), []);

    await assertRejected(
      platform,
      () => rest("POST", GRANTS, { json: { user_id: userId, project_id: projectId, role_keys: ["editor"] } }),
      409,
      6,
      "the user already has a grant of this project",
    );

    const patched = await rest("PATCH", `${GRANTS}/${id}`, { json: { role_keys: ["editor"] } });
    assert.equal(patched.status, 200, patched.text);
    assert.equal(patched.json.details.sequence, "2");
    const count = await eventCount(platform);
    for (const json of [{ role_keys: ["editor"] }, {}, undefined]) {
      const same = await rest("PATCH", `${GRANTS}/${id}`, { json });
      assert.equal(same.status, 200, same.text);
      assert.equal(same.json.details.sequence, "2");
    }
    assert.equal(await eventCount(platform), count);
    assert.deepEqual(await roleKeysOf(id), ["editor"]);

    const deleted = await rest("DELETE", `${GRANTS}/${id}`);
    assert.equal(deleted.status, 200, deleted.text);
    assert.equal((await rest("GET", `${GRANTS}/${id}`)).status, 404);
    await assertRejected(platform, () => rest("DELETE", `${GRANTS}/${id}`), 404, 5, "user grant not found");
    // The (user, project) pair is free again.
    await grant({ user_id: userId, project_id: projectId, role_keys: ["admin"] });
  });

  it("patch replaces the roles only when given; the user, project and project grant stay (REST and gRPC)", async () => {
    const { userId } = await addMachineUser(platform, { username: "presence", orgId: orgB });
    const id = await grant({
      user_id: userId,
      project_id: projectId,
      project_grant_id: projectGrantId,
      role_keys: ["editor", "viewer"],
    });
    const read = async () => (await rest("GET", `${GRANTS}/${id}`)).json.grant.grant;
    const initial = await read();
    assert.equal((await rest("PATCH", `${GRANTS}/${id}`, { json: { role_keys: ["viewer"] } })).status, 200);
    assert.deepEqual(await read(), { ...initial, role_keys: ["viewer"] });
    // Binary protobuf: an empty list is absent, nothing changes; a list replaces.
    const grpc = (request: Json) =>
      grpcCall(platform, owner, PlatformUserGrants, "PatchUserGrant", { id, ...request });
    await grpc({ grant: { role_keys: [] } });
    assert.deepEqual(await read(), { ...initial, role_keys: ["viewer"] });
    await grpc({ grant: { role_keys: ["editor"] } });
    assert.deepEqual(await read(), { ...initial, role_keys: ["editor"] });
    // An empty list given is refused (REST [], or named in update_mask), nothing stored.
    const emptied = "grant.role_keys: must not be empty; delete the user grant to take all its roles away";
    await assertRejected(
      platform,
      () => rest("PATCH", `${GRANTS}/${id}`, { json: { role_keys: [] } }),
      400,
      3,
      emptied,
    );
    await expectNothingStored(platform, () =>
      assert.rejects(
        grpc({ update_mask: "roleKeys" }),
        (e) => e instanceof ConnectError && e.code === Code.InvalidArgument && e.rawMessage === emptied,
      ),
    );
    assert.deepEqual(await read(), { ...initial, role_keys: ["editor"] });
  });

  it("roles must be roles of the project, or of the project grant when given", async () => {
    const { userId } = await addMachineUser(platform, { username: "grace", orgId: orgA });
    const { userId: customer } = await addMachineUser(platform, { username: "customer", orgId: orgB });
    const cases: Array<[unknown, number, number, string | RegExp]> = [
      [
        { user_id: userId, project_id: projectId, role_keys: ["viewer", "owner"] },
        400,
        3,
        'grant.role_keys[1]: "owner" is not a role of the project',
      ],
      // A user grant through a project grant cannot use a role the grant does not include.
      [
        {
          user_id: customer,
          project_id: projectId,
          project_grant_id: projectGrantId,
          role_keys: ["viewer", "admin"],
        },
        400,
        3,
        'grant.role_keys[1]: "admin" is not a role of the project grant',
      ],
      // ... and is for users of the granted organization only.
      [
        { user_id: userId, project_id: projectId, project_grant_id: projectGrantId, role_keys: ["viewer"] },
        400,
        3,
        "grant.user_id: through a project grant only users of the granted organization",
      ],
      [{ user_id: newId(), project_id: projectId, role_keys: ["viewer"] }, 404, 5, "user not found"],
      [{ user_id: userId, project_id: newId(), role_keys: ["viewer"] }, 404, 5, "project not found"],
      [
        { user_id: customer, project_id: projectId, project_grant_id: newId(), role_keys: ["viewer"] },
        404,
        5,
        "project grant not found",
      ],
      [{ user_id: userId, project_id: projectId, role_keys: [] }, 400, 3, "grant.role_keys: is required"],
      [
        { user_id: userId, project_id: projectId, role_keys: [""] },
        400,
        3,
        "grant.role_keys[0]: must not be empty",
      ],
      [
        { user_id: userId, project_id: projectId, role_keys: ["viewer", "viewer"] },
        400,
        3,
        "grant.role_keys[1]: must be unique",
      ],
      [{ user_id: "", project_id: projectId, role_keys: ["viewer"] }, 400, 3, "grant.user_id: is required"],
      [{ user_id: userId, project_id: "", role_keys: ["viewer"] }, 400, 3, "grant.project_id: is required"],
      [
        { user_id: userId, project_id: projectId, project_grant_id: "", role_keys: ["viewer"] },
        400,
        3,
        "grant.project_grant_id: must not be empty",
      ],
      [{ user_id: userId, project_id: projectId, role_keys: "viewer" }, 400, 3, /role_keys/],
      [undefined, 400, 3, "grant: is required"],
    ];
    for (const [json, status, code, message] of cases) {
      await assertRejected(platform, () => rest("POST", GRANTS, { json }), status, code, message);
    }
    const read = await rest("POST", `${GRANTS}/_search`, { json: [{ user: { user_id: customer } }] });
    assert.equal(read.json.result.length, 0, "nothing stored");

    const viaGrant = await grant({
      user_id: customer,
      project_id: projectId,
      project_grant_id: projectGrantId,
      role_keys: ["viewer"],
    });
    const got = await rest("GET", `${GRANTS}/${viaGrant}`);
    assert.equal(got.json.grant.grant.project_grant_id, projectGrantId);
    assert.deepEqual(got.json.grant.details.resource_owner, { type: "OWNER_TYPE_ORG", id: orgB });
    await assertRejected(
      platform,
      () => rest("PATCH", `${GRANTS}/${viaGrant}`, { json: { role_keys: ["admin"] } }),
      400,
      3,
      'grant.role_keys[0]: "admin" is not a role of the project grant',
    );
    // A deactivated project grant: its user grants do not count, and none can be added.
    assert.equal(
      (await rest("POST", `${PROJECTS}/${projectId}/grants/${projectGrantId}/_deactivate`)).status,
      200,
    );
    assert.deepEqual(await userGrantsOf(platform.db, instanceId, customer), []);
    const { userId: another } = await addMachineUser(platform, { username: "customer-2", orgId: orgB });
    await assertRejected(
      platform,
      () =>
        rest("POST", GRANTS, {
          json: {
            user_id: another,
            project_id: projectId,
            project_grant_id: projectGrantId,
            role_keys: ["viewer"],
          },
        }),
      400,
      9,
      "the project grant is inactive",
    );
    assert.equal(
      (await rest("POST", `${PROJECTS}/${projectId}/grants/${projectGrantId}/_reactivate`)).status,
      200,
    );
    assert.deepEqual(
      (await userGrantsOf(platform.db, instanceId, customer)).map((g) => [
        g.projectGrantId,
        g.orgId,
        g.roleKeys,
      ]),
      [[projectGrantId, orgB, ["viewer"]]],
    );
  });

  it("narrowing a project grant narrows its user grants; deleting it removes them", async () => {
    const partner = await addOrg(platform, "Narrowed partner");
    const pg = await rest("POST", `${PROJECTS}/${projectId}/grants`, {
      json: { granted_org_id: partner, role_keys: ["editor", "viewer"] },
    });
    const pgId = pg.json.details.id;
    const { userId } = await addMachineUser(platform, { username: "partner-user", orgId: partner });
    const id = await grant({
      user_id: userId,
      project_id: projectId,
      project_grant_id: pgId,
      role_keys: ["editor", "viewer"],
    });
    assert.equal(
      (
        await rest("PATCH", `${PROJECTS}/${projectId}/grants/${pgId}`, {
          json: { role_keys: ["viewer", "admin"] },
        })
      ).status,
      200,
    );
    assert.deepEqual(await roleKeysOf(id), ["viewer"]);
    const history = await platform.db.query<{ event_type: string }>(
      "SELECT event_type FROM events WHERE aggregate_id = $1 ORDER BY sequence",
      [id],
    );
    assert.deepEqual(
      history.map((e) => e.event_type),
      ["user_grant.added", "user_grant.cascade.changed"],
    );
    assert.equal((await rest("DELETE", `${PROJECTS}/${projectId}/grants/${pgId}`)).status, 200);
    assert.equal((await rest("GET", `${GRANTS}/${id}`)).status, 404);
    const last = await platform.db.query<{ event_type: string; payload: Json }>(
      "SELECT event_type, payload FROM events WHERE aggregate_id = $1 ORDER BY sequence DESC LIMIT 1",
      [id],
    );
    assert.equal(last[0].event_type, "user_grant.cascade.removed");
    assert.equal(last[0].payload.reason, "project_grant_removed");
  });

  it("deleting a user removes its grants (events on each grant)", async () => {
    const { userId } = await addMachineUser(platform, { username: "leaving", orgId: orgA });
    const id = await grant({ user_id: userId, project_id: projectId, role_keys: ["viewer"] });
    const deleted = await rest("DELETE", `/resources/v3alpha/users/${userId}`);
    assert.equal(deleted.status, 200, deleted.text);
    assert.equal((await rest("GET", `${GRANTS}/${id}`)).status, 404);
    assert.deepEqual(await userGrantsOf(platform.db, instanceId, userId), []);
    const last = await platform.db.query<{ event_type: string; payload: Json }>(
      "SELECT event_type, payload FROM events WHERE aggregate_id = $1 ORDER BY sequence DESC LIMIT 1",
      [id],
    );
    assert.deepEqual(last[0], {
      event_type: "user_grant.cascade.removed",
      payload: { user_id: userId, project_id: projectId, reason: "user_removed" },
    });
  });

  it("search by user, project, role key, organization; only readable grants", async () => {
    const org = await addOrg(platform, "Search org");
    const project = await rest("POST", `${PROJECTS}?ctx.org_id=${org}`, { json: { name: "Searched" } });
    const searched = project.json.details.id;
    await rest("POST", `${PROJECTS}/${searched}/roles`, { json: { key: "r1", display_name: "R1" } });
    await rest("POST", `${PROJECTS}/${searched}/roles`, { json: { key: "r2", display_name: "R2" } });
    const { userId: u1 } = await addMachineUser(platform, { username: "s1", orgId: org });
    const { userId: u2 } = await addMachineUser(platform, { username: "s2", orgId: org });
    const { userId: u0 } = await addMachineUser(platform, { username: "s0", orgId: orgA });
    const g1 = await grant({ user_id: u1, project_id: searched, role_keys: ["r1"] });
    const g2 = await grant({ user_id: u2, project_id: searched, role_keys: ["r1", "r2"] });
    const g3 = await grant({ user_id: u0, project_id: projectId, role_keys: ["admin"] });

    const ids = async (filters: unknown, query = "", token?: string) => {
      const r = await rest("POST", `${GRANTS}/_search${query}`, { json: filters, token });
      assert.equal(r.status, 200, r.text);
      return r.json.result.map((g: Json) => g.details.id);
    };
    assert.deepEqual(await ids([{ user: { user_id: u1 } }], "?query.asc=true"), [g1]);
    assert.deepEqual(await ids([{ project: { project_id: searched } }], "?query.asc=true"), [g1, g2]);
    assert.deepEqual(await ids([{ role_key: { role_key: "r2" } }]), [g2]);
    assert.deepEqual(await ids([{ org: { org_id: org } }], "?query.asc=true"), [g1, g2]);
    assert.deepEqual(await ids([], `?ctx.org_id=${org}&query.asc=true`), [g1, g2]);
    assert.deepEqual(await ids([{ in_ids: { ids: [g3, g1, newId()] } }, { user: { user_id: u0 } }]), [g3]);
    const paged = await rest(
      "POST",
      `${GRANTS}/_search?query.limit=1&sorting_column=USER_GRANT_FIELD_NAME_ID`,
      {
        json: [{ project: { project_id: searched } }],
      },
    );
    assert.equal(paged.json.details.total_result, "2");
    assert.equal(paged.json.result.length, 1);

    // ORG_USER_MANAGER of the project's organization: its grants only; a PROJECT_OWNER_VIEWER: its project's.
    const manager = await addMachineUser(platform, {
      username: "grant-manager",
      orgId: org,
      membership: { contextType: "org", contextId: org, roles: ["ORG_USER_MANAGER"] },
    });
    assert.deepEqual(await ids([], "?query.asc=true", manager.token), [g1, g2]);
    const viewer = await addMachineUser(platform, {
      username: "grant-viewer",
      membership: { contextType: "project", contextId: projectId, roles: ["PROJECT_OWNER_VIEWER"] },
    });
    assert.ok((await ids([], "", viewer.token)).includes(g3));
    assert.ok(!(await ids([], "", viewer.token)).includes(g1));
    assert.equal((await rest("GET", `${GRANTS}/${g1}`, { token: viewer.token })).status, 404);
    assert.equal((await rest("GET", `${GRANTS}/${g3}`, { token: viewer.token })).status, 200);
    await assertRejected(platform, () => rest("DELETE", `${GRANTS}/${g3}`, { token: viewer.token }), 403, 7);
    // The manager gives roles in its organization's projects, not in others.
    const { userId: u3 } = await addMachineUser(platform, { username: "s3", orgId: org });
    await grant({ user_id: u3, project_id: searched, role_keys: ["r2"] }, manager.token);
    await assertRejected(
      platform,
      () =>
        rest("POST", GRANTS, {
          json: { user_id: u3, project_id: projectId, role_keys: ["viewer"] },
          token: manager.token,
        }),
      404,
      5,
      "project not found",
    );
  });

  it("the granted organization's managers give the granted roles to their users", async () => {
    const customerOwner = await addMachineUser(platform, {
      username: "customer-owner",
      orgId: orgB,
      membership: { contextType: "org", contextId: orgB, roles: ["ORG_OWNER"] },
    });
    const { userId } = await addMachineUser(platform, { username: "customer-3", orgId: orgB });
    const id = await grant(
      { user_id: userId, project_id: projectId, project_grant_id: projectGrantId, role_keys: ["editor"] },
      customerOwner.token,
    );
    assert.equal((await rest("GET", `${GRANTS}/${id}`, { token: customerOwner.token })).status, 200);
    // Not directly on the project, which belongs to another organization.
    await assertRejected(
      platform,
      () =>
        rest("POST", GRANTS, {
          json: { user_id: userId, project_id: projectId, role_keys: ["editor"] },
          token: customerOwner.token,
        }),
      404,
      5,
    );
  });

  it("a role removed while grants using it are created: no grant keeps the removed role", async () => {
    const users = await Promise.all(
      Array.from({ length: 6 }, (_, i) => addMachineUser(platform, { username: `racer-${i}`, orgId: orgA })),
    );
    const racing: string[] = [];
    for (let round = 0; round < 3; round++) {
      const project = await rest("POST", `${PROJECTS}?ctx.org_id=${orgA}`, {
        json: { name: `Racing ${round}` },
      });
      const id = project.json.details.id;
      racing.push(id);
      await rest("POST", `${PROJECTS}/${id}/roles`, {
        json: { key: "contested", display_name: "contested" },
      });
      const results = await Promise.all([
        ...users.map(({ userId }) =>
          rest("POST", GRANTS, { json: { user_id: userId, project_id: id, role_keys: ["contested"] } }),
        ),
        rest("DELETE", `${PROJECTS}/${id}/roles/contested`),
      ]);
      assert.ok(
        results.every((r) => r.status === 200 || r.status === 201 || r.status === 400),
        results.map((r) => r.text).join("\n"),
      );
    }
    const held = await platform.db.query<{ role_keys: string[] }>(
      "SELECT role_keys FROM user_grants WHERE project_id = ANY($1)",
      [racing],
    );
    assert.ok(
      held.every((g) => !g.role_keys.includes("contested")),
      JSON.stringify(held),
    );
  });

  it("a user the caller may not read is answered like an unknown one; across organizations only through a project grant", async () => {
    // Organization B's owner, with a project of B and its role.
    const ownerOfB = await addMachineUser(platform, {
      username: "probe-owner-b",
      orgId: orgB,
      membership: { contextType: "org", contextId: orgB, roles: ["ORG_OWNER"] },
    });
    const projectOfB = (await rest("POST", `${PROJECTS}?ctx.org_id=${orgB}`, { json: { name: "B app" } }))
      .json.details.id;
    await rest("POST", `${PROJECTS}/${projectOfB}/roles`, {
      json: { key: "member", display_name: "Member" },
    });
    const { userId: userOfA } = await addMachineUser(platform, { username: "probed-a", orgId: orgA });
    const attempt = (userId: string, token = ownerOfB.token) =>
      rest("POST", GRANTS, {
        json: { user_id: userId, project_id: projectOfB, role_keys: ["member"] },
        token,
      });
    // B's owner cannot read A's user: the same 404 as for an ID that exists nowhere, nothing stored.
    const before = await eventCount(platform);
    const unknown = await attempt(newId());
    const foreign = await attempt(userOfA);
    assert.equal(unknown.status, 404, unknown.text);
    assert.deepEqual(unknown.json, { code: 5, message: "user not found", details: [] });
    assert.equal(foreign.status, unknown.status, foreign.text);
    assert.deepEqual(foreign.json, unknown.json);
    const client = createClient(PlatformUserGrants, createGrpcTransport({ baseUrl: platform.url }));
    const grpcError = async (userId: string) =>
      client
        .createUserGrant(
          { grant: { userId, projectId: projectOfB, roleKeys: ["member"] } },
          { headers: { authorization: `Bearer ${ownerOfB.token}` } },
        )
        .then(
          () => "created",
          (e) => (e instanceof ConnectError ? [e.code, e.rawMessage] : e),
        );
    assert.deepEqual(await grpcError(newId()), [Code.NotFound, "user not found"]);
    assert.deepEqual(await grpcError(userOfA), [Code.NotFound, "user not found"]);
    assert.equal(await eventCount(platform), before);
    // Its own organization's users get B's roles.
    const { userId: userOfB } = await addMachineUser(platform, { username: "probed-b", orgId: orgB });
    assert.equal((await attempt(userOfB)).status, 201);

    // A caller who may read A's user (IAM_OWNER) learns why: a project's roles go directly only to users of
    // its organization; A's user gets them through a project grant to A.
    await assertRejected(
      platform,
      () => attempt(userOfA, owner),
      400,
      3,
      "grant.user_id: directly only users of the project's organization",
    );
    const toA = await rest("POST", `${PROJECTS}/${projectOfB}/grants`, {
      json: { granted_org_id: orgA, role_keys: ["member"] },
    });
    assert.equal(toA.status, 201, toA.text);
    await grant({
      user_id: userOfA,
      project_id: projectOfB,
      project_grant_id: toA.json.details.id,
      role_keys: ["member"],
    });

    // A PROJECT_OWNER (no user.read) reaches the users of its project's organization only.
    const projectOwner = await addMachineUser(platform, {
      username: "probe-project-owner",
      orgId: orgB,
      membership: { contextType: "project", contextId: projectOfB, roles: ["PROJECT_OWNER"] },
    });
    const { userId: another } = await addMachineUser(platform, { username: "probed-b-2", orgId: orgB });
    assert.equal((await attempt(another, projectOwner.token)).status, 201);
    const { userId: otherOfA } = await addMachineUser(platform, { username: "probed-a-2", orgId: orgA });
    const hidden = await attempt(otherOfA, projectOwner.token);
    assert.equal(hidden.status, 404, hidden.text);
    assert.deepEqual(hidden.json, unknown.json);
  });

  it("ctx names the user's organization: accepted when it matches, refused when not", async () => {
    const { userId } = await addMachineUser(platform, { username: "in-context", orgId: orgA });
    const body = { user_id: userId, project_id: projectId, role_keys: ["viewer"] };
    await assertRejected(
      platform,
      () => rest("POST", `${GRANTS}?ctx.org_id=${orgB}`, { json: body }),
      400,
      3,
      "ctx: the user belongs to another organization",
    );
    await assertRejected(
      platform,
      () => rest("POST", `${GRANTS}?ctx.org_id=${newId()}`, { json: body }),
      404,
      5,
      "organization not found",
    );
    const created = await rest("POST", `${GRANTS}?ctx.org_id=${orgA}`, { json: body });
    assert.equal(created.status, 201, created.text);
    assert.deepEqual(created.json.details.resource_owner, { type: "OWNER_TYPE_ORG", id: orgA });
    // Through a project grant: the granted organization is the user's.
    const { userId: customer } = await addMachineUser(platform, { username: "in-context-b", orgId: orgB });
    const viaGrant = await rest("POST", `${GRANTS}?ctx.org_domain=customer-org.localhost`, {
      json: {
        user_id: customer,
        project_id: projectId,
        project_grant_id: projectGrantId,
        role_keys: ["viewer"],
      },
    });
    assert.equal(viaGrant.status, 201, viaGrant.text);
    // gRPC: the same field.
    const client = createClient(PlatformUserGrants, createGrpcTransport({ baseUrl: platform.url }));
    const { userId: grpcUser } = await addMachineUser(platform, { username: "in-context-grpc", orgId: orgA });
    const headers = { authorization: `Bearer ${owner}` };
    const grpcGrant = { userId: grpcUser, projectId, roleKeys: ["viewer"] };
    await assert.rejects(
      client.createUserGrant(
        { ctx: { context: { case: "orgId", value: orgB } }, grant: grpcGrant },
        { headers },
      ),
      (e) => e instanceof ConnectError && e.code === Code.InvalidArgument && /^ctx: /.test(e.rawMessage),
    );
    const ok = await client.createUserGrant(
      { ctx: { context: { case: "orgId", value: orgA } }, grant: grpcGrant },
      { headers },
    );
    assert.ok(ok.details?.id);
  });

  it("gRPC: the same service", async () => {
    const client = createClient(PlatformUserGrants, createGrpcTransport({ baseUrl: platform.url }));
    const headers = { authorization: `Bearer ${owner}` };
    const { userId } = await addMachineUser(platform, { username: "grpc-user", orgId: orgA });
    const created = await client.createUserGrant(
      { grant: { userId, projectId, roleKeys: ["viewer"] } },
      { headers },
    );
    const { grant: got } = await client.getUserGrant({ id: created.details!.id }, { headers });
    assert.deepEqual(got!.grant!.roleKeys, ["viewer"]);
    const found = await client.searchUserGrants(
      { filters: [{ filter: { case: "user", value: { userId } } }] },
      { headers },
    );
    assert.equal(found.result.length, 1);
  });
});
