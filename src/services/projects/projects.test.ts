import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  addMachineUser,
  addOrg,
  assertRejected,
  assertRpcError,
  eventCount,
  expectNothingStored,
  grpcCall,
  type Json,
  restClient,
  startPlatform,
  type TestPlatform,
} from "../../../test/helpers.ts";
import { PlatformProjects } from "../../gen/platform/resources/project/v3alpha/project_service_pb.ts";
import { newId } from "../../id.ts";
import { appByClientId } from "../../query/apps.ts";
import { userGrantsOf } from "../../query/user_grants.ts";

const PROJECTS = "/resources/v3alpha/projects";
const USER_GRANTS = "/resources/v3alpha/user_grants";

describe("projects, roles and project grants", () => {
  let platform: TestPlatform;
  let owner: string; // IAM_OWNER token
  let instanceId: string;
  let defaultOrg: string;

  const rest = restClient(
    () => platform,
    () => owner,
  );

  /** A project of `orgId` (default: the instance's default organization); returns its ID. */
  const createProject = async (name: string, query = "", token?: string) => {
    const r = await rest("POST", `${PROJECTS}${query}`, { json: { name }, token });
    assert.equal(r.status, 201, r.text);
    return r.json.details.id as string;
  };
  const addRole = async (projectId: string, key: string, extra: Record<string, unknown> = {}) => {
    const r = await rest("POST", `${PROJECTS}/${projectId}/roles`, {
      json: { key, display_name: `${key} role`, ...extra },
    });
    assert.equal(r.status, 201, r.text);
    return r.json;
  };
  const eventsOf = async (aggregateId: string) =>
    (
      await platform.db.query<{ event_type: string; payload: Json }>(
        "SELECT event_type, payload FROM events WHERE aggregate_id = $1 ORDER BY position",
        [aggregateId],
      )
    ).map((e) => ({ type: e.event_type, payload: e.payload }));

  before(async () => {
    platform = await startPlatform({ listen: true });
    instanceId = platform.bootstrapResult!.instanceId;
    defaultOrg = platform.bootstrapResult!.orgId;
    ({ token: owner } = await addMachineUser(platform, {
      username: "owner",
      membership: { contextType: "instance", roles: ["IAM_OWNER"] },
    }));
  });
  after(() => platform.stop());

  it("create → get → patch → search → delete; the default organization unless ctx.org_id", async () => {
    const created = await rest("POST", PROJECTS, {
      json: { name: "Shop", project_role_assertion: true, project_role_check: false },
    });
    assert.equal(created.status, 201, created.text);
    const id = created.json.details.id;
    assert.deepEqual(created.json.details.resource_owner, { type: "OWNER_TYPE_ORG", id: defaultOrg });

    const got = await rest("GET", `${PROJECTS}/${id}`);
    assert.equal(got.status, 200, got.text);
    assert.deepEqual(got.json.project.project, {
      name: "Shop",
      project_role_assertion: true,
      project_role_check: false,
      private_labeling_setting: "PRIVATE_LABELING_SETTING_UNSPECIFIED",
    });
    assert.equal(got.json.project.management_project, false);
    assert.equal(got.json.project.details.sequence, created.json.details.sequence);

    // Patch: only present fields; no change → no event, same sequence.
    const patched = await rest("PATCH", `${PROJECTS}/${id}`, {
      json: { name: "Shop 2", project_role_check: true },
    });
    assert.equal(patched.status, 200, patched.text);
    const count = await eventCount(platform);
    for (const json of [{ name: "Shop 2", project_role_assertion: true }, {}, undefined]) {
      const same = await rest("PATCH", `${PROJECTS}/${id}`, { json });
      assert.equal(same.status, 200, same.text);
      assert.equal(same.json.details.sequence, patched.json.details.sequence);
    }
    assert.equal(await eventCount(platform), count);
    const after = await rest("GET", `${PROJECTS}/${id}`);
    assert.deepEqual(after.json.project.project, {
      name: "Shop 2",
      project_role_assertion: true,
      project_role_check: true,
      private_labeling_setting: "PRIVATE_LABELING_SETTING_UNSPECIFIED",
    });

    // Another organization through ctx.org_id; searches are ctx-scoped.
    const orgB = await addOrg(platform, "Projects B");
    const inB = await createProject("Warehouse", `?ctx.org_id=${orgB}`);
    const inBGot = await rest("GET", `${PROJECTS}/${inB}`);
    assert.deepEqual(inBGot.json.project.details.resource_owner, { type: "OWNER_TYPE_ORG", id: orgB });
    const searchB = await rest("POST", `${PROJECTS}/_search?ctx.org_id=${orgB}`, { json: [] });
    assert.equal(searchB.status, 200, searchB.text);
    assert.deepEqual(
      searchB.json.result.map((p: Json) => p.project.name),
      ["Warehouse"],
    );
    const all = await rest(
      "POST",
      `${PROJECTS}/_search?sorting_column=PROJECT_FIELD_NAME_NAME&query.asc=true`,
      {
        json: [],
      },
    );
    assert.deepEqual(
      all.json.result.map((p: Json) => p.project.name),
      ["Platform", "Shop 2", "Warehouse"],
    );
    assert.equal(all.json.details.total_result, "3");
    assert.equal(all.json.sorting_column, "PROJECT_FIELD_NAME_NAME");
    const byName = await rest("POST", `${PROJECTS}/_search`, {
      json: [{ name: { name: "shop", method: "TEXT_FILTER_METHOD_STARTS_WITH_IGNORE_CASE" } }],
    });
    assert.deepEqual(
      byName.json.result.map((p: Json) => p.details.id),
      [id],
    );
    const byIds = await rest("POST", `${PROJECTS}/_search?query.limit=1`, {
      json: [{ in_ids: { ids: [id, inB, newId()] } }],
    });
    assert.equal(byIds.json.result.length, 1);
    assert.equal(byIds.json.details.total_result, "2");
    assert.equal(byIds.json.details.end_of_list, false);
    assertRpcError(
      await rest("POST", `${PROJECTS}/_search?query.limit=1001`, { json: [] }),
      400,
      3,
      "query.limit: must be at most 1000",
    );

    const deleted = await rest("DELETE", `${PROJECTS}/${inB}`);
    assert.equal(deleted.status, 200, deleted.text);
    assert.equal((await rest("GET", `${PROJECTS}/${inB}`)).status, 404);
    assert.equal((await rest("DELETE", `${PROJECTS}/${inB}`)).status, 404);
  });

  it("the management project is a normal project that cannot be deleted (nor its organization)", async () => {
    const iamProject = (await platform.instances.byId(instanceId))!.iamProjectId;
    const got = await rest("GET", `${PROJECTS}/${iamProject}`);
    assert.equal(got.status, 200, got.text);
    assert.equal(got.json.project.project.name, "Platform");
    assert.equal(got.json.project.management_project, true);
    const patched = await rest("PATCH", `${PROJECTS}/${iamProject}`, { json: { project_role_check: false } });
    assert.equal(patched.status, 200);
    await assertRejected(
      platform,
      () => rest("DELETE", `${PROJECTS}/${iamProject}`),
      400,
      9,
      "the instance's management project cannot be deleted",
    );
    // Its organization, no longer the default one, still cannot be deleted.
    const other = await addOrg(platform, "New default");
    const setDefault = await rest(
      "POST",
      `/resources/v3alpha/organizations/${other}/_set_as_instance_default`,
    );
    assert.equal(setDefault.status, 200, setDefault.text);
    await assertRejected(
      platform,
      () => rest("DELETE", `/resources/v3alpha/organizations/${defaultOrg}`),
      400,
      9,
      /management project/,
    );
    const back = await rest(
      "POST",
      `/resources/v3alpha/organizations/${defaultOrg}/_set_as_instance_default`,
    );
    assert.equal(back.status, 200, back.text);
  });

  it("private_labeling_setting round-trips through create, get, patch and search, REST and gRPC", async () => {
    const ENFORCE = "PRIVATE_LABELING_SETTING_ENFORCE_PROJECT_RESOURCE_OWNER_POLICY";
    const ALLOW = "PRIVATE_LABELING_SETTING_ALLOW_LOGIN_USER_RESOURCE_OWNER_POLICY";
    const created = await rest("POST", PROJECTS, {
      json: { name: "Labeled", private_labeling_setting: ENFORCE },
    });
    assert.equal(created.status, 201, created.text);
    const id = created.json.details.id as string;
    const setting = async () =>
      (await rest("GET", `${PROJECTS}/${id}`)).json.project.project.private_labeling_setting;
    assert.equal(await setting(), ENFORCE);
    // the event carries it (as a number); a project without one has none in its event (as before)
    const [added] = await eventsOf(id);
    assert.deepEqual(added, {
      type: "project.added",
      payload: {
        name: "Labeled",
        project_role_assertion: false,
        project_role_check: false,
        private_labeling_setting: 1,
      },
    });
    const plain = await createProject("Unlabeled");
    assert.equal((await eventsOf(plain))[0].payload.private_labeling_setting, undefined);

    // a patch of other fields keeps it; a patch of it alone changes it
    assert.equal((await rest("PATCH", `${PROJECTS}/${id}`, { json: { name: "Labeled 2" } })).status, 200);
    assert.equal(await setting(), ENFORCE);
    const patched = await rest("PATCH", `${PROJECTS}/${id}`, { json: { private_labeling_setting: ALLOW } });
    assert.equal(patched.status, 200, patched.text);
    assert.equal(await setting(), ALLOW);
    assert.deepEqual((await eventsOf(id)).at(-1), {
      type: "project.changed",
      payload: { private_labeling_setting: 2 },
    });
    // the same value again stores nothing
    const count = await eventCount(platform);
    await rest("PATCH", `${PROJECTS}/${id}`, { json: { private_labeling_setting: ALLOW } });
    assert.equal(await eventCount(platform), count);

    const found = await rest("POST", `${PROJECTS}/_search`, { json: [{ in_ids: { ids: [id] } }] });
    assert.equal(found.status, 200, found.text);
    assert.equal(found.json.result[0].project.private_labeling_setting, ALLOW);

    // over gRPC: set and read; UNSPECIFIED given explicitly resets it (the field has presence)
    await grpcCall(platform, owner, PlatformProjects, "PatchProject", {
      id,
      project: { privateLabelingSetting: ENFORCE },
    });
    const viaGrpc = await grpcCall(platform, owner, PlatformProjects, "GetProject", { id });
    assert.equal((viaGrpc.project as Json).project.private_labeling_setting, ENFORCE);
    await grpcCall(platform, owner, PlatformProjects, "PatchProject", {
      id,
      project: { privateLabelingSetting: 0 },
    });
    assert.equal(await setting(), "PRIVATE_LABELING_SETTING_UNSPECIFIED");
  });

  it("bad input: 400 naming the field, nothing stored", async () => {
    const id = await createProject("Validated");
    const cases: Array<[string, string, unknown, RegExp]> = [
      ["POST", PROJECTS, { name: "" }, /^project\.name: is required$/],
      ["POST", PROJECTS, { name: "   " }, /^project\.name: must not be blank$/],
      ["POST", PROJECTS, { name: "x".repeat(201) }, /^project\.name: must be at most 200 characters$/],
      ["POST", PROJECTS, undefined, /^project: is required$/],
      ["POST", PROJECTS, { name: "a", colour: "red" }, /colour/],
      ["POST", PROJECTS, { name: "a", project_role_check: "yes" }, /project_role_check/],
      [
        "POST",
        PROJECTS,
        { name: "a", private_labeling_setting: "PRIVATE_LABELING_SETTING_SOMETIMES" },
        /^project\.private_labeling_setting: unknown value "PRIVATE_LABELING_SETTING_SOMETIMES"$/,
      ],
      [
        "POST",
        PROJECTS,
        { name: "a", private_labeling_setting: 7 },
        /^project\.private_labeling_setting: must be a defined value$/,
      ],
      [
        "PATCH",
        `${PROJECTS}/${id}`,
        { private_labeling_setting: "PRIVATE_LABELING_SETTING_SOMETIMES" },
        /private_labeling_setting/,
      ],
      [
        "PATCH",
        `${PROJECTS}/${id}`,
        { private_labeling_setting: 3 },
        /^project\.private_labeling_setting: must be a defined value$/,
      ],
      ["PATCH", `${PROJECTS}/${id}`, { name: "" }, /^project\.name: must not be empty$/],
      ["POST", `${PROJECTS}/${id}/roles`, { key: "", display_name: "d" }, /^role\.key: is required$/],
      ["POST", `${PROJECTS}/${id}/roles`, { key: "a b", display_name: "d" }, /^role\.key: must match/],
      ["POST", `${PROJECTS}/${id}/roles`, { key: "k" }, /^role\.display_name: is required$/],
      [
        "POST",
        `${PROJECTS}/${id}/roles`,
        { key: "k", display_name: "d", group: "g".repeat(201) },
        /^role\.group: must be at most 200 characters$/,
      ],
      [
        "POST",
        `${PROJECTS}/_search`,
        [{ name: { name: "x", method: "TEXT_FILTER_METHOD_SOMETIMES" } }],
        /^filters\[0\]\.name\.method: /,
      ],
      ["POST", `${PROJECTS}/_search?sorting_column=PROJECT_FIELD_NAME_COLOUR`, [], /sorting_column/],
      [
        "POST",
        `${PROJECTS}/${id}/grants`,
        { granted_org_id: "", role_keys: ["a"] },
        /^grant\.granted_org_id: is required$/,
      ],
      [
        "POST",
        `${PROJECTS}/${id}/grants`,
        { granted_org_id: defaultOrg, role_keys: [] },
        /^grant\.role_keys: is required$/,
      ],
      [
        "POST",
        `${PROJECTS}/${id}/grants/_search`,
        [{ state: { state: "PROJECT_GRANT_STATE_UNSPECIFIED" } }],
        /^filters\[0\]\.state\.state: is required$/,
      ],
    ];
    for (const [method, path, json, message] of cases) {
      await assertRejected(platform, () => rest(method, path, { json }), 400, 3, message);
    }
    assert.equal((await rest("GET", `${PROJECTS}/${"x".repeat(201)}`)).status, 400);
  });

  it("roles: add, unique key (409), patch, search, delete", async () => {
    const projectId = await createProject("Roles");
    const added = await addRole(projectId, "shop.admin", { group: "shop" });
    assert.equal(added.details.id, "shop.admin");
    await addRole(projectId, "shop.viewer", { display_name: "Viewer" });
    await addRole(projectId, "billing");
    await assertRejected(
      platform,
      () =>
        rest("POST", `${PROJECTS}/${projectId}/roles`, { json: { key: "billing", display_name: "again" } }),
      409,
      6,
      'the project already has a role "billing"',
    );
    // The same key in another project is fine.
    await addRole(await createProject("Other roles"), "billing");

    const got = await rest("GET", `${PROJECTS}/${projectId}/roles/shop.admin`);
    assert.equal(got.status, 200, got.text);
    assert.deepEqual(got.json.role.role, {
      key: "shop.admin",
      display_name: "shop.admin role",
      group: "shop",
    });
    assert.equal(got.json.role.project_id, projectId);
    assert.equal((await rest("GET", `${PROJECTS}/${projectId}/roles/nope`)).status, 404);

    const patched = await rest("PATCH", `${PROJECTS}/${projectId}/roles/shop.admin`, {
      json: { display_name: "Administrator", group: "" },
    });
    assert.equal(patched.status, 200, patched.text);
    const count = await eventCount(platform);
    const same = await rest("PATCH", `${PROJECTS}/${projectId}/roles/shop.admin`, {
      json: { display_name: "Administrator" },
    });
    assert.equal(same.json.details.sequence, patched.json.details.sequence);
    assert.equal(await eventCount(platform), count);
    assert.deepEqual((await rest("GET", `${PROJECTS}/${projectId}/roles/shop.admin`)).json.role.role, {
      key: "shop.admin",
      display_name: "Administrator",
      group: "",
    });
    await assertRejected(
      platform,
      () => rest("PATCH", `${PROJECTS}/${projectId}/roles/ghost`, { json: { display_name: "x" } }),
      404,
      5,
      "role not found",
    );

    const search = await rest(
      "POST",
      `${PROJECTS}/${projectId}/roles/_search?sorting_column=PROJECT_ROLE_FIELD_NAME_KEY&query.asc=true`,
      {
        json: [{ key: { key: "shop.", method: "TEXT_FILTER_METHOD_STARTS_WITH" } }],
      },
    );
    assert.equal(search.status, 200, search.text);
    assert.deepEqual(
      search.json.result.map((r: Json) => r.role.key),
      ["shop.admin", "shop.viewer"],
    );
    const byName = await rest("POST", `${PROJECTS}/${projectId}/roles/_search`, {
      json: [{ display_name: { display_name: "viewer", method: "TEXT_FILTER_METHOD_EQUALS_IGNORE_CASE" } }],
    });
    assert.deepEqual(
      byName.json.result.map((r: Json) => r.role.key),
      ["shop.viewer"],
    );

    const deleted = await rest("DELETE", `${PROJECTS}/${projectId}/roles/billing`);
    assert.equal(deleted.status, 200, deleted.text);
    assert.equal((await rest("GET", `${PROJECTS}/${projectId}/roles/billing`)).status, 404);
    await assertRejected(platform, () => rest("DELETE", `${PROJECTS}/${projectId}/roles/billing`), 404, 5);
    // Keys with reserved URL characters are percent-encoded in paths.
    await addRole(projectId, "a/b:c");
    assert.equal(
      (await rest("GET", `${PROJECTS}/${projectId}/roles/${encodeURIComponent("a/b:c")}`)).status,
      200,
    );
  });

  it("project grants: create, unique per organization, roles of the project, patch, (de)activate, search, delete", async () => {
    const projectId = await createProject("Granted");
    await addRole(projectId, "reader");
    await addRole(projectId, "writer");
    const partner = await addOrg(platform, "Partner");
    const created = await rest("POST", `${PROJECTS}/${projectId}/grants`, {
      json: { granted_org_id: partner, role_keys: ["reader"] },
    });
    assert.equal(created.status, 201, created.text);
    const grantId = created.json.details.id;

    await assertRejected(
      platform,
      () =>
        rest("POST", `${PROJECTS}/${projectId}/grants`, {
          json: { granted_org_id: partner, role_keys: ["writer"] },
        }),
      409,
      6,
    );
    await assertRejected(
      platform,
      () =>
        rest("POST", `${PROJECTS}/${projectId}/grants`, {
          json: { granted_org_id: defaultOrg, role_keys: ["reader"] },
        }),
      400,
      3,
      "grant.granted_org_id: must be another organization than the project's",
    );
    const other = await addOrg(platform, "Partner two");
    await assertRejected(
      platform,
      () =>
        rest("POST", `${PROJECTS}/${projectId}/grants`, {
          json: { granted_org_id: other, role_keys: ["reader", "admin"] },
        }),
      400,
      3,
      'grant.role_keys[1]: "admin" is not a role of the project',
    );
    await assertRejected(
      platform,
      () =>
        rest("POST", `${PROJECTS}/${projectId}/grants`, {
          json: { granted_org_id: newId(), role_keys: ["reader"] },
        }),
      404,
      5,
    );

    const got = await rest("GET", `${PROJECTS}/${projectId}/grants/${grantId}`);
    assert.equal(got.status, 200, got.text);
    assert.deepEqual(got.json.grant.grant, { granted_org_id: partner, role_keys: ["reader"] });
    assert.equal(got.json.grant.state, "PROJECT_GRANT_STATE_ACTIVE");
    assert.deepEqual(got.json.grant.details.resource_owner, { type: "OWNER_TYPE_ORG", id: defaultOrg });

    const patched = await rest("PATCH", `${PROJECTS}/${projectId}/grants/${grantId}`, {
      json: { role_keys: ["reader", "writer"] },
    });
    assert.equal(patched.status, 200, patched.text);
    const count = await eventCount(platform);
    for (const json of [{ role_keys: ["writer", "reader"] }, {}]) {
      const same = await rest("PATCH", `${PROJECTS}/${projectId}/grants/${grantId}`, { json });
      assert.equal(same.json.details.sequence, patched.json.details.sequence);
    }
    assert.equal(await eventCount(platform), count);
    await assertRejected(
      platform,
      () => rest("PATCH", `${PROJECTS}/${projectId}/grants/${grantId}`, { json: { role_keys: ["nope"] } }),
      400,
      3,
      'grant.role_keys[0]: "nope" is not a role of the project',
    );

    const deactivated = await rest("POST", `${PROJECTS}/${projectId}/grants/${grantId}/_deactivate`);
    assert.equal(deactivated.status, 200, deactivated.text);
    await assertRejected(
      platform,
      () => rest("POST", `${PROJECTS}/${projectId}/grants/${grantId}/_deactivate`),
      400,
      9,
    );
    const inactive = await rest("POST", `${PROJECTS}/${projectId}/grants/_search`, {
      json: [{ state: { state: "PROJECT_GRANT_STATE_INACTIVE" } }],
    });
    assert.deepEqual(
      inactive.json.result.map((g: Json) => g.details.id),
      [grantId],
    );
    assert.equal((await rest("POST", `${PROJECTS}/${projectId}/grants/${grantId}/_reactivate`)).status, 200);
    await assertRejected(
      platform,
      () => rest("POST", `${PROJECTS}/${projectId}/grants/${grantId}/_reactivate`),
      400,
      9,
    );

    // `-` searches every project; the granted organization's owner sees the grants given to it.
    const { token: partnerOwner } = await addMachineUser(platform, {
      username: "partner-owner",
      orgId: partner,
      membership: { contextType: "org", contextId: partner, roles: ["ORG_OWNER"] },
    });
    const given = await rest("POST", `${PROJECTS}/-/grants/_search?ctx.org_id=${partner}`, {
      json: [],
      token: partnerOwner,
    });
    assert.equal(given.status, 200, given.text);
    assert.deepEqual(
      given.json.result.map((g: Json) => g.details.id),
      [grantId],
    );
    assert.equal(
      (await rest("GET", `${PROJECTS}/${projectId}/grants/${grantId}`, { token: partnerOwner })).status,
      200,
    );
    // ... but neither changes it nor reads the project.
    assert.equal(
      (await rest("POST", `${PROJECTS}/${projectId}/grants/${grantId}/_deactivate`, { token: partnerOwner }))
        .status,
      403,
    );
    assert.equal((await rest("GET", `${PROJECTS}/${projectId}`, { token: partnerOwner })).status, 404);
    const byRole = await rest("POST", `${PROJECTS}/${projectId}/grants/_search`, {
      json: [{ role_key: { role_key: "writer" } }, { granted_org: { granted_org_id: partner } }],
    });
    assert.equal(byRole.json.result.length, 1);

    const deleted = await rest("DELETE", `${PROJECTS}/${projectId}/grants/${grantId}`);
    assert.equal(deleted.status, 200, deleted.text);
    assert.equal((await rest("GET", `${PROJECTS}/${projectId}/grants/${grantId}`)).status, 404);
  });

  it("patches change only the fields present (REST JSON and binary gRPC): project, role, project grant", async () => {
    const grpc = (method: string, request: Json) =>
      grpcCall(platform, owner, PlatformProjects, method, request);
    const rejectedOverGrpc = (call: Promise<unknown>, message: string) =>
      assert.rejects(
        call,
        (e) => e instanceof ConnectError && e.code === Code.InvalidArgument && e.rawMessage === message,
      );

    // Project: each flag and the name alone.
    const created = await rest("POST", PROJECTS, {
      json: { name: "Presence", project_role_assertion: true, project_role_check: true },
    });
    const id = created.json.details.id;
    const project = async () => (await rest("GET", `${PROJECTS}/${id}`)).json.project.project;
    assert.equal(
      (await rest("PATCH", `${PROJECTS}/${id}`, { json: { project_role_check: false } })).status,
      200,
    );
    assert.deepEqual(await project(), {
      name: "Presence",
      project_role_assertion: true,
      project_role_check: false,
      private_labeling_setting: "PRIVATE_LABELING_SETTING_UNSPECIFIED",
    });
    await grpc("PatchProject", { id, project: { project_role_assertion: false } });
    assert.deepEqual(await project(), {
      name: "Presence",
      project_role_assertion: false,
      project_role_check: false,
      private_labeling_setting: "PRIVATE_LABELING_SETTING_UNSPECIFIED",
    });
    await grpc("PatchProject", { id, project: { name: "Presence 2" } });
    assert.deepEqual(await project(), {
      name: "Presence 2",
      project_role_assertion: false,
      project_role_check: false,
      private_labeling_setting: "PRIVATE_LABELING_SETTING_UNSPECIFIED",
    });

    // Role: the display name alone keeps the group; the group alone (emptied) keeps the display name.
    await addRole(id, "editor", { display_name: "Editor", group: "content" });
    await addRole(id, "reader");
    const role = async () => (await rest("GET", `${PROJECTS}/${id}/roles/editor`)).json.role.role;
    const roleBefore = await role();
    assert.equal(
      (await rest("PATCH", `${PROJECTS}/${id}/roles/editor`, { json: { display_name: "Editors" } })).status,
      200,
    );
    assert.deepEqual(await role(), { ...roleBefore, display_name: "Editors" });
    await grpc("PatchProjectRole", { project_id: id, key: "editor", role: { group: "" } });
    assert.deepEqual(await role(), { ...roleBefore, display_name: "Editors", group: "" });

    // Project grant: its roles replace, its state and organization stay; an empty list is never stored.
    const partner = await addOrg(platform, "Presence partner");
    const grant = await rest("POST", `${PROJECTS}/${id}/grants`, {
      json: { granted_org_id: partner, role_keys: ["editor", "reader"] },
    });
    const grantId = grant.json.details.id;
    const grantPath = `${PROJECTS}/${id}/grants/${grantId}`;
    assert.equal((await rest("POST", `${grantPath}/_deactivate`)).status, 200);
    const read = async () => {
      const g = (await rest("GET", grantPath)).json.grant;
      return { ...g.grant, state: g.state };
    };
    assert.equal((await rest("PATCH", grantPath, { json: { role_keys: ["reader"] } })).status, 200);
    const narrowed = {
      granted_org_id: partner,
      role_keys: ["reader"],
      state: "PROJECT_GRANT_STATE_INACTIVE",
    };
    assert.deepEqual(await read(), narrowed);
    await grpc("PatchProjectGrant", { project_id: id, id: grantId, grant: { role_keys: [] } });
    assert.deepEqual(await read(), narrowed, "an empty list is absent in binary protobuf");
    await assertRejected(
      platform,
      () => rest("PATCH", grantPath, { json: { role_keys: [] } }),
      400,
      3,
      "grant.role_keys: must not be empty; delete the project grant to take all its roles away",
    );
    await expectNothingStored(platform, () =>
      rejectedOverGrpc(
        grpc("PatchProjectGrant", { project_id: id, id: grantId, grant: {}, update_mask: "roleKeys" }),
        "grant.role_keys: must not be empty; delete the project grant to take all its roles away",
      ),
    );
    await grpc("PatchProjectGrant", { project_id: id, id: grantId, grant: { role_keys: ["editor"] } });
    assert.deepEqual(await read(), { ...narrowed, role_keys: ["editor"] });
  });

  it("removing a role removes it from every project grant and user grant, with events on each", async () => {
    const projectId = await createProject("Cascade roles");
    await addRole(projectId, "a");
    await addRole(projectId, "b");
    const partner = await addOrg(platform, "Cascade partner");
    const grant = await rest("POST", `${PROJECTS}/${projectId}/grants`, {
      json: { granted_org_id: partner, role_keys: ["a", "b"] },
    });
    const grantId = grant.json.details.id;
    const { userId: direct } = await addMachineUser(platform, { username: "direct-user" });
    const { userId: viaGrant } = await addMachineUser(platform, { username: "via-grant", orgId: partner });
    const g1 = await rest("POST", USER_GRANTS, {
      json: { user_id: direct, project_id: projectId, role_keys: ["a", "b"] },
    });
    assert.equal(g1.status, 201, g1.text);
    const g2 = await rest("POST", USER_GRANTS, {
      json: { user_id: viaGrant, project_id: projectId, project_grant_id: grantId, role_keys: ["a"] },
    });
    assert.equal(g2.status, 201, g2.text);

    const removed = await rest("DELETE", `${PROJECTS}/${projectId}/roles/a`);
    assert.equal(removed.status, 200, removed.text);
    assert.deepEqual(
      (await rest("GET", `${PROJECTS}/${projectId}/grants/${grantId}`)).json.grant.grant.role_keys,
      ["b"],
    );
    assert.deepEqual((await rest("GET", `${USER_GRANTS}/${g1.json.details.id}`)).json.grant.grant.role_keys, [
      "b",
    ]);
    assert.deepEqual(
      (await rest("GET", `${USER_GRANTS}/${g2.json.details.id}`)).json.grant.grant.role_keys,
      [],
    );
    // The history tells what happened to each grant, in the same transaction (same created_at).
    assert.deepEqual((await eventsOf(g1.json.details.id)).at(-1), {
      type: "user_grant.cascade.changed",
      payload: { role_keys: ["b"] },
    });
    const projectEvents = await eventsOf(projectId);
    assert.deepEqual(projectEvents.slice(-2), [
      { type: "project.role.removed", payload: { key: "a" } },
      { type: "project.grant.cascade.changed", payload: { grant_id: grantId, role_keys: ["b"] } },
    ]);
    const [{ n }] = await platform.db.query<{ n: number }>(
      `SELECT count(DISTINCT created_at)::int AS n FROM events
       WHERE aggregate_id = ANY($1) AND event_type IN ('project.role.removed', 'project.grant.cascade.changed', 'user_grant.cascade.changed')`,
      [[projectId, g1.json.details.id, g2.json.details.id]],
    );
    assert.equal(n, 1);
    // A later grant may not use the removed role.
    await assertRejected(
      platform,
      () =>
        rest("PATCH", `${USER_GRANTS}/${g1.json.details.id}`, {
          json: { role_keys: ["a"] },
        }),
      400,
      3,
      'grant.role_keys[0]: "a" is not a role of the project',
    );
  });

  it("deleting a project removes its roles, apps (gone from reads and client lookups), grants and memberships", async () => {
    const projectId = await createProject("Doomed project");
    await addRole(projectId, "r");
    const app = await rest("POST", `${PROJECTS}/${projectId}/apps`, {
      json: { name: "api", api: { auth_method: "API_AUTH_METHOD_TYPE_PRIVATE_KEY_JWT" } },
    });
    assert.equal(app.status, 201, app.text);
    const appId = app.json.details.id;
    const key = await rest("POST", `${PROJECTS}/${projectId}/apps/${appId}/keys`, { json: {} });
    assert.equal(key.status, 201, key.text);
    assert.ok(await appByClientId(platform.db, instanceId, app.json.client_id));
    const partner = await addOrg(platform, "Doomed partner");
    const grant = await rest("POST", `${PROJECTS}/${projectId}/grants`, {
      json: { granted_org_id: partner, role_keys: ["r"] },
    });
    const { userId } = await addMachineUser(platform, { username: "doomed-grantee" });
    const userGrant = await rest("POST", USER_GRANTS, {
      json: { user_id: userId, project_id: projectId, role_keys: ["r"] },
    });
    assert.equal(userGrant.status, 201, userGrant.text);
    const member = await addMachineUser(platform, {
      username: "doomed-project-owner",
      membership: { contextType: "project", contextId: projectId, roles: ["PROJECT_OWNER"] },
    });

    const deleted = await rest("DELETE", `${PROJECTS}/${projectId}`);
    assert.equal(deleted.status, 200, deleted.text);

    assert.equal((await rest("GET", `${PROJECTS}/${projectId}/apps/${appId}`)).status, 404);
    assert.equal(await appByClientId(platform.db, instanceId, app.json.client_id), undefined);
    assert.equal((await rest("GET", `${PROJECTS}/${projectId}/grants/${grant.json.details.id}`)).status, 404);
    assert.equal((await rest("GET", `${USER_GRANTS}/${userGrant.json.details.id}`)).status, 404);
    assert.deepEqual(await userGrantsOf(platform.db, instanceId, userId), []);
    for (const table of ["project_roles", "apps", "app_keys", "project_grants", "user_grants"]) {
      const rows = await platform.db.query(`SELECT 1 FROM ${table} WHERE project_id = $1`, [projectId]);
      assert.equal(rows.length, 0, table);
    }
    const memberships = await platform.db.query("SELECT 1 FROM memberships WHERE user_id = $1", [
      member.userId,
    ]);
    assert.equal(memberships.length, 0);
    assert.deepEqual((await eventsOf(userGrant.json.details.id)).at(-1)?.type, "user_grant.cascade.removed");
    // The user and the same grant can be created again on a new project.
    const again = await createProject("Doomed project");
    await addRole(again, "r");
    const regrant = await rest("POST", USER_GRANTS, {
      json: { user_id: userId, project_id: again, role_keys: ["r"] },
    });
    assert.equal(regrant.status, 201, regrant.text);
  });

  it("deleting an organization removes its projects' grants, the grants it gave and the project grants it received", async () => {
    const projectId = await createProject("Survivor project");
    await addRole(projectId, "r");
    const doomed = await addOrg(platform, "Doomed grantee org");
    const grant = await rest("POST", `${PROJECTS}/${projectId}/grants`, {
      json: { granted_org_id: doomed, role_keys: ["r"] },
    });
    const { userId } = await addMachineUser(platform, { username: "doomed-org-user", orgId: doomed });
    const viaGrant = await rest("POST", USER_GRANTS, {
      json: {
        user_id: userId,
        project_id: projectId,
        project_grant_id: grant.json.details.id,
        role_keys: ["r"],
      },
    });
    assert.equal(viaGrant.status, 201, viaGrant.text);
    const { userId: survivor } = await addMachineUser(platform, { username: "survivor-user" });
    const doomedProject = await createProject("Doomed org project", `?ctx.org_id=${doomed}`);
    await addRole(doomedProject, "x");
    // A user of another organization gets the project's roles through a project grant.
    const toSurvivors = await rest("POST", `${PROJECTS}/${doomedProject}/grants`, {
      json: { granted_org_id: platform.bootstrapResult!.orgId, role_keys: ["x"] },
    });
    assert.equal(toSurvivors.status, 201, toSurvivors.text);
    const onDoomedProject = await rest("POST", USER_GRANTS, {
      json: {
        user_id: survivor,
        project_id: doomedProject,
        project_grant_id: toSurvivors.json.details.id,
        role_keys: ["x"],
      },
    });
    assert.equal(onDoomedProject.status, 201, onDoomedProject.text);

    const deleted = await rest("DELETE", `/resources/v3alpha/organizations/${doomed}`);
    assert.equal(deleted.status, 200, deleted.text);
    assert.equal((await rest("GET", `${PROJECTS}/${projectId}/grants/${grant.json.details.id}`)).status, 404);
    assert.equal((await rest("GET", `${USER_GRANTS}/${viaGrant.json.details.id}`)).status, 404);
    assert.equal((await rest("GET", `${USER_GRANTS}/${onDoomedProject.json.details.id}`)).status, 404);
    assert.equal((await rest("GET", `${PROJECTS}/${projectId}`)).status, 200);
    assert.deepEqual((await eventsOf(projectId)).at(-1), {
      type: "project.grant.cascade.removed",
      payload: { grant_id: grant.json.details.id, granted_org_id: doomed },
    });
  });

  it("permissions: ORG_PROJECT_CREATOR owns what it creates; project roles apply in their project only", async () => {
    const org = await addOrg(platform, "Creators");
    const creator = await addMachineUser(platform, {
      username: "creator",
      orgId: org,
      membership: { contextType: "org", contextId: org, roles: ["ORG_PROJECT_CREATOR"] },
    });
    const mine = await createProject("Creator's", `?ctx.org_id=${org}`, creator.token);
    // It became the project's PROJECT_OWNER: it may change the project and its roles.
    assert.equal(
      (await rest("PATCH", `${PROJECTS}/${mine}`, { json: { name: "Renamed" }, token: creator.token }))
        .status,
      200,
    );
    assert.equal(
      (
        await rest("POST", `${PROJECTS}/${mine}/roles`, {
          json: { key: "k", display_name: "K" },
          token: creator.token,
        })
      ).status,
      201,
    );
    // Not in the default organization, and not other projects of its organization.
    assert.equal(
      (await rest("POST", PROJECTS, { json: { name: "Elsewhere" }, token: creator.token })).status,
      403,
    );
    const theirs = await createProject("Not the creator's", `?ctx.org_id=${org}`);
    assert.equal((await rest("GET", `${PROJECTS}/${theirs}`, { token: creator.token })).status, 200);
    assert.equal(
      (await rest("PATCH", `${PROJECTS}/${theirs}`, { json: { name: "x" }, token: creator.token })).status,
      403,
    );

    // PROJECT_OWNER_VIEWER on one project: reads it, its roles and apps; nothing else, no writes.
    const viewer = await addMachineUser(platform, {
      username: "project-viewer",
      membership: { contextType: "project", contextId: theirs, roles: ["PROJECT_OWNER_VIEWER"] },
    });
    assert.equal((await rest("GET", `${PROJECTS}/${theirs}`, { token: viewer.token })).status, 200);
    assert.equal((await rest("GET", `${PROJECTS}/${mine}`, { token: viewer.token })).status, 404);
    assert.equal(
      (await rest("POST", `${PROJECTS}/${theirs}/roles/_search`, { json: [], token: viewer.token })).status,
      200,
    );
    const before = await eventCount(platform);
    assert.equal(
      (await rest("PATCH", `${PROJECTS}/${theirs}`, { json: { name: "y" }, token: viewer.token })).status,
      403,
    );
    assert.equal(
      (
        await rest("POST", `${PROJECTS}/${theirs}/roles`, {
          json: { key: "v", display_name: "V" },
          token: viewer.token,
        })
      ).status,
      403,
    );
    assert.equal(await eventCount(platform), before);
    const seen = await rest("POST", `${PROJECTS}/_search`, { json: [], token: viewer.token });
    assert.deepEqual(
      seen.json.result.map((p: Json) => p.details.id),
      [theirs],
    );
    const seenByCreator = await rest("POST", `${PROJECTS}/_search`, { json: [], token: creator.token });
    assert.deepEqual(
      new Set(seenByCreator.json.result.map((p: Json) => p.details.id)),
      new Set([mine, theirs]),
    );
    // Without any role: 404 for reads, empty searches; without a token: 401.
    const nobody = await addMachineUser(platform, { username: "nobody" });
    assert.equal((await rest("GET", `${PROJECTS}/${theirs}`, { token: nobody.token })).status, 404);
    assert.equal(
      (await rest("POST", `${PROJECTS}/_search`, { json: [], token: nobody.token })).json.result.length,
      0,
    );
    assert.equal((await rest("GET", `${PROJECTS}/${theirs}`, { token: null })).status, 401);
  });
});
