import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { addMachineUser, eventCount, startPlatform, type TestPlatform } from "../../../test/helpers.ts";
import { addOrgEvents } from "../../domain/org/commands.ts";
import { PlatformOrganizations } from "../../gen/platform/resources/organization/v3alpha/organization_service_pb.ts";
import { newId } from "../../id.ts";

// biome-ignore lint/suspicious/noExplicitAny: JSON answers
type Json = Record<string, any>;

describe("organizations API", () => {
  let platform: TestPlatform;
  let owner: string;
  let instanceId: string;

  const api = async (method: string, path: string, token: string, body?: unknown) => {
    const response = await fetch(`${platform.url}/resources/v3alpha/organizations${path}`, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        ...(body !== undefined ? { "content-type": "application/json" } : {}),
      },
      body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
    });
    return { status: response.status, body: (await response.json()) as Json };
  };
  const createOrg = async (name: string, token = owner) => {
    const result = await api("POST", "", token, { name });
    assert.equal(result.status, 201, JSON.stringify(result.body));
    return result.body.details.id as string;
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
    const created = await api("POST", "", owner, { name: "Acme Corp" });
    assert.equal(created.status, 201);
    const id = created.body.details.id as string;
    assert.match(id, /^\d+$/);
    assert.deepEqual(created.body.details.resource_owner, { type: "OWNER_TYPE_INSTANCE", id: instanceId });

    let got = await api("GET", `/${id}`, owner);
    assert.equal(got.status, 200);
    assert.equal(got.body.organization.organization.name, "Acme Corp");
    assert.equal(got.body.organization.state, "ORGANIZATION_STATE_ACTIVE");
    assert.equal(got.body.organization.primary_domain, "acme-corp.localhost");
    assert.equal(got.body.organization.is_instance_default, false);
    assert.equal(got.body.organization.details.sequence, created.body.details.sequence);

    const patched = await api("PATCH", `/${id}`, owner, { name: "Acme Inc" });
    assert.equal(patched.status, 200);
    assert.ok(BigInt(patched.body.details.sequence) > BigInt(created.body.details.sequence));
    got = await api("GET", `/${id}`, owner);
    assert.equal(got.body.organization.organization.name, "Acme Inc");
    assert.equal(got.body.organization.primary_domain, "acme-corp.localhost", "the primary domain stays");

    const found = await api("POST", "/_search", owner, [
      { name: { name: "acme", method: "TEXT_FILTER_METHOD_STARTS_WITH_IGNORE_CASE" } },
    ]);
    assert.equal(found.status, 200);
    assert.deepEqual(
      found.body.result.map((o: Json) => o.details.id),
      [id],
    );
    assert.equal(found.body.details.total_result, "1");
    assert.equal(found.body.details.end_of_list, true);
    const byId = await api("POST", "/_search", owner, [
      { in_ids: { ids: [id] } },
      { state: { state: "ORGANIZATION_STATE_ACTIVE" } },
    ]);
    assert.equal(byId.body.result.length, 1);

    // the old name is free again, the new one is taken (ignoring case)
    const taken = await api("POST", "", owner, { name: "ACME INC" });
    assert.equal(taken.status, 409);
    assert.equal(taken.body.code, 6);

    const initialDefault = await api("GET", "/_instance_default", owner);
    assert.equal(initialDefault.status, 200);
    assert.equal(initialDefault.body.organization.details.id, platform.bootstrapResult!.orgId);
    assert.equal(initialDefault.body.organization.is_instance_default, true);

    const setDefault = await api("POST", `/${id}/_set_as_instance_default`, owner);
    assert.equal(setDefault.status, 200);
    assert.equal((await api("GET", "/_instance_default", owner)).body.organization.details.id, id);
    const undeletable = await api("DELETE", `/${id}`, owner);
    assert.equal(undeletable.status, 400);
    assert.equal(undeletable.body.code, 9);
    assert.match(undeletable.body.message, /default organization/);
    const back = await api("POST", `/${platform.bootstrapResult!.orgId}/_set_as_instance_default`, owner);
    assert.equal(back.status, 200);

    const before = await eventCount(platform);
    const deleted = await api("DELETE", `/${id}`, owner);
    assert.equal(deleted.status, 200);
    assert.ok((await eventCount(platform)) > before);
    assert.equal((await api("GET", `/${id}`, owner)).status, 404);
    assert.equal((await api("DELETE", `/${id}`, owner)).status, 404);
    assert.deepEqual((await api("POST", "/_search", owner, [{ in_ids: { ids: [id] } }])).body.result, []);
    // name and generated domain are released
    const again = await createOrg("Acme Inc");
    assert.equal(
      (await api("GET", `/${again}`, owner)).body.organization.primary_domain,
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

  it("a patch without changes succeeds and stores no event", async () => {
    const id = await createOrg("Unchanged");
    const current = await api("GET", `/${id}`, owner);
    const before = await eventCount(platform);
    for (const body of [{ name: "Unchanged" }, {}, ""]) {
      const result = await api("PATCH", `/${id}`, owner, body);
      assert.equal(result.status, 200, JSON.stringify(result.body));
      assert.equal(result.body.details.sequence, current.body.organization.details.sequence);
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
      const result = await api(method, path, owner, body);
      assert.equal(
        result.status,
        400,
        `${method} ${path} ${JSON.stringify(body)}: ${JSON.stringify(result.body)}`,
      );
      assert.equal(result.body.code, 3);
      assert.match(result.body.message, message, JSON.stringify(body));
    }
    const ctxOrg = await api("POST", `?ctx.org_id=${id}`, owner, { name: "In an org" });
    assert.equal(ctxOrg.status, 400);
    assert.match(ctxOrg.body.message, /^ctx: /);
    assert.equal(await eventCount(platform), before);
  });

  it("search: limit 1000 is accepted, 1001 is 400; default page of 100, newest first", async () => {
    const ok = await api("POST", "/_search?query.limit=1000", owner, []);
    assert.equal(ok.status, 200);
    assert.equal(ok.body.details.applied_limit, 1000);
    const tooMany = await api("POST", "/_search?query.limit=1001", owner, []);
    assert.equal(tooMany.status, 400);
    assert.equal(tooMany.body.code, 3);
    assert.match(tooMany.body.message, /^query\.limit: /);

    const first = await createOrg("Order 1");
    const second = await createOrg("Order 2");
    const third = await createOrg("Order 3");
    const ordered = await api("POST", "/_search", owner, [
      { name: { name: "Order ", method: "TEXT_FILTER_METHOD_STARTS_WITH" } },
    ]);
    assert.deepEqual(
      ordered.body.result.map((o: Json) => o.details.id),
      [third, second, first],
    );
    const asc = await api(
      "POST",
      "/_search?query.asc=true&sorting_column=ORGANIZATION_FIELD_NAME_NAME",
      owner,
      [{ name: { name: "order", method: "TEXT_FILTER_METHOD_CONTAINS_IGNORE_CASE" } }],
    );
    assert.deepEqual(
      asc.body.result.map((o: Json) => o.organization.name),
      ["Order 1", "Order 2", "Order 3"],
    );
    assert.equal(asc.body.sorting_column, "ORGANIZATION_FIELD_NAME_NAME");

    await platform.eventStore.push({ instanceId, creator: "test" }, async () =>
      Array.from({ length: 105 }, (_, i) => addOrgEvents(newId(), `Bulk ${i}`, "localhost")).flat(),
    );
    const page = await api("POST", "/_search", owner, []);
    assert.equal(page.status, 200);
    assert.equal(page.body.result.length, 100);
    assert.equal(page.body.details.applied_limit, 100);
    assert.equal(page.body.details.end_of_list, false);
    const total = Number(page.body.details.total_result);
    assert.ok(total > 105);
    assert.equal(page.body.result[0].organization.name, "Bulk 104");
    const ids = page.body.result.map((o: Json) => BigInt(o.details.id));
    assert.deepEqual(
      [...ids].sort((a, b) => (a > b ? -1 : a < b ? 1 : 0)),
      ids,
      "descending by creation",
    );
    const last = await api("POST", `/_search?query.offset=100`, owner, []);
    assert.equal(last.body.result.length, total - 100);
    assert.equal(last.body.details.end_of_list, true);
    assert.ok(BigInt(last.body.details.processed_sequence) > 0n);
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

    const seen = await api("POST", "/_search", ownerA, []);
    assert.equal(seen.status, 200);
    assert.deepEqual(
      seen.body.result.map((o: Json) => o.details.id),
      [orgA],
    );
    assert.equal(seen.body.details.total_result, "1");
    assert.equal((await api("GET", `/${orgA}`, ownerA)).status, 200);
    // An organization the caller may not read is unknown to it, like an unknown ID (contract.md §1).
    const hidden = await api("GET", `/${orgB}`, ownerA);
    assert.equal(hidden.status, 404);
    assert.deepEqual(hidden.body, { code: 5, message: "organization not found", details: [] });
    assert.deepEqual((await api("GET", `/${newId()}`, ownerA)).body, hidden.body);
    assert.deepEqual((await api("POST", "/_search", nobody, [])).body.result, []);

    const before = await eventCount(platform);
    assert.equal((await api("PATCH", `/${orgB}`, ownerA, { name: "Mine now" })).status, 404);
    assert.equal((await api("DELETE", `/${orgB}`, ownerA)).status, 404);
    assert.equal(
      (await api("POST", "", ownerA, { name: "New by org owner" })).status,
      403,
      "org.create is an instance permission",
    );
    assert.equal((await api("POST", `/${orgA}/_set_as_instance_default`, ownerA)).status, 403);
    assert.equal((await api("GET", "/_instance_default", ownerA)).status, 403);
    assert.equal((await api("GET", `/${orgA}`, "garbage")).status, 401);
    assert.equal(await eventCount(platform), before);
    assert.equal((await api("PATCH", `/${orgA}`, ownerA, { name: "Visible A2" })).status, 200);

    // Readable but not writable: 403.
    const { token: viewerB } = await addMachineUser(platform, {
      username: "viewer-b",
      orgId: orgB,
      membership: { contextType: "org", contextId: orgB, roles: ["ORG_OWNER_VIEWER"] },
    });
    const beforeViewer = await eventCount(platform);
    assert.equal((await api("GET", `/${orgB}`, viewerB)).status, 200);
    const denied = await api("PATCH", `/${orgB}`, viewerB, { name: "Mine now" });
    assert.equal(denied.status, 403);
    assert.equal(denied.body.code, 7);
    assert.equal((await api("DELETE", `/${orgB}`, viewerB)).status, 403);
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
    assert.equal((await api("GET", `/${doomed}`, member.token)).status, 200);
    assert.equal((await api("GET", `/${doomed}`, outsider.token)).status, 200);

    const deleted = await api("DELETE", `/${doomed}`, owner);
    assert.equal(deleted.status, 200, JSON.stringify(deleted.body));

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
    assert.equal((await api("POST", "/_search", member.token, [])).status, 401);
    assert.equal((await api("POST", "/_search", instanceMember.token, [])).status, 401);
    assert.equal((await api("GET", `/${doomed}`, outsider.token)).status, 404);
    await addMachineUser(platform, { username: "doomed-member" });
  });
});
