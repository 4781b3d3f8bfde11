import assert from "node:assert/strict";
import { after, before, beforeEach, describe, it } from "node:test";
import { Code } from "@connectrpc/connect";
import {
  addMachineUser,
  assertRpcError,
  type Json,
  type RestCall,
  restClient,
  startPlatform,
  type TestPlatform,
  testTime,
} from "../../test/helpers.ts";
import { verifySignature } from "./signing.ts";
import { actionsClient, TestTarget } from "./testing.ts";

const DELIVERIES = "/resources/v3alpha/executions/deliveries/_search";

const human = (username: string) => ({
  username,
  human: {
    profile: { given_name: "Grace", family_name: "Hopper" },
    email: { address: `${username}@example.com`, is_verified: true },
    password: { password: "Secret-Passw0rd!" },
  },
});

describe("executions: event conditions", () => {
  let platform: TestPlatform;
  let target: TestTarget;
  let owner: { userId: string; token: string };
  let rest: RestCall;
  let actions: ReturnType<typeof actionsClient>;
  let names = 0;
  const name = (prefix: string) => `${prefix}-${++names}`;

  before(async () => {
    platform = await startPlatform({
      listen: true,
      env: { PLATFORM_EXECUTION_RETRY_DELAY_MS: "50", PLATFORM_EXECUTION_MAX_ATTEMPTS: "3" },
    });
    target = await TestTarget.start();
    owner = await addMachineUser(platform, {
      username: "owner",
      membership: { contextType: "instance", roles: ["IAM_OWNER"] },
    });
    actions = actionsClient(platform, owner.token);
    rest = actions.rest;
  });
  after(async () => {
    await platform.stop();
    await target.close();
  });
  beforeEach(async () => {
    const all = await rest("POST", "/resources/v3alpha/executions/_search", { json: [] });
    for (const e of all.json.result)
      await rest("DELETE", `/resources/v3alpha/executions/${encodeURIComponent(e.details.id)}`);
  });

  const deliveries = async (filters: unknown[]) => {
    const reply = await rest("POST", `${DELIVERIES}?query.asc=true`, { json: filters });
    assert.equal(reply.status, 200, reply.text);
    return reply.json.result as Json[];
  };
  /** Waits until the deliveries of `targetId` are all finished (none pending). */
  const settled = async (targetId: string, count: number) => {
    const deadline = Date.now() + testTime(10_000);
    for (;;) {
      const rows = await deliveries([{ target: { id: targetId } }]);
      if (rows.length >= count && rows.every((r) => r.status !== "DELIVERY_STATUS_PENDING")) return rows;
      if (Date.now() > deadline) assert.fail(`deliveries not settled: ${JSON.stringify(rows)}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };

  it("user.human.added is delivered with the contract's fields, signed, without secrets", async (t) => {
    const path = `/${name("added")}`;
    const { id, signingKey } = await actions.target("on-user-added", target.url(path));
    await actions.execution({ event: { event: "user.human.added" } }, [id]);

    const created = await rest("POST", "/resources/v3alpha/users", { json: human("grace") });
    assert.equal(created.status, 201, created.text);
    const answered = performance.now();
    const [call] = await target.waitFor(path, 1);
    // how soon is the benchmarks' business (bench/), not an assertion's
    t.diagnostic(`delivered ${Math.round(call.at - answered)} ms after the answer`);

    const userId = created.json.details.id;
    assert.deepEqual(Object.keys(call.json).sort(), [
      "aggregate_id",
      "aggregate_type",
      "created_at",
      "event_payload",
      "event_type",
      "instance_id",
      "resource_owner",
      "sequence",
      "user_id",
    ]);
    assert.equal(call.json.event_type, "user.human.added");
    assert.equal(call.json.aggregate_type, "user");
    assert.equal(call.json.aggregate_id, userId);
    assert.equal(call.json.resource_owner, platform.bootstrapResult!.orgId);
    assert.equal(call.json.instance_id, platform.bootstrapResult!.instanceId);
    assert.equal(call.json.sequence, 1);
    assert.equal(call.json.user_id, owner.userId);
    assert.ok(Math.abs(Date.parse(call.json.created_at) - Date.now()) < 60_000);
    assert.equal(call.json.event_payload.username, "grace");
    assert.ok(!("password_hash" in call.json.event_payload), "no password hash");
    assert.doesNotMatch(call.body, /argon2|Secret-Passw0rd/);
    assert.ok(verifySignature(call.headers["platform-signature"] as string, call.body, signingKey));

    const [row] = await settled(id, 1);
    assert.equal(row.status, "DELIVERY_STATUS_DELIVERED");
    assert.equal(row.attempts, 1);
    assert.equal(row.execution_id, "event.user.human.added");
    assert.deepEqual(
      {
        type: row.event.type,
        aggregate_type: row.event.aggregate_type,
        aggregate_id: row.event.aggregate_id,
      },
      { type: "user.human.added", aggregate_type: "user", aggregate_id: userId },
    );
    assert.equal(row.last_http_status, 200);
    assert.ok(row.delivery_date);
  });

  it("groups (user.*) and all events; the most specific execution applies", async () => {
    const paths = { group: `/${name("group")}`, all: `/${name("all")}` };
    const group = await actions.target("on-user-group", target.url(paths.group));
    const all = await actions.target("on-all", target.url(paths.all));
    assert.equal(await actions.execution({ event: { group: "user" } }, [group.id]), "event.user.*");
    assert.equal(await actions.execution({ event: { all: true } }, [all.id]), "event");

    const created = await rest("POST", "/resources/v3alpha/users", { json: human("group-user") });
    const userId = created.json.details.id;
    const locked = await rest("POST", `/resources/v3alpha/users/${userId}/_lock`);
    assert.equal(locked.status, 200, locked.text);
    const language = await rest("PATCH", "/settings/v3alpha/languages", {
      json: { default_language: { key: "de" } },
    });
    assert.equal(language.status, 200, language.text);

    const groupCalls = await target.waitFor(paths.group, 2);
    assert.deepEqual(groupCalls.map((c) => c.json.event_type).sort(), ["user.human.added", "user.locked"]);
    const allCalls = await target.waitUntil(paths.all, (calls) =>
      calls.some((c) => c.json.event_type === "settings.changed"),
    );
    assert.ok(!allCalls.some((c) => c.json.aggregate_type === "user"), "user events go to the group only");
  });

  it("a target that fails twice, then succeeds, gets the event three times; the log says so", async () => {
    const path = `/${name("flaky")}`;
    target.on(path, (_call, nth) => (nth <= 2 ? { status: 500, body: "not yet" } : { status: 202 }));
    const { id } = await actions.target("flaky", target.url(path));
    await actions.execution({ event: { event: "user.locked" } }, [id]);
    const created = await rest("POST", "/resources/v3alpha/users", { json: human("flaky-user") });
    await rest("POST", `/resources/v3alpha/users/${created.json.details.id}/_lock`);

    const calls = await target.waitFor(path, 3);
    assert.equal(new Set(calls.map((c) => c.body)).size, 1, "the same event each time");
    const [row] = await settled(id, 1);
    assert.equal(row.status, "DELIVERY_STATUS_DELIVERED");
    assert.equal(row.attempts, 3);
    assert.equal(row.last_http_status, 202);
    assert.equal(row.last_error, `target flaky (${id}) answered HTTP 500: not yet`);
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(target.callsTo(path).length, 3, "not sent again once delivered");
  });

  it("gives up after PLATFORM_EXECUTION_MAX_ATTEMPTS; a deleted target's deliveries fail", async () => {
    const path = `/${name("broken")}`;
    target.on(path, () => ({ status: 503 }));
    const { id } = await actions.target("broken", target.url(path));
    await actions.execution({ event: { event: "user.unlocked" } }, [id]);
    const created = await rest("POST", "/resources/v3alpha/users", { json: human("broken-user") });
    const userId = created.json.details.id;
    await rest("POST", `/resources/v3alpha/users/${userId}/_lock`);
    await rest("POST", `/resources/v3alpha/users/${userId}/_unlock`);
    const [row] = await settled(id, 1);
    assert.equal(row.status, "DELIVERY_STATUS_FAILED");
    assert.equal(row.attempts, 3);
    assert.equal(row.last_error, `target broken (${id}) answered HTTP 503`);
    assert.equal(target.callsTo(path).length, 3);

    // a target deleted while its delivery waits: failed, not sent
    const slowPath = `/${name("doomed")}`;
    target.on(slowPath, () => ({ status: 500 }));
    const doomed = await actions.target("doomed", target.url(slowPath));
    await actions.execution({ event: { event: "user.locked" } }, [doomed.id]);
    await rest("POST", `/resources/v3alpha/users/${userId}/_lock`);
    await target.waitFor(slowPath, 1);
    assert.equal((await rest("DELETE", `/resources/v3alpha/targets/${doomed.id}`)).status, 200);
    const [gone] = await settled(doomed.id, 1);
    assert.equal(gone.status, "DELIVERY_STATUS_FAILED");
    assert.equal(gone.last_error, `target ${doomed.id} was deleted`);
  });

  it("secrets and hashes never appear in event payloads", async () => {
    const path = `/${name("all-events")}`;
    const { id } = await actions.target("everything", target.url(path));
    await actions.execution({ event: { all: true } }, [id]);
    const machine = await rest("POST", "/resources/v3alpha/users", {
      json: { username: "machine-with-secret", machine: { name: "M" } },
    });
    const userId = machine.json.details.id;
    const secret = await rest("POST", `/resources/v3alpha/users/${userId}/_generate_secret`);
    assert.equal(secret.status, 200, secret.text);
    const pat = await rest("POST", `/resources/v3alpha/users/${userId}/pats`, { json: {} });
    assert.equal(pat.status, 201, pat.text);
    const expected = ["user.machine.added", "user.machine.secret.set", "user.pat.added"];
    const calls = await target.waitUntil(path, (all) =>
      expected.every((type) => all.some((c) => c.json.event_type === type)),
    );
    for (const call of calls) {
      assert.doesNotMatch(call.body, /_hash"|"token"|"secret"/, call.body);
      assert.ok(!call.body.includes(secret.json.client_secret));
    }
  });

  it("the delivery log: filters, paging, permissions", async () => {
    const path = `/${name("logged")}`;
    const { id } = await actions.target("logged", target.url(path));
    await actions.execution({ event: { event: "user.human.added" } }, [id]);
    for (const username of ["log-a", "log-b", "log-c"])
      await rest("POST", "/resources/v3alpha/users", { json: human(username) });
    await settled(id, 3);

    const page = await rest("POST", `${DELIVERIES}?query.limit=2`, { json: [{ target: { id } }] });
    assert.equal(page.status, 200, page.text);
    assert.equal(page.json.details.total_result, "3");
    assert.equal(page.json.result.length, 2);
    assert.equal(page.json.details.end_of_list, false);
    const byStatus = await deliveries([
      { target: { id } },
      { status: { status: "DELIVERY_STATUS_DELIVERED" } },
    ]);
    assert.equal(byStatus.length, 3);
    const userId = byStatus[1].event.aggregate_id;
    const byAggregate = await deliveries([{ aggregate: { id: userId } }]);
    assert.deepEqual(
      byAggregate.map((r) => r.target_id),
      [id],
    );
    assert.equal((await deliveries([{ event_type: { type: "no.such.event" } }])).length, 0);

    const bad = await rest("POST", `${DELIVERIES}`, { json: [{ status: { status: 9 } }] });
    assertRpcError(bad, 400, Code.InvalidArgument, "filters[0].status.status: ");
    const tooMany = await rest("POST", `${DELIVERIES}?query.limit=1001`, { json: [] });
    assertRpcError(tooMany, 400, Code.InvalidArgument, "query.limit: ");

    const viewer = await addMachineUser(platform, {
      username: "viewer",
      membership: { contextType: "instance", roles: ["IAM_OWNER_VIEWER"] },
    });
    const nobody = await addMachineUser(platform, { username: "nobody" });
    const asViewer = await restClient(platform, () => viewer.token)("POST", DELIVERIES, { json: [] });
    assert.equal(asViewer.status, 200, asViewer.text);
    const asNobody = await restClient(platform, () => nobody.token)("POST", DELIVERIES, { json: [] });
    assertRpcError(asNobody, 403, Code.PermissionDenied);
  });
});
