import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { toJson } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import {
  assertRejected,
  assertRpcError,
  eventCount,
  grpcCall,
  type Json,
  type RestReply,
  restClient,
  startPlatform,
  type TestPlatform,
} from "../../../test/helpers.ts";
import {
  GetTargetResponseSchema,
  PlatformActions,
} from "../../gen/platform/resources/action/v3alpha/action_service_pb.ts";
import { addCallers } from "./testing.ts";

const TARGETS = "/resources/v3alpha/targets";

describe("actions: targets", () => {
  let platform: TestPlatform;
  let callers: Awaited<ReturnType<typeof addCallers>>;
  let rest: ReturnType<typeof restClient>;
  const valid = (name: string, extra: Record<string, unknown> = {}) => ({
    name,
    rest_webhook: { url: "https://example.com/hook" },
    timeout: "10s",
    interrupt_on_error: true,
    ...extra,
  });
  const createTarget = async (target: unknown) => rest("POST", TARGETS, { json: target });
  /** Asserts an rpcStatus error that stored nothing. */
  const rejects = (call: () => Promise<RestReply>, status: number, code: number, message?: RegExp | string) =>
    assertRejected(platform, call, status, code, message);
  const search = (query: string, filters?: unknown[]) =>
    rest("POST", `${TARGETS}/_search${query}`, filters ? { json: filters } : {});

  before(async () => {
    platform = await startPlatform({ listen: true });
    callers = await addCallers(platform);
    rest = restClient(platform, () => callers.owner);
  });
  after(() => platform.stop());

  it("creates a target (201, signing key) and gets it back with its key", async () => {
    const created = await createTarget(valid("first"));
    assert.equal(created.status, 201, JSON.stringify(created.json));
    const { id } = created.json.details;
    assert.match(id, /^\d+$/);
    assert.equal(created.json.details.sequence, "1");
    assert.deepEqual(created.json.details.resource_owner, {
      type: "OWNER_TYPE_INSTANCE",
      id: platform.bootstrapResult!.instanceId,
    });
    assert.ok(created.json.signing_key.length >= 32);
    const other = await createTarget(valid("second"));
    assert.notEqual(other.json.signing_key, created.json.signing_key, "one key per target");

    const got = await rest("GET", `${TARGETS}/${id}`);
    assert.equal(got.status, 200);
    assert.deepEqual(got.json.target.target, {
      name: "first",
      rest_webhook: { url: "https://example.com/hook" },
      timeout: "10s",
      interrupt_on_error: true,
      signing_key: created.json.signing_key,
    });
    assert.equal(got.json.target.details.id, id);
    assert.equal(got.json.target.details.change_date, created.json.details.change_date);
    // the key is never in an event
    const rows = await platform.db.query<{ payload: unknown }>(
      "SELECT payload FROM events WHERE aggregate_id = $1",
      [id],
    );
    assert.ok(!JSON.stringify(rows).includes(created.json.signing_key));
    // signing_key is output only: ignored in a create
    const ignored = await createTarget(valid("keyless", { signing_key: "chosen-by-caller" }));
    assert.equal(ignored.status, 201);
    assert.notEqual(ignored.json.signing_key, "chosen-by-caller");
  });

  it("validates every field of a create (one passing, one failing case each); nothing is stored on failure", async () => {
    const cases: [string, unknown, string | RegExp, number?][] = [
      ["name required", { ...valid(""), name: undefined }, "target.name: is required"],
      ["name identifier-like", valid("1abc"), "target.name: must match"],
      ["name no spaces", valid("a b"), "target.name: must match"],
      ["name at most 1000", valid(`a${"b".repeat(1000)}`), "target.name: must be at most 1000 characters"],
      ["target_type required", { ...valid("x"), rest_webhook: undefined }, "target.target_type: one of"],
      ["url required", valid("x", { rest_webhook: {} }), "target.rest_webhook.url: is required"],
      [
        "url at most 1000",
        valid("x", { rest_webhook: { url: `https://e.com/${"a".repeat(987)}` } }),
        "target.rest_webhook.url: must be at most 1000 characters",
      ],
      [
        "url a URI",
        valid("x", { rest_webhook: { url: "not a uri" } }),
        "target.rest_webhook.url: must be a URI",
      ],
      [
        "url http(s)",
        valid("x", { rest_webhook: undefined, rest_request_response: { url: "ftp://e.com/x" } }),
        "target.rest_request_response.url: must be an http or https URI",
      ],
      ["timeout required", { ...valid("x"), timeout: undefined }, "target.timeout: is required"],
      ["timeout positive", valid("x", { timeout: "0s" }), "target.timeout: must be greater than 0s"],
      ["timeout not negative", valid("x", { timeout: "-1s" }), "target.timeout: must be greater than 0s"],
      [
        "timeout at most 270s",
        valid("x", { timeout: "270.000000001s" }),
        "target.timeout: must be at most 270s",
      ],
      [
        "execution_type required",
        { ...valid("x"), interrupt_on_error: undefined },
        "target.execution_type: one of",
      ],
      ["target required", undefined, "target: is required"],
      ["unknown field", valid("x", { endpoint: "https://e.com" }), /endpoint/],
    ];
    for (const [what, body, message] of cases) {
      await rejects(
        () => (body === undefined ? rest("POST", TARGETS) : createTarget(body)),
        400,
        3,
        message,
      ).catch((e) => {
        throw new Error(`${what}: ${e.message}`);
      });
    }
    // the passing side of each rule
    for (const [what, body] of [
      ["name with . _ -", valid("a.b_c-D9")],
      ["name of 200", valid(`a${"b".repeat(199)}`)],
      ["name of 1000 (target strings: 1 to 1000)", valid(`a${"b".repeat(999)}`)],
      ["url of 1000", valid("long-url", { rest_webhook: { url: `https://e.com/${"a".repeat(986)}` } })],
      ["http url", valid("plain", { rest_webhook: { url: "http://localhost:8090/webhook" } })],
      [
        "request/response",
        valid("rr", { rest_webhook: undefined, rest_request_response: { url: "https://e.com" } }),
      ],
      ["timeout 270s", valid("slow", { timeout: "270s" })],
      ["timeout 1ns", valid("fast", { timeout: "0.000000001s" })],
      ["is_async", valid("async", { interrupt_on_error: undefined, is_async: true })],
      [
        "lowerCamelCase",
        { name: "camel", restWebhook: { url: "https://e.com" }, timeout: "1s", interruptOnError: false },
      ],
    ] as const) {
      const reply = await createTarget(body);
      assert.equal(reply.status, 201, `${what}: ${JSON.stringify(reply.json)}`);
    }
    // names are unique in the instance
    await rejects(() => createTarget(valid("slow")), 409, 6, 'a target named "slow" already exists');
  });

  it("patches only the fields present, switches the oneofs, and a no-op patch adds no event", async () => {
    const { json: body } = await createTarget(valid("patchable", { timeout: "5s" }));
    const id = body.details.id;
    const path = `${TARGETS}/${id}`;
    let reply = await rest("PATCH", path, { json: { name: "patched" } });
    assert.equal(reply.status, 200);
    assert.equal(reply.json.details.sequence, "2");
    let got = (await rest("GET", path)).json.target;
    assert.deepEqual(got.target, { ...valid("patched", { timeout: "5s" }), signing_key: body.signing_key });

    reply = await rest("PATCH", path, {
      json: { rest_request_response: { url: "https://other.example/rr" }, is_async: true, timeout: "2.5s" },
    });
    assert.equal(reply.status, 200);
    got = (await rest("GET", path)).json.target;
    assert.deepEqual(got.target, {
      name: "patched",
      rest_request_response: { url: "https://other.example/rr" },
      timeout: "2.500s",
      is_async: true,
      signing_key: body.signing_key,
    });
    reply = await rest("PATCH", path, {
      json: { rest_webhook: { url: "https://back.example" }, interrupt_on_error: false },
    });
    got = (await rest("GET", path)).json.target;
    assert.deepEqual(got.target.rest_webhook, { url: "https://back.example" });
    assert.equal(got.target.interrupt_on_error, false);
    assert.equal(got.target.is_async, undefined);

    const before = await eventCount(platform);
    for (const json of [{}, { name: "patched", interrupt_on_error: false, timeout: "2.5s" }]) {
      reply = await rest("PATCH", path, { json });
      assert.equal(reply.status, 200);
      assert.equal(reply.json.details.sequence, got.details.sequence, "no-op");
      assert.equal(reply.json.details.change_date, got.details.change_date);
    }
    assert.equal(await eventCount(platform), before);

    await rejects(
      () => rest("PATCH", path, { json: { name: "bad name" } }),
      400,
      3,
      "target.name: must match",
    );
    await rejects(() => rest("PATCH", path, { json: { name: "" } }), 400, 3, "target.name: must match");
    await rejects(
      () => rest("PATCH", path, { json: { name: `p${"x".repeat(1000)}` } }),
      400,
      3,
      "target.name: must be at most 1000 characters",
    );
    const long = `p${"y".repeat(999)}`;
    assert.equal((await rest("PATCH", path, { json: { name: long } })).status, 200);
    assert.equal((await rest("GET", path)).json.target.target.name, long);
    assert.equal((await rest("PATCH", path, { json: { name: "patched" } })).status, 200);
    await rejects(
      () => rest("PATCH", path, { json: { timeout: "300s" } }),
      400,
      3,
      "target.timeout: must be at most 270s",
    );
    await rejects(
      () => rest("PATCH", path, { json: { rest_webhook: { url: "mailto:x@y.z" } } }),
      400,
      3,
      "target.rest_webhook.url: must be an http or https URI",
    );
    await rejects(() => rest("PATCH", path, { json: { name: "first" } }), 409, 6, 'a target named "first"');
    await rejects(() => rest("PATCH", `${TARGETS}/404404`, { json: { name: "x" } }), 404, 5);
    await rejects(
      () => rest("PATCH", `${TARGETS}/${"9".repeat(201)}`, { json: {} }),
      400,
      3,
      "id: must be at most 200",
    );
    // the old name is free again after a rename
    assert.equal((await createTarget(valid("patchable"))).status, 201);
  });

  it("gets and deletes by ID with 404 for unknown IDs and 400 for IDs above 200 characters", async () => {
    const { json: body } = await createTarget(valid("doomed"));
    const path = `${TARGETS}/${body.details.id}`;
    await rejects(
      () => rest("GET", `${TARGETS}/${"1".repeat(201)}`),
      400,
      3,
      "id: must be at most 200 characters",
    );
    assert.equal((await rest("GET", `${TARGETS}/${"1".repeat(200)}`)).status, 404);
    const deleted = await rest("DELETE", path);
    assert.equal(deleted.status, 200);
    assert.equal(deleted.json.details.id, body.details.id);
    assert.equal(deleted.json.details.sequence, "2");
    assertRpcError(await rest("GET", path), 404, 5);
    await rejects(() => rest("DELETE", path), 404, 5);
    await rejects(() => rest("DELETE", `${TARGETS}/${"1".repeat(201)}`), 400, 3, "id: must be at most 200");
    assert.equal((await createTarget(valid("doomed"))).status, 201, "the name is free again");
  });

  it("searches by name with every text filter method and by IDs", async () => {
    const ids: Record<string, string> = {};
    for (const name of ["Alpha.Hook", "alpha_hook2", "beta-alpha", "alphaxhook2"]) {
      ids[name] = (await createTarget(valid(name))).json.details.id;
    }
    const scope = { in_ids: { ids: Object.values(ids) } };
    const cases: [string, string, string[]][] = [
      ["TEXT_FILTER_METHOD_EQUALS", "Alpha.Hook", ["Alpha.Hook"]],
      ["TEXT_FILTER_METHOD_EQUALS_IGNORE_CASE", "alpha.hook", ["Alpha.Hook"]],
      ["TEXT_FILTER_METHOD_STARTS_WITH", "alpha", ["alpha_hook2", "alphaxhook2"]],
      ["TEXT_FILTER_METHOD_STARTS_WITH_IGNORE_CASE", "ALPHA", ["Alpha.Hook", "alpha_hook2", "alphaxhook2"]],
      ["TEXT_FILTER_METHOD_CONTAINS", "_", ["alpha_hook2"]],
      ["TEXT_FILTER_METHOD_CONTAINS_IGNORE_CASE", "HOOK", ["Alpha.Hook", "alpha_hook2", "alphaxhook2"]],
      ["TEXT_FILTER_METHOD_ENDS_WITH", "alpha", ["beta-alpha"]],
      ["TEXT_FILTER_METHOD_ENDS_WITH_IGNORE_CASE", "hook", ["Alpha.Hook"]],
    ];
    for (const [method, name, expected] of cases) {
      const reply = await search("?query.asc=true", [scope, { name: { name, method } }]);
      assert.equal(reply.status, 200, JSON.stringify(reply.json));
      assert.deepEqual(
        reply.json.result.map((r: Json) => r.target.name).sort(),
        [...expected].sort(),
        method,
      );
    }
    // numbers work for the enum too, and the name filter alone searches the whole instance
    const byNumber = await search("", [{ name: { name: "beta-alpha", method: 0 } }]);
    assert.deepEqual(
      byNumber.json.result.map((r: Json) => r.details.id),
      [ids["beta-alpha"]],
    );
    const byIds = await search("", [{ in_ids: { ids: [ids["beta-alpha"], "unknown"] } }]);
    assert.equal(byIds.json.details.total_result, "1");

    await rejects(
      () => search("", [{ name: { name: "a".repeat(201) } }]),
      400,
      3,
      "filters[0].name.name: must be at most 200",
    );
    assert.equal((await search("", [{ name: { name: "a".repeat(200) } }])).status, 200);
    await rejects(
      () => search("", [{ in_ids: { ids: [""] } }]),
      400,
      3,
      "filters[0].in_ids.ids[0]: must not be empty",
    );
    await rejects(
      () => search("", [{ in_ids: { ids: ["1".repeat(201)] } }]),
      400,
      3,
      "filters[0].in_ids.ids[0]: must be at most 200",
    );
    await rejects(() => search("", [{}]), 400, 3, "filters[0].filter: one of name, in_ids must be set");
    await rejects(
      () => search("", [{ name: { name: "a", method: 99 } }]),
      400,
      3,
      "filters[0].name.method: must be a defined value",
    );
  });

  it("sorts by every column in both directions and pages with total_result and end_of_list", async () => {
    const fixtures = [
      valid("sortc", { rest_webhook: { url: "https://b.example" }, timeout: "3s", interrupt_on_error: true }),
      valid("sorta", {
        rest_webhook: undefined,
        rest_request_response: { url: "https://c.example" },
        timeout: "1s",
        interrupt_on_error: undefined,
        is_async: true,
      }),
      valid("sortb", {
        rest_webhook: { url: "https://a.example" },
        timeout: "2s",
        interrupt_on_error: false,
      }),
    ];
    const ids: string[] = [];
    for (const f of fixtures) {
      ids.push((await createTarget(f)).json.details.id);
      await new Promise((r) => setTimeout(r, 5)); // distinct creation times
    }
    await rest("PATCH", `${TARGETS}/${ids[0]}`, { json: { timeout: "4s" } }); // sortc changed last
    const scope = [{ in_ids: { ids } }];
    const all = (await search("?query.asc=true", scope)).json.result;
    const byId = new Map(all.map((r: Json) => [r.details.id, r]));
    const key: Record<string, (r: Json) => string | number | boolean> = {
      TARGET_FIELD_NAME_ID: (r) => r.details.id,
      TARGET_FIELD_NAME_CREATION_DATE: (r) => ids.indexOf(r.details.id),
      TARGET_FIELD_NAME_CHANGE_DATE: (r) => r.details.change_date,
      TARGET_FIELD_NAME_NAME: (r) => r.target.name,
      TARGET_FIELD_NAME_TARGET_TYPE: (r) => (r.target.rest_webhook ? 1 : 2),
      TARGET_FIELD_NAME_URL: (r) => (r.target.rest_webhook ?? r.target.rest_request_response).url,
      TARGET_FIELD_NAME_TIMEOUT: (r) => Number.parseFloat(r.target.timeout),
      TARGET_FIELD_NAME_ASYNC: (r) => r.target.is_async === true,
      TARGET_FIELD_NAME_INTERRUPT_ON_ERROR: (r) => r.target.interrupt_on_error === true,
      TARGET_FIELD_NAME_UNSPECIFIED: (r) => ids.indexOf(r.details.id),
    };
    for (const [column, k] of Object.entries(key)) {
      for (const asc of [true, false]) {
        const expected = [...ids].sort((a, b) => {
          const [x, y] = [k(byId.get(a)), k(byId.get(b))];
          const order = x < y ? -1 : x > y ? 1 : a < b ? -1 : a > b ? 1 : 0;
          return asc ? order : -order;
        });
        const reply = await search(`?sorting_column=${column}&query.asc=${asc}`, scope);
        assert.equal(reply.status, 200);
        assert.equal(reply.json.sorting_column, column);
        assert.deepEqual(
          reply.json.result.map((r: Json) => r.details.id),
          expected,
          `${column} ${asc ? "asc" : "desc"}`,
        );
      }
    }
    // default: creation date, descending
    assert.deepEqual(
      (await search("", scope)).json.result.map((r: Json) => r.details.id),
      [...ids].reverse(),
    );

    let page = await search("?query.limit=2&query.asc=true", scope);
    assert.deepEqual(
      page.json.result.map((r: Json) => r.details.id),
      ids.slice(0, 2),
    );
    assert.deepEqual(
      { ...page.json.details, processed_sequence: undefined, timestamp: undefined },
      {
        applied_limit: 2,
        end_of_list: false,
        total_result: "3",
        processed_sequence: undefined,
        timestamp: undefined,
      },
    );
    assert.ok(Number(page.json.details.processed_sequence) > 0);
    page = await search("?query.limit=2&query.offset=2&query.asc=true", scope);
    assert.deepEqual(
      page.json.result.map((r: Json) => r.details.id),
      ids.slice(2),
    );
    assert.equal(page.json.details.end_of_list, true);
    assert.equal(page.json.details.total_result, "3");
    page = await search("?query.offset=10", scope);
    assert.deepEqual(page.json.result, []);
    assert.equal(page.json.details.total_result, "3");
    assert.equal(page.json.details.end_of_list, true);

    // no filters: every target of the instance
    const everything = await search("?query.limit=1000");
    assert.equal(everything.status, 200);
    assert.equal(everything.json.details.applied_limit, 1000);
    const count = await platform.db.query<{ n: number }>("SELECT count(*)::int AS n FROM action_targets");
    assert.equal(everything.json.details.total_result, String(count[0].n));
    assert.equal(everything.json.result.length, count[0].n);
    await rejects(() => search("?query.limit=1001"), 400, 3, "query.limit: must be at most 1000");
    await rejects(() => search("?sorting_column=42"), 400, 3, "sorting_column: must be a defined value");
  });

  it("IAM_OWNER_VIEWER reads but may not write; callers without an instance role get 403 everywhere", async () => {
    const { json: body } = await createTarget(valid("guarded"));
    const path = `${TARGETS}/${body.details.id}`;
    const viewer = { token: callers.viewer };
    assert.equal((await rest("GET", path, viewer)).status, 200);
    assert.equal((await rest("POST", `${TARGETS}/_search`, viewer)).status, 200);
    await rejects(() => rest("POST", TARGETS, { ...viewer, json: valid("viewer-made") }), 403, 7);
    await rejects(() => rest("PATCH", path, { ...viewer, json: { name: "renamed" } }), 403, 7);
    await rejects(() => rest("DELETE", path, viewer), 403, 7);
    for (const token of [callers.nobody, callers.orgOwner]) {
      await rejects(() => rest("GET", path, { token }), 403, 7);
      await rejects(() => rest("POST", `${TARGETS}/_search`, { token }), 403, 7);
      await rejects(() => rest("POST", TARGETS, { token, json: valid("nobody-made") }), 403, 7);
      await rejects(() => rest("PATCH", path, { token, json: { name: "renamed" } }), 403, 7);
      await rejects(() => rest("DELETE", path, { token }), 403, 7);
    }
    await rejects(() => rest("GET", path, { token: "invalid" }), 401, 16);
  });

  it("signing keys only for writers: IAM_OWNER_VIEWER gets targets without them (REST, gRPC, Connect)", async () => {
    const { json: body } = await createTarget(valid("keyed"));
    const { id } = body.details;
    const key: string = body.signing_key;
    const byName = [{ name: { name: "keyed" } }];
    const viewer = { token: callers.viewer };
    const got = await rest("GET", `${TARGETS}/${id}`, viewer);
    assert.equal(got.status, 200);
    assert.equal(got.json.target.target.name, "keyed");
    assert.equal(got.json.target.target.signing_key ?? "", "");
    const found = await rest("POST", `${TARGETS}/_search`, { ...viewer, json: byName });
    assert.deepEqual(
      found.json.result.map((r: Json) => [r.details.id, r.target.signing_key ?? ""]),
      [[id, ""]],
    );
    assert.ok(!got.text.includes(key) && !found.text.includes(key));
    for (const transport of [
      createGrpcTransport({ baseUrl: platform.url }),
      createConnectTransport({ baseUrl: platform.url, httpVersion: "1.1" }),
    ]) {
      const client = createClient(PlatformActions, transport);
      const as = (token: string) => ({ headers: { authorization: `Bearer ${token}` } });
      const search = {
        filters: [{ filter: { case: "name" as const, value: { name: "keyed", method: 0 } } }],
      };
      assert.equal((await client.getTarget({ id }, as(callers.viewer))).target!.target!.signingKey, "");
      const viewerFound = await client.searchTargets(search, as(callers.viewer));
      assert.deepEqual(
        viewerFound.result.map((r) => r.target!.signingKey),
        [""],
      );
      // the owner, who may write targets, still reads the key
      assert.equal((await client.getTarget({ id }, as(callers.owner))).target!.target!.signingKey, key);
      const ownerFound = await client.searchTargets(search, as(callers.owner));
      assert.deepEqual(
        ownerFound.result.map((r) => r.target!.signingKey),
        [key],
      );
    }
    assert.equal((await rest("GET", `${TARGETS}/${id}`)).json.target.target.signing_key, key);
    assert.equal((await search("", byName)).json.result[0].target.signing_key, key);
  });

  it("each feature flag off answers 400 FAILED_PRECONDITION naming it", async () => {
    const { json: body } = await createTarget(valid("flagged"));
    for (const flag of ["multitenancy_resources_api", "actions"]) {
      const set = await rest("PATCH", "/settings/v3alpha/features", { json: { [flag]: { set: false } } });
      assert.equal(set.status, 200);
      try {
        for (const [method, path, json] of [
          ["POST", TARGETS, valid("while-off")],
          ["GET", `${TARGETS}/${body.details.id}`, undefined],
          ["PATCH", `${TARGETS}/${body.details.id}`, { name: "renamed" }],
          ["DELETE", `${TARGETS}/${body.details.id}`, undefined],
          ["POST", `${TARGETS}/_search`, undefined],
        ] as const) {
          await rejects(
            () => rest(method, path, { json }),
            400,
            9,
            new RegExp(`feature "${flag}" is disabled`),
          );
        }
      } finally {
        await rest("PATCH", "/settings/v3alpha/features", { json: { [flag]: { reset: true } } });
      }
    }
    assert.equal((await rest("GET", `${TARGETS}/${body.details.id}`)).status, 200);
  });

  it("over gRPC (binary protobuf) too, a patch changes only the fields it sets, a false oneof member included", async () => {
    const { json: body } = await createTarget(valid("binary-patch", { timeout: "5s" }));
    const id = body.details.id;
    const target = async () => (await rest("GET", `${TARGETS}/${id}`)).json.target.target;
    const expected = { ...valid("binary-patch", { timeout: "5s" }), signing_key: body.signing_key };
    const grpc = (request: Json) =>
      grpcCall(platform, callers.owner, PlatformActions, "PatchTarget", { id, ...request });
    await grpc({ target: { timeout: "7s" } });
    assert.deepEqual(await target(), { ...expected, timeout: "7s" });
    await grpc({ target: { interrupt_on_error: false } });
    assert.deepEqual(await target(), { ...expected, timeout: "7s", interrupt_on_error: false });
    await grpc({ target: { rest_request_response: { url: "https://rr.example" } } });
    const { rest_webhook: _, ...withoutWebhook } = expected;
    assert.deepEqual(await target(), {
      ...withoutWebhook,
      rest_request_response: { url: "https://rr.example" },
      timeout: "7s",
      interrupt_on_error: false,
    });
  });

  it("gRPC gives the same results and errors as REST", async () => {
    const client = createClient(PlatformActions, createGrpcTransport({ baseUrl: platform.url }));
    const headers = { authorization: `Bearer ${callers.owner}` };
    const created = await client.createTarget(
      {
        target: {
          name: "grpc-made",
          targetType: { case: "restWebhook", value: { url: "https://grpc.example/hook" } },
          timeout: { seconds: 7n, nanos: 0 },
          executionType: { case: "interruptOnError", value: true },
        },
      },
      { headers },
    );
    assert.ok(created.signingKey.length >= 32);
    const id = created.details!.id;
    const viaGrpc = toJson(GetTargetResponseSchema, await client.getTarget({ id }, { headers }), {
      useProtoFieldName: true,
      alwaysEmitImplicit: true,
    });
    const viaRest = await rest("GET", `${TARGETS}/${id}`);
    assert.deepEqual(viaGrpc, viaRest.json);
    assert.equal(viaRest.json.target.target.signing_key, created.signingKey);

    const patched = await client.patchTarget({ id, target: { name: "grpc-patched" } }, { headers });
    assert.equal(patched.details!.sequence, 2n);
    const found = await client.searchTargets(
      { filters: [{ filter: { case: "name", value: { name: "grpc-patched", method: 0 } } }] },
      { headers },
    );
    assert.deepEqual(
      found.result.map((r) => r.details!.id),
      [id],
    );
    const restFound = await search("", [{ name: { name: "grpc-patched" } }]);
    assert.equal(restFound.json.result[0].target.name, "grpc-patched");

    const before = await eventCount(platform);
    await assert.rejects(
      client.createTarget(
        {
          target: {
            name: "bad",
            targetType: { case: "restWebhook", value: { url: "https://e.com" } },
            timeout: { seconds: 0n, nanos: 0 },
            executionType: { case: "isAsync", value: true },
          },
        },
        { headers },
      ),
      (e) =>
        e instanceof ConnectError &&
        e.code === Code.InvalidArgument &&
        /^target\.timeout:/.test(e.rawMessage),
    );
    await assert.rejects(
      client
        .getTarget({ id }, { headers: { authorization: `Bearer ${callers.viewer}` } })
        .then(() => client.deleteTarget({ id }, { headers: { authorization: `Bearer ${callers.viewer}` } })),
      (e) => e instanceof ConnectError && e.code === Code.PermissionDenied,
    );
    assert.equal(await eventCount(platform), before);
    await client.deleteTarget({ id }, { headers });
    await assert.rejects(
      client.getTarget({ id }, { headers }),
      (e) => e instanceof ConnectError && e.code === Code.NotFound,
    );
  });
});
