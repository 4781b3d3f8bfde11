import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import {
  addMachineUser,
  eventCount,
  grpcCall,
  type Json,
  jsonOrRaw,
  restClient,
  startPlatform,
  type TestPlatform,
} from "../../../test/helpers.ts";
import { addOrgEvents } from "../../domain/org/commands.ts";
import { PlatformOrganizations } from "../../gen/platform/resources/organization/v3alpha/organization_service_pb.ts";
import { newId } from "../../id.ts";

const ORGS = "/resources/v3alpha/organizations";

describe("organizations API", () => {
  let platform: TestPlatform;
  let owner: string;
  let instanceId: string;

  const rest = restClient(
    () => platform,
    () => owner,
  );
  const createOrg = async (name: string, token = owner) => {
    const result = await rest("POST", ORGS, { token, json: { name } });
    assert.equal(result.status, 201, JSON.stringify(result.json));
    return result.json.details.id as string;
  };

  before(async () => {
    platform = await startPlatform({ listen: true });
    instanceId = platform.bootstrapResult!.instanceId;
    ({ token: owner } = await addMachineUser(platform, {
      username: "org-admin",
      membership: { contextType: "instance", roles: ["IAM_OWNER"] },
    }));
  });
  after(() => platform.stop());

  it("creates, reads, patches, searches, sets as default and deletes an organization", async () => {
    const created = await rest("POST", ORGS, { json: { name: "Acme Corp" } });
    assert.equal(created.status, 201);
    const id = created.json.details.id as string;
    assert.match(id, /^\d+$/);
    assert.deepEqual(created.json.details.resource_owner, { type: "OWNER_TYPE_INSTANCE", id: instanceId });

    let got = await rest("GET", `${ORGS}/${id}`);
    assert.equal(got.status, 200);
    assert.equal(got.json.organization.organization.name, "Acme Corp");
    assert.equal(got.json.organization.state, "ORGANIZATION_STATE_ACTIVE");
    assert.equal(got.json.organization.primary_domain, "acme-corp.localhost");
    assert.equal(got.json.organization.is_instance_default, false);
    assert.equal(got.json.organization.details.sequence, created.json.details.sequence);

    const patched = await rest("PATCH", `${ORGS}/${id}`, { json: { name: "Acme Inc" } });
    assert.equal(patched.status, 200);
    assert.ok(BigInt(patched.json.details.sequence) > BigInt(created.json.details.sequence));
    got = await rest("GET", `${ORGS}/${id}`);
    assert.equal(got.json.organization.organization.name, "Acme Inc");
    assert.equal(got.json.organization.primary_domain, "acme-corp.localhost", "the primary domain stays");

    const found = await rest("POST", `${ORGS}/_search`, {
      json: [{ name: { name: "acme", method: "TEXT_FILTER_METHOD_STARTS_WITH_IGNORE_CASE" } }],
    });
    assert.equal(found.status, 200);
    assert.deepEqual(
      found.json.result.map((o: Json) => o.details.id),
      [id],
    );
    assert.equal(found.json.details.total_result, "1");
    assert.equal(found.json.details.end_of_list, true);
    const byId = await rest("POST", `${ORGS}/_search`, {
      json: [{ in_ids: { ids: [id] } }, { state: { state: "ORGANIZATION_STATE_ACTIVE" } }],
    });
    assert.equal(byId.json.result.length, 1);

    // the old name is free again, the new one is taken (ignoring case)
    const taken = await rest("POST", ORGS, { json: { name: "ACME INC" } });
    assert.equal(taken.status, 409);
    assert.equal(taken.json.code, 6);

    const initialDefault = await rest("GET", `${ORGS}/_instance_default`);
    assert.equal(initialDefault.status, 200);
    assert.equal(initialDefault.json.organization.details.id, platform.bootstrapResult!.orgId);
    assert.equal(initialDefault.json.organization.is_instance_default, true);

    const setDefault = await rest("POST", `${ORGS}/${id}/_set_as_instance_default`);
    assert.equal(setDefault.status, 200);
    assert.equal((await rest("GET", `${ORGS}/_instance_default`)).json.organization.details.id, id);
    const undeletable = await rest("DELETE", `${ORGS}/${id}`);
    assert.equal(undeletable.status, 400);
    assert.equal(undeletable.json.code, 9);
    assert.match(undeletable.json.message, /default organization/);
    const back = await rest("POST", `${ORGS}/${platform.bootstrapResult!.orgId}/_set_as_instance_default`);
    assert.equal(back.status, 200);

    const before = await eventCount(platform);
    const deleted = await rest("DELETE", `${ORGS}/${id}`);
    assert.equal(deleted.status, 200);
    assert.ok((await eventCount(platform)) > before);
    assert.equal((await rest("GET", `${ORGS}/${id}`)).status, 404);
    assert.equal((await rest("DELETE", `${ORGS}/${id}`)).status, 404);
    assert.deepEqual(
      (await rest("POST", `${ORGS}/_search`, { json: [{ in_ids: { ids: [id] } }] })).json.result,
      [],
    );
    // name and generated domain are released
    const again = await createOrg("Acme Inc");
    assert.equal(
      (await rest("GET", `${ORGS}/${again}`)).json.organization.primary_domain,
      "acme-inc.localhost",
    );
  });

  it("serves the same API over gRPC", async () => {
    const client = createClient(PlatformOrganizations, createGrpcTransport({ baseUrl: platform.url }));
    const headers = { authorization: `Bearer ${owner}` };
    const created = await client.createOrganization({ organization: { name: "Grpc Org" } }, { headers });
    const got = await client.getOrganization({ id: created.details!.id }, { headers });
    assert.equal(got.organization?.organization?.name, "Grpc Org");
  });

  it("a patch of the name keeps the state, primary domain and default flag (REST and gRPC)", async () => {
    const id = await createOrg("Presence Org");
    const read = async () => ({
      ...(await rest("GET", `${ORGS}/${id}`)).json.organization,
      details: undefined,
    });
    const initial = await read();
    assert.equal((await rest("PATCH", `${ORGS}/${id}`, { json: { name: "Presence Org 2" } })).status, 200);
    assert.deepEqual(await read(), { ...initial, organization: { name: "Presence Org 2" } });
    await grpcCall(platform, owner, PlatformOrganizations, "PatchOrganization", {
      id,
      organization: { name: "Presence Org 3" },
    });
    assert.deepEqual(await read(), { ...initial, organization: { name: "Presence Org 3" } });
    await grpcCall(platform, owner, PlatformOrganizations, "PatchOrganization", { id, organization: {} });
    assert.deepEqual(await read(), { ...initial, organization: { name: "Presence Org 3" } });
  });

  it("a patch without changes succeeds and stores no event", async () => {
    const id = await createOrg("Unchanged");
    const current = await rest("GET", `${ORGS}/${id}`);
    const before = await eventCount(platform);
    for (const body of [{ name: "Unchanged" }, {}, ""]) {
      const result = await rest("PATCH", `${ORGS}/${id}`, jsonOrRaw(body));
      assert.equal(result.status, 200, JSON.stringify(result.json));
      assert.equal(result.json.details.sequence, current.json.organization.details.sequence);
    }
    assert.equal(await eventCount(platform), before);
  });

  it("rejects bad input naming the field, storing nothing", async () => {
    const id = await createOrg("Validated");
    const before = await eventCount(platform);
    const cases: Array<[string, string, unknown, RegExp]> = [
      ["POST", "", "", /organization/],
      ["POST", "", {}, /organization\.name/],
      ["POST", "", { name: "" }, /organization\.name/],
      ["POST", "", { name: "   " }, /organization\.name: must not be blank/],
      ["POST", "", { name: "x".repeat(201) }, /organization\.name/],
      ["POST", "", { name: 5 }, /name/],
      ["POST", "", { name: ["a"] }, /name/],
      ["POST", "", { name: "ok", unknown_field: 1 }, /unknown_field/],
      ["POST", "", "{not json", /./],
      ["PATCH", `/${id}`, { name: "" }, /organization\.name/],
      ["PATCH", `/${id}`, { name: "y".repeat(201) }, /organization\.name/],
      ["POST", "/_search", [{}], /filters\[0\]/],
      [
        "POST",
        "/_search",
        [{ name: { name: "a", method: "TEXT_FILTER_METHOD_NOPE" } }],
        /^filters\[0\]\.name\.method: /,
      ],
      ["POST", "/_search", [{ name: { name: "a", method: 99 } }], /filters\[0\]\.name\.method/],
      ["POST", "/_search?sorting_column=ORGANIZATION_FIELD_NAME_COLOR", [], /sorting_column/],
      ["POST", "/_search", [{ state: {} }], /filters\[0\]\.state\.state/],
      ["GET", `/${"9".repeat(201)}`, undefined, /id/],
    ];
    for (const [method, path, body, message] of cases) {
      const result = await rest(method, `${ORGS}${path}`, jsonOrRaw(body));
      assert.equal(
        result.status,
        400,
        `${method} ${path} ${JSON.stringify(body)}: ${JSON.stringify(result.json)}`,
      );
      assert.equal(result.json.code, 3);
      assert.match(result.json.message, message, JSON.stringify(body));
    }
    const ctxOrg = await rest("POST", `${ORGS}?ctx.org_id=${id}`, { json: { name: "In an org" } });
    assert.equal(ctxOrg.status, 400);
    assert.match(ctxOrg.json.message, /^ctx: /);
    assert.equal(await eventCount(platform), before);
  });

  it("search: limit 1000 is accepted, 1001 is 400; default page of 100, newest first", async () => {
    const ok = await rest("POST", `${ORGS}/_search?query.limit=1000`, { json: [] });
    assert.equal(ok.status, 200);
    assert.equal(ok.json.details.applied_limit, 1000);
    const tooMany = await rest("POST", `${ORGS}/_search?query.limit=1001`, { json: [] });
    assert.equal(tooMany.status, 400);
    assert.equal(tooMany.json.code, 3);
    assert.match(tooMany.json.message, /^query\.limit: /);

    const first = await createOrg("Order 1");
    const second = await createOrg("Order 2");
    const third = await createOrg("Order 3");
    const ordered = await rest("POST", `${ORGS}/_search`, {
      json: [{ name: { name: "Order ", method: "TEXT_FILTER_METHOD_STARTS_WITH" } }],
    });
    assert.deepEqual(
      ordered.json.result.map((o: Json) => o.details.id),
      [third, second, first],
    );
    const asc = await rest(
      "POST",
      `${ORGS}/_search?query.asc=true&sorting_column=ORGANIZATION_FIELD_NAME_NAME`,
      { json: [{ name: { name: "order", method: "TEXT_FILTER_METHOD_CONTAINS_IGNORE_CASE" } }] },
    );
    assert.deepEqual(
      asc.json.result.map((o: Json) => o.organization.name),
      ["Order 1", "Order 2", "Order 3"],
    );
    assert.equal(asc.json.sorting_column, "ORGANIZATION_FIELD_NAME_NAME");

    await platform.eventStore.push({ instanceId, creator: "test" }, async () =>
      Array.from({ length: 105 }, (_, i) => addOrgEvents(newId(), `Bulk ${i}`, "localhost")).flat(),
    );
    const page = await rest("POST", `${ORGS}/_search`, { json: [] });
    assert.equal(page.status, 200);
    assert.equal(page.json.result.length, 100);
    assert.equal(page.json.details.applied_limit, 100);
    assert.equal(page.json.details.end_of_list, false);
    const total = Number(page.json.details.total_result);
    assert.ok(total > 105);
    assert.equal(page.json.result[0].organization.name, "Bulk 104");
    const ids = page.json.result.map((o: Json) => BigInt(o.details.id));
    assert.deepEqual(
      [...ids].sort((a, b) => (a > b ? -1 : a < b ? 1 : 0)),
      ids,
      "descending by creation",
    );
    const last = await rest("POST", `${ORGS}/_search?query.offset=100`, { json: [] });
    assert.equal(last.json.result.length, total - 100);
    assert.equal(last.json.details.end_of_list, true);
    assert.ok(BigInt(last.json.details.processed_sequence) > 0n);
  });

  it("callers see and change only the organizations they may", async () => {
    const orgA = await createOrg("Visible A");
    const orgB = await createOrg("Visible B");
    const { token: ownerA } = await addMachineUser(platform, {
      username: "owner-a",
      orgId: orgA,
      membership: { contextType: "org", contextId: orgA, roles: ["ORG_OWNER"] },
    });
    const { token: nobody } = await addMachineUser(platform, { username: "org-nobody" });

    const seen = await rest("POST", `${ORGS}/_search`, { token: ownerA, json: [] });
    assert.equal(seen.status, 200);
    assert.deepEqual(
      seen.json.result.map((o: Json) => o.details.id),
      [orgA],
    );
    assert.equal(seen.json.details.total_result, "1");
    assert.equal((await rest("GET", `${ORGS}/${orgA}`, { token: ownerA })).status, 200);
    // An organization the caller may not read is unknown to it, like an unknown ID.
    const hidden = await rest("GET", `${ORGS}/${orgB}`, { token: ownerA });
    assert.equal(hidden.status, 404);
    assert.deepEqual(hidden.json, { code: 5, message: "organization not found", details: [] });
    assert.deepEqual((await rest("GET", `${ORGS}/${newId()}`, { token: ownerA })).json, hidden.json);
    assert.deepEqual((await rest("POST", `${ORGS}/_search`, { token: nobody, json: [] })).json.result, []);

    const before = await eventCount(platform);
    assert.equal(
      (await rest("PATCH", `${ORGS}/${orgB}`, { token: ownerA, json: { name: "Mine now" } })).status,
      404,
    );
    assert.equal((await rest("DELETE", `${ORGS}/${orgB}`, { token: ownerA })).status, 404);
    assert.equal(
      (await rest("POST", ORGS, { token: ownerA, json: { name: "New by org owner" } })).status,
      403,
      "org.create is an instance permission",
    );
    assert.equal(
      (await rest("POST", `${ORGS}/${orgA}/_set_as_instance_default`, { token: ownerA })).status,
      403,
    );
    assert.equal((await rest("GET", `${ORGS}/_instance_default`, { token: ownerA })).status, 403);
    assert.equal((await rest("GET", `${ORGS}/${orgA}`, { token: "garbage" })).status, 401);
    assert.equal(await eventCount(platform), before);
    assert.equal(
      (await rest("PATCH", `${ORGS}/${orgA}`, { token: ownerA, json: { name: "Visible A2" } })).status,
      200,
    );

    // Readable but not writable: 403.
    const { token: viewerB } = await addMachineUser(platform, {
      username: "viewer-b",
      orgId: orgB,
      membership: { contextType: "org", contextId: orgB, roles: ["ORG_OWNER_VIEWER"] },
    });
    const beforeViewer = await eventCount(platform);
    assert.equal((await rest("GET", `${ORGS}/${orgB}`, { token: viewerB })).status, 200);
    const denied = await rest("PATCH", `${ORGS}/${orgB}`, { token: viewerB, json: { name: "Mine now" } });
    assert.equal(denied.status, 403);
    assert.equal(denied.json.code, 7);
    assert.equal((await rest("DELETE", `${ORGS}/${orgB}`, { token: viewerB })).status, 403);
    assert.equal(await eventCount(platform), beforeViewer);
  });

  it("deleting an organization removes its users, projects and memberships", async () => {
    const doomed = await createOrg("Doomed");
    const survivor = platform.bootstrapResult!.orgId;
    const member = await addMachineUser(platform, {
      username: "doomed-member",
      orgId: doomed,
      membership: { contextType: "org", contextId: doomed, roles: ["ORG_OWNER"] },
    });
    const instanceMember = await addMachineUser(platform, {
      username: "doomed-instance-member",
      orgId: doomed,
      membership: { contextType: "instance", roles: ["IAM_OWNER_VIEWER"] },
    });
    const outsider = await addMachineUser(platform, {
      username: "outside-member",
      orgId: survivor,
      membership: { contextType: "org", contextId: doomed, roles: ["ORG_OWNER_VIEWER"] },
    });
    const { PROJECT, ProjectEvent } = await import("../../domain/project/events.ts");
    const projectId = newId();
    await platform.eventStore.push({ instanceId, creator: "test" }, async () => [
      {
        aggregateType: PROJECT,
        aggregateId: projectId,
        resourceOwner: doomed,
        type: ProjectEvent.added,
        payload: { name: "Doomed project", project_role_assertion: false, project_role_check: false },
      },
    ]);
    assert.equal((await rest("GET", `${ORGS}/${doomed}`, { token: member.token })).status, 200);
    assert.equal((await rest("GET", `${ORGS}/${doomed}`, { token: outsider.token })).status, 200);

    const deleted = await rest("DELETE", `${ORGS}/${doomed}`);
    assert.equal(deleted.status, 200, JSON.stringify(deleted.json));

    const count = async (sql: string, params: unknown[]) =>
      Number((await platform.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${sql}`, params))[0].n);
    assert.equal(await count("users WHERE instance_id = $1 AND org_id = $2", [instanceId, doomed]), 0);
    assert.equal(await count("projects WHERE instance_id = $1 AND org_id = $2", [instanceId, doomed]), 0);
    assert.equal(
      await count("memberships WHERE instance_id = $1 AND (context_id = $2 OR user_id = ANY($3))", [
        instanceId,
        doomed,
        [member.userId, instanceMember.userId],
      ]),
      0,
    );
    assert.equal(await count("users WHERE instance_id = $1 AND id = $2", [instanceId, outsider.userId]), 1);
    const events = await platform.db.query<{ event_type: string }>(
      "SELECT event_type FROM events WHERE instance_id = $1 AND aggregate_id = ANY($2) ORDER BY position DESC LIMIT 3",
      [instanceId, [member.userId, instanceMember.userId, projectId]],
    );
    assert.ok(events.some((e) => e.event_type === "user.removed"));
    assert.ok(events.some((e) => e.event_type === "project.removed"));
    // the removed users' tokens no longer work; usernames are free again
    assert.equal((await rest("POST", `${ORGS}/_search`, { token: member.token, json: [] })).status, 401);
    assert.equal(
      (await rest("POST", `${ORGS}/_search`, { token: instanceMember.token, json: [] })).status,
      401,
    );
    assert.equal((await rest("GET", `${ORGS}/${doomed}`, { token: outsider.token })).status, 404);
    await addMachineUser(platform, { username: "doomed-member" });
  });
});
