import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import {
  assertRejected,
  eventCount,
  type Json,
  type RestReply,
  restClient,
  startPlatform,
  type TestPlatform,
} from "../../../test/helpers.ts";
import { executionCandidates } from "../../domain/action/conditions.ts";
import { PlatformActions } from "../../gen/platform/resources/action/v3alpha/action_service_pb.ts";
import { PlatformLanguageSettings } from "../../gen/platform/settings/language/v3alpha/language_service_pb.ts";
import { findExecutionTargets } from "../../query/actions.ts";
import { addCallers } from "./testing.ts";

const EXECUTIONS = "/resources/v3alpha/executions";
const SVC = "platform.resources.action.v3alpha.PlatformActions";
const CREATE_TARGET = `/${SVC}/CreateTarget`;
const GET_TARGET = `/${SVC}/GetTarget`;
const LANG = "platform.settings.language.v3alpha.PlatformLanguageSettings";

describe("actions: executions", () => {
  let platform: TestPlatform;
  let callers: Awaited<ReturnType<typeof addCallers>>;
  let rest: ReturnType<typeof restClient>;
  let instanceId: string;
  let t1: string;
  let t2: string;
  let t3: string;
  const put = (execution: unknown, token?: string) => rest("POST", EXECUTIONS, { json: execution, token });
  const del = (id: string, token?: string) =>
    rest("DELETE", `${EXECUTIONS}/${encodeURIComponent(id)}`, { token });
  const search = (query: string, filters?: unknown[], token?: string) =>
    rest("POST", `${EXECUTIONS}/_search${query}`, { json: filters, token });
  const ids = (reply: RestReply) => reply.json.result.map((r: Json) => r.details.id);
  /** Asserts an rpcStatus error that stored nothing. */
  const rejects = (call: () => Promise<RestReply>, status: number, code: number, message?: RegExp | string) =>
    assertRejected(platform, call, status, code, message);
  const newTarget = async (name: string) =>
    (
      await rest("POST", "/resources/v3alpha/targets", {
        json: { name, rest_webhook: { url: `https://${name}.example/hook` }, timeout: "5s", is_async: false },
      })
    ).json.details.id as string;

  before(async () => {
    platform = await startPlatform({ listen: true });
    instanceId = platform.bootstrapResult!.instanceId;
    callers = await addCallers(platform);
    rest = restClient(platform, () => callers.owner);
    t1 = await newTarget("one");
    t2 = await newTarget("two");
    t3 = await newTarget("three");
  });
  after(() => platform.stop());

  it("lists the available functions, methods (of every registered service) and services", async () => {
    const functions = await rest("GET", `${EXECUTIONS}/functions`);
    assert.deepEqual(functions.json, { functions: ["preuserinfo", "preaccesstoken"] });
    const methods = (await rest("GET", `${EXECUTIONS}/methods`)).json.methods as string[];
    for (const m of [CREATE_TARGET, `/${SVC}/ListAvailableExecutionServices`, `/${LANG}/SetLanguages`]) {
      assert.ok(methods.includes(m), m);
    }
    assert.deepEqual(methods, [...methods].sort());
    const services = (await rest("GET", `${EXECUTIONS}/services`)).json.services as string[];
    assert.ok(services.includes(SVC) && services.includes(LANG));
    // generated from the descriptors: every method of the registered services, nothing else
    for (const service of [PlatformActions, PlatformLanguageSettings]) {
      for (const m of service.methods) assert.ok(methods.includes(`/${service.typeName}/${m.name}`), m.name);
    }
    assert.ok(methods.every((m) => services.includes(m.split("/")[1])));
  });

  it("puts an execution per condition with the contract's IDs: 201 when created, 200 when replaced", async () => {
    const cases: [unknown, string][] = [
      [{ request: { method: CREATE_TARGET } }, `request.${CREATE_TARGET}`],
      [{ request: { service: SVC } }, `request.${SVC}`],
      [{ request: { all: true } }, "request"],
      [{ response: { method: GET_TARGET } }, `response.${GET_TARGET}`],
      [{ response: { service: LANG } }, `response.${LANG}`],
      [{ response: { all: true } }, "response"],
      [{ event: { event: "user.human.added" } }, "event.user.human.added"],
      [{ event: { group: "user.human" } }, "event.user.human.*"],
      [{ event: { all: true } }, "event"],
      [{ function: "preuserinfo" }, "function.preuserinfo"],
    ];
    for (const [condition, id] of cases) {
      const created = await put({ condition, targets: [t1] });
      assert.equal(created.status, 201, JSON.stringify(created.json));
      assert.equal(created.json.details.id, id);
      assert.equal(created.json.details.resource_owner.id, instanceId);
      const found = await search("", [{ in_conditions: { conditions: [condition] } }]);
      assert.deepEqual(ids(found), [id]);
      assert.deepEqual(found.json.result[0].execution, { condition, targets: [t1], includes: [] });
    }
    // the same condition again: 200 and still one execution; same content again adds no event
    const again = await put({ condition: { request: { method: CREATE_TARGET } }, targets: [t2, t1] });
    assert.equal(again.status, 200);
    assert.equal(again.json.details.sequence, "2");
    const before = await eventCount(platform);
    const same = await put({ condition: { request: { method: CREATE_TARGET } }, targets: [t2, t1] });
    assert.equal(same.status, 200);
    assert.equal(same.json.details.sequence, "2");
    assert.equal(await eventCount(platform), before);
    const one = await search("", [
      { in_conditions: { conditions: [{ request: { method: CREATE_TARGET } }] } },
    ]);
    assert.equal(one.json.details.total_result, "1");
    assert.deepEqual(one.json.result[0].execution.targets, [t2, t1], "target order is kept");
  });

  it("validates conditions, targets and includes (one passing, one failing case each); nothing stored on failure", async () => {
    const ok = async (execution: unknown) => {
      const reply = await put(execution);
      assert.ok(reply.status === 201 || reply.status === 200, JSON.stringify(reply.json));
      return reply;
    };
    await rejects(() => put({ targets: [t1] }), 400, 3, "execution.condition: is required");
    await rejects(() => put({ condition: {} }), 400, 3, "execution.condition.condition_type: one of");
    await rejects(
      () => put({ condition: { request: {} } }),
      400,
      3,
      "execution.condition.request.condition: one of",
    );
    await rejects(
      () => put({ condition: { event: {} } }),
      400,
      3,
      "execution.condition.event.condition: one of",
    );
    await rejects(
      () => put({ condition: { request: { all: false } } }),
      400,
      3,
      "execution.condition.request.all: must be true",
    );
    await rejects(
      () => put({ condition: { request: { method: "/x.Y/Z", service: SVC } } }),
      400,
      3,
      /multiple|oneof|one of/i,
    );
    await rejects(
      () => put({ condition: { request: { method: "" } } }),
      400,
      3,
      "execution.condition.request.method: must not be empty",
    );
    await rejects(
      () => put({ condition: { request: { method: `/${"a".repeat(1000)}` } } }),
      400,
      3,
      "execution.condition.request.method: must be at most 1000",
    );
    await rejects(
      () => put({ condition: { request: { method: "/platform.Nope/Nothing" } } }),
      404,
      5,
      'execution.condition.request.method: method "/platform.Nope/Nothing" not found',
    );
    await rejects(
      () => put({ condition: { response: { service: "platform.Nope" } } }),
      404,
      5,
      'execution.condition.response.service: service "platform.Nope" not found',
    );
    await rejects(
      () => put({ condition: { function: "postauth" } }),
      404,
      5,
      'execution.condition.function: function "postauth" not found',
    );
    await ok({ condition: { function: "preaccesstoken" } });
    await rejects(
      () => put({ condition: { event: { event: "a".repeat(1001) } } }),
      400,
      3,
      "execution.condition.event.event: must be at most 1000",
    );
    await ok({ condition: { event: { event: "a".repeat(1000) } } });
    await rejects(
      () => put({ condition: { event: { group: "g".repeat(1001) } } }),
      400,
      3,
      "execution.condition.event.group: must be at most 1000",
    );
    await ok({ condition: { event: { group: "g".repeat(1000) } } });
    await rejects(
      () => put({ condition: { event: { group: "user.*" } } }),
      400,
      3,
      "execution.condition.event.group: must match",
    );
    await rejects(
      () => put({ condition: { event: { event: "user..added" } } }),
      400,
      3,
      "execution.condition.event.event: must match",
    );

    const cond = { request: { service: LANG } };
    await rejects(
      () => put({ condition: cond, targets: [t1, "404404"] }),
      404,
      5,
      "execution.targets[1]: target 404404 not found",
    );
    await rejects(
      () => put({ condition: cond, targets: [t1, t1] }),
      400,
      3,
      "execution.targets[1]: must be unique",
    );
    await rejects(
      () => put({ condition: cond, targets: ["1".repeat(201)] }),
      400,
      3,
      "execution.targets[0]: must be at most 200",
    );
    await ok({ condition: cond, targets: [t1, t2] });

    // includes: must exist, same type, not itself, no cycle, at most 3 levels
    const include = (condition: unknown, includes: string[]) => put({ condition, targets: [], includes });
    await rejects(
      () => include({ request: { method: `/${LANG}/SetLanguages` } }, [`request.${LANG}/x`]),
      400,
      3,
      "execution.includes[0]: ",
    );
    await rejects(
      () => include({ request: { method: `/${LANG}/SetLanguages` } }, ["response"]),
      400,
      3,
      'execution.includes[0]: "response" is a response execution',
    );
    await rejects(
      () => include({ request: { method: `/${LANG}/SetLanguages` } }, [`request./${LANG}/ResolveLanguages`]),
      404,
      5,
      "execution.includes[0]: execution",
    );
    await rejects(
      () => include(cond, [`request.${LANG}`]),
      400,
      9,
      "execution.includes[0]: an execution cannot include itself",
    );
    assert.equal(
      (await include({ request: { method: `/${LANG}/SetLanguages` } }, [`request.${LANG}`])).status,
      201,
    );
    await rejects(
      () => put({ condition: cond, targets: [t1], includes: [`request./${LANG}/SetLanguages`] }),
      400,
      9,
      /execution\.includes\[0\]: including .* would form a cycle/,
    );
    // a chain event.d → event.c → event.b → event.a is 3 levels: fine; a 4th is refused
    await ok({ condition: { event: { event: "a" } } });
    await ok({ condition: { event: { event: "b" } }, includes: ["event.a"] });
    await ok({ condition: { event: { event: "c" } }, includes: ["event.b"] });
    await ok({ condition: { event: { event: "d" } }, includes: ["event.c"] });
    await rejects(
      () => put({ condition: { event: { event: "e" } }, includes: ["event.d"] }),
      400,
      9,
      "execution.includes: includes would be nested more than 3 levels deep",
    );
    await rejects(
      () => put({ condition: { event: { event: "a" } }, includes: ["event.user.human.*"] }),
      400,
      9,
      "execution.includes: includes would be nested more than 3 levels deep",
    );
    await rejects(() => put({ condition: { event: { event: "a" } }, includes: ["event.nothing.*"] }), 404, 5);
  });

  it("event and group names are ASCII segments: 1000 of them are stored, multi-byte ones are 400 (never a 500 from an index)", async () => {
    // 1000 CJK characters are 3000 bytes: above what PostgreSQL's btree keys (events, action_executions) hold
    const cjk = Array.from({ length: 1000 }, (_, i) =>
      String.fromCodePoint(0x4e00 + ((i * 7919) % 20000)),
    ).join("");
    const long = Array.from({ length: 166 }, (_, i) => `a_B-${i % 10}`).join(".");
    assert.ok(long.length <= 1000 && long.length > 990);
    for (const member of ["event", "group"] as const) {
      for (const name of [cjk, "user.hümän.added", "user. human"]) {
        await rejects(
          () => put({ condition: { event: { [member]: name } } }),
          400,
          3,
          `execution.condition.event.${member}: must match`,
        );
      }
      const created = await put({ condition: { event: { [member]: long } }, targets: [t1] });
      assert.equal(created.status, 201, JSON.stringify(created.json));
      assert.equal(created.json.details.id, member === "event" ? `event.${long}` : `event.${long}.*`);
      const mixed = await put({ condition: { event: { [member]: "User_Human-2.added" } } });
      assert.equal(mixed.status, 201, JSON.stringify(mixed.json));
    }
    // an include naming such an event is not an execution ID (400), not a missing execution (404)
    await rejects(
      () =>
        put({ condition: { event: { event: "user.human.added" } }, includes: ["event.user.hümän.added"] }),
      400,
      3,
      'execution.includes[0]: "event.user.hümän.added" is not an execution ID',
    );
  });

  it("deletes an execution by its percent-encoded ID and removes it from the includes of others", async () => {
    await put({ condition: { response: { method: `/${LANG}/SetLanguages` } }, targets: [t3] });
    await put({
      condition: { response: { service: "platform.settings.feature.v3alpha.PlatformFeatureSettings" } },
      includes: [`response./${LANG}/SetLanguages`],
    });
    const raw = await rest("DELETE", `${EXECUTIONS}/response.%2F${LANG}%2FSetLanguages`);
    assert.equal(raw.status, 200, JSON.stringify(raw.json));
    assert.equal(raw.json.details.id, `response./${LANG}/SetLanguages`);
    assert.equal(
      (await search("", [{ include: { include: `response./${LANG}/SetLanguages` } }])).json.details
        .total_result,
      "0",
    );
    const includer = await search("", [
      {
        in_conditions: {
          conditions: [
            { response: { service: "platform.settings.feature.v3alpha.PlatformFeatureSettings" } },
          ],
        },
      },
    ]);
    assert.deepEqual(includer.json.result[0].execution.includes, []);
    await rejects(() => del(`response./${LANG}/SetLanguages`), 404, 5);
    await rejects(() => del("x".repeat(201)), 400, 3, "id: must be at most 200 characters");
    // deleted and put again: created (201)
    assert.equal((await put({ condition: { response: { method: `/${LANG}/SetLanguages` } } })).status, 201);
  });

  it("deleting a target removes it from every execution that uses it, in one push", async () => {
    const shared = await newTarget("shared");
    await put({ condition: { request: { method: GET_TARGET } }, targets: [t1, shared] });
    await put({ condition: { event: { group: "org" } }, targets: [shared] });
    assert.equal((await search("", [{ target: { id: shared } }])).json.details.total_result, "2");
    const before = await eventCount(platform);
    const deleted = await rest("DELETE", `/resources/v3alpha/targets/${shared}`);
    assert.equal(deleted.status, 200);
    assert.equal(await eventCount(platform), before + 3, "two execution.set and one target.removed");
    const positions = await platform.db.query<{ n: number }>(
      "SELECT count(DISTINCT created_at)::int AS n FROM events WHERE position > (SELECT max(position) - 3 FROM events)",
    );
    assert.equal(positions[0].n, 1, "appended in one transaction");
    assert.equal((await search("", [{ target: { id: shared } }])).json.details.total_result, "0");
    const left = await search("?query.asc=true", [
      { in_conditions: { conditions: [{ request: { method: GET_TARGET } }, { event: { group: "org" } }] } },
    ]);
    assert.deepEqual(
      left.json.result.map((r: Json) => [r.details.id, r.execution.targets]),
      [
        [`request.${GET_TARGET}`, [t1]],
        ["event.org.*", []],
      ],
    );
  });

  it("searches by execution type, target and include, pages, and caps the limit at 1000", async () => {
    const all = await search("?query.limit=1000");
    assert.equal(all.status, 200);
    const total = Number(all.json.details.total_result);
    assert.equal(all.json.result.length, total);
    const types = {
      EXECUTION_TYPE_REQUEST: "request",
      EXECUTION_TYPE_RESPONSE: "response",
      EXECUTION_TYPE_EVENT: "event",
      EXECUTION_TYPE_FUNCTION: "function",
    };
    let sum = 0;
    for (const [type, prefix] of Object.entries(types)) {
      const reply = await search("?query.limit=1000", [{ execution_type: { type } }]);
      assert.ok(reply.json.result.length > 0, type);
      assert.ok(
        ids(reply).every((id: string) => id === prefix || id.startsWith(`${prefix}.`)),
        type,
      );
      sum += reply.json.result.length;
    }
    assert.equal(sum, total);
    assert.deepEqual(ids(await search("", [{ include: { include: "event.c" } }])), ["event.d"]);
    const both = await search("", [
      { execution_type: { type: "EXECUTION_TYPE_EVENT" } },
      { target: { id: t1 } },
    ]);
    assert.ok(ids(both).every((id: string) => id.startsWith("event")));
    assert.ok(ids(both).includes("event.user.human.added"));

    const asc = ids(await search("?query.asc=true&query.limit=1000"));
    const desc = ids(await search("?query.limit=1000"));
    assert.deepEqual(desc, [...asc].reverse(), "creation date, descending by default");
    const page = await search("?query.asc=true&query.limit=3&query.offset=3");
    assert.deepEqual(ids(page), asc.slice(3, 6));
    assert.equal(page.json.details.total_result, String(total));
    assert.equal(page.json.details.end_of_list, total <= 6);
    const last = await search(`?query.asc=true&query.limit=3&query.offset=${total - 2}`);
    assert.equal(last.json.details.end_of_list, true);
    assert.equal(last.json.result.length, 2);

    await rejects(() => search("?query.limit=1001"), 400, 3, "query.limit: must be at most 1000");
    await rejects(
      () => search("", [{ execution_type: {} }]),
      400,
      3,
      "filters[0].execution_type.type: is required",
    );
    await rejects(() => search("", [{ target: { id: "" } }]), 400, 3, "filters[0].target.id: is required");
    await rejects(
      () => search("", [{ in_conditions: { conditions: [] } }]),
      400,
      3,
      /filters\[0\]\.in_conditions/,
    );
    await rejects(
      () => search("", [{ in_conditions: { conditions: [{}] } }]),
      400,
      3,
      "filters[0].in_conditions.conditions[0].condition_type",
    );
  });

  it("finds the most specific execution and its targets (with includes) in one query", async () => {
    const candidates = (method: string) => executionCandidates({ type: "request", method });
    assert.deepEqual(candidates(GET_TARGET), [`request.${GET_TARGET}`, `request.${SVC}`, "request"]);
    assert.deepEqual(executionCandidates({ type: "event", event: "user.human.added" }), [
      "event.user.human.added",
      "event.user.human.*",
      "event.user.*",
      "event",
    ]);
    const find = async (c: string[]) =>
      (await findExecutionTargets(platform.db, instanceId, c)).map((r) => [
        r.execution_id,
        r.listed_by,
        r.target_id,
      ]);
    assert.deepEqual(await find(candidates(GET_TARGET)), [
      [`request.${GET_TARGET}`, `request.${GET_TARGET}`, t1],
    ]);
    // the service's execution applies to its other methods
    assert.deepEqual(await find(candidates(`/${SVC}/DeleteTarget`)), [
      [`request.${SVC}`, `request.${SVC}`, t1],
    ]);
    // another service: the "all" execution
    assert.deepEqual(await find(candidates("/platform.other.v1.Other/Call")), [["request", "request", t1]]);
    // includes add their targets after the execution's own, depth first
    await put({
      condition: { request: { method: `/${SVC}/SearchTargets` } },
      targets: [t3],
      includes: [`request.${LANG}`],
    });
    assert.deepEqual(await find(candidates(`/${SVC}/SearchTargets`)), [
      [`request./${SVC}/SearchTargets`, `request./${SVC}/SearchTargets`, t3],
      [`request./${SVC}/SearchTargets`, `request.${LANG}`, t1],
      [`request./${SVC}/SearchTargets`, `request.${LANG}`, t2],
    ]);
    const plan = await platform.db.query<{ "QUERY PLAN": string }>(
      "EXPLAIN SELECT id FROM action_executions WHERE instance_id = $1 AND id = ANY($2::text[])",
      [instanceId, candidates(GET_TARGET)],
    );
    assert.ok(plan.map((r) => r["QUERY PLAN"]).join("\n").length > 0);
  });

  it("IAM_OWNER_VIEWER searches and lists but may not put or delete; no instance role: 403; flags off: 400", async () => {
    const viewer = callers.viewer;
    assert.equal((await search("", undefined, viewer)).status, 200);
    for (const list of ["functions", "methods", "services"]) {
      assert.equal((await rest("GET", `${EXECUTIONS}/${list}`, { token: viewer })).status, 200);
    }
    await rejects(() => put({ condition: { request: { all: true } } }, viewer), 403, 7);
    await rejects(() => del("request", viewer), 403, 7);
    for (const token of [callers.nobody, callers.orgOwner]) {
      await rejects(() => search("", undefined, token), 403, 7);
      for (const list of ["functions", "methods", "services"]) {
        await rejects(() => rest("GET", `${EXECUTIONS}/${list}`, { token }), 403, 7);
      }
      await rejects(() => put({ condition: { request: { all: true } } }, token), 403, 7);
      await rejects(() => del("request", token), 403, 7);
    }
    for (const flag of ["multitenancy_resources_api", "actions"]) {
      await rest("PATCH", "/settings/v3alpha/features", { json: { [flag]: { set: false } } });
      try {
        const message = new RegExp(`feature "${flag}" is disabled`);
        await rejects(() => put({ condition: { request: { all: true } } }), 400, 9, message);
        await rejects(() => del("request"), 400, 9, message);
        await rejects(() => search(""), 400, 9, message);
        for (const list of ["functions", "methods", "services"]) {
          await rejects(() => rest("GET", `${EXECUTIONS}/${list}`), 400, 9, message);
        }
      } finally {
        await rest("PATCH", "/settings/v3alpha/features", { json: { [flag]: { reset: true } } });
      }
    }
  });

  it("gRPC gives the same results as REST", async () => {
    const client = createClient(PlatformActions, createGrpcTransport({ baseUrl: platform.url }));
    const headers = { authorization: `Bearer ${callers.owner}` };
    const condition = { conditionType: { case: "function" as const, value: "preuserinfo" } };
    const replaced = await client.putExecution({ execution: { condition, targets: [t2] } }, { headers });
    assert.equal(replaced.details!.id, "function.preuserinfo");
    const found = await client.searchExecutions(
      { filters: [{ filter: { case: "inConditions", value: { conditions: [condition] } } }] },
      { headers },
    );
    assert.deepEqual(found.result[0].execution!.targets, [t2]);
    const viaRest = await search("", [{ in_conditions: { conditions: [{ function: "preuserinfo" }] } }]);
    assert.deepEqual(viaRest.json.result[0].execution.targets, [t2]);
    assert.equal(viaRest.json.result[0].details.sequence, String(found.result[0].details!.sequence));
    const methods = await client.listAvailableExecutionMethods({}, { headers });
    assert.deepEqual(methods.methods, (await rest("GET", `${EXECUTIONS}/methods`)).json.methods);
    const functions = await client.listAvailableExecutionFunctions({}, { headers });
    assert.deepEqual(functions.functions, ["preuserinfo", "preaccesstoken"]);
    const services = await client.listAvailableExecutionServices({}, { headers });
    assert.ok(services.services.includes(SVC));
    const before = await eventCount(platform);
    await assert.rejects(
      client.putExecution(
        { execution: { condition: { conditionType: { case: "function", value: "nope" } } } },
        { headers },
      ),
      (e) =>
        e instanceof ConnectError &&
        e.code === Code.NotFound &&
        /execution\.condition\.function/.test(e.rawMessage),
    );
    await assert.rejects(
      client.deleteExecution(
        { id: "function.preuserinfo" },
        { headers: { authorization: `Bearer ${callers.viewer}` } },
      ),
      (e) => e instanceof ConnectError && e.code === Code.PermissionDenied,
    );
    assert.equal(await eventCount(platform), before);
    await client.deleteExecution({ id: "function.preuserinfo" }, { headers });
    await assert.rejects(
      client.deleteExecution({ id: "function.preuserinfo" }, { headers }),
      (e) => e instanceof ConnectError && e.code === Code.NotFound,
    );
  });
});
