import assert from "node:assert/strict";
import http from "node:http";
import { Writable } from "node:stream";
import { after, before, describe, test } from "node:test";
import type { HandlerContext } from "@connectrpc/connect";
import fastify, { type FastifyInstance } from "fastify";
import { testTime } from "../../../test/time.ts";
import { PlatformFeatureSettings } from "../../gen/platform/settings/feature/v3alpha/feature_service_pb.ts";
import {
  type CreateThingRequest,
  type EchoRequest,
  type GetThingRequest,
  PlatformTesting,
  type PutThingRequest,
  type SearchThingsRequest,
} from "../../gen/platform/testing/v1/testing_pb.ts";
import { apiService, registerApi, setHttpStatus } from "../register.ts";
import type { RequestScope } from "../scope.ts";
import { languageService } from "../test-support.ts";
import { collectRestRoutes } from "./transcoder.ts";

const logLines: string[] = [];
let app: FastifyInstance;
let base: string;
const existing = new Set<string>();
/** Calls whose signal was aborted, with the reason (see getThing). */
const aborted = new Map<string, string>();

const testingImpl = {
  createThing(req: CreateThingRequest) {
    return { details: { id: `id-${req.thing?.name}`, sequence: 1n } };
  },
  putThing(req: PutThingRequest, ctx: HandlerContext) {
    const created = !existing.has(req.id);
    existing.add(req.id);
    setHttpStatus(ctx, created ? 201 : 200);
    ctx.responseHeader.set("x-created", String(created));
    return { details: { id: req.id } };
  },
  async getThing(req: GetThingRequest, ctx: HandlerContext) {
    // "abort-*": the client closes the connection before the answer; the signal, read at once ("abort-early")
    // or only after the close ("abort-late"), reports it
    if (req.id.startsWith("abort-")) {
      if (req.id === "abort-late") await new Promise((resolve) => setTimeout(resolve, 300));
      const { signal } = ctx;
      if (!signal.aborted) await new Promise((resolve) => signal.addEventListener("abort", resolve));
      aborted.set(req.id, String(signal.reason));
    }
    return {
      id: req.id,
      thing: { name: "n", targetType: { case: "restWebhook" as const, value: { url: "https://a.example" } } },
    };
  },
  searchThings(req: SearchThingsRequest) {
    return req;
  },
  echo(req: EchoRequest) {
    return req;
  },
};

before(async () => {
  const stream = new Writable({
    write(chunk, _enc, cb) {
      logLines.push(String(chunk));
      cb();
    },
  });
  app = fastify({ logger: { level: "error", stream }, routerOptions: { maxParamLength: 1000 } });
  app.decorateRequest("scope", null as unknown as RequestScope);
  app.addHook("onRequest", async (req) => {
    req.scope = { requestId: "r", host: req.host, instanceId: "i1" };
  });
  registerApi(app, [
    languageService(),
    apiService(PlatformTesting, testingImpl),
    { service: PlatformFeatureSettings, impl: {} }, // nothing implemented: UNIMPLEMENTED
  ]);
  await app.listen({ host: "127.0.0.1", port: 0 });
  base = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
});
after(async () => {
  await app.close();
});

async function call(method: string, path: string, body?: unknown, contentType = "application/json") {
  const res = await fetch(base + path, {
    method,
    headers: body === undefined ? {} : { "content-type": contentType },
    body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, json: text ? JSON.parse(text) : undefined, headers: res.headers };
}

describe("REST transcoder", () => {
  test("routes come from the google.api.http options", () => {
    const routes = collectRestRoutes([PlatformTesting]).map(
      (r) => `${r.httpMethod} ${r.path} body=${r.body}`,
    );
    assert.deepEqual(routes, [
      "POST /testing/v1/things body=thing",
      "PUT /testing/v1/things/:p0 body=*",
      "GET /testing/v1/things/:p0 body=",
      "POST /testing/v1/things/_search body=filters",
      "GET /testing/v1/echo/:p0 body=",
    ]);
  });

  test("PATCH accepts snake_case and lowerCamelCase bodies; GET reads ctx.org_id and ctx.orgId", async () => {
    const snake = await call("PATCH", "/settings/v3alpha/languages?ctx.org_id=o1", {
      default_language: { key: "de" },
      restricted_languages: { languages: [{ key: "de" }] },
    });
    assert.equal(snake.status, 200);
    assert.equal(snake.json.details.sequence, "1");
    const camel = await call("PATCH", "/settings/v3alpha/languages?ctx.orgId=o2", {
      defaultLanguage: { key: "de" },
      restrictedLanguages: { languages: [{ key: "de" }] },
    });
    assert.equal(camel.status, 200);
    assert.deepEqual(camel.json.details.owner, { type: "OWNER_TYPE_ORG", id: "o2" });
    const a = await call("GET", "/settings/v3alpha/languages?ctx.org_id=o1");
    const b = await call("GET", "/settings/v3alpha/languages?ctx.orgId=o2");
    assert.equal(a.status, 200);
    a.json.details.owner.id = b.json.details.owner.id;
    assert.deepEqual(a.json, b.json);
    assert.deepEqual(a.json.settings.default_language, { value: "de" });
    // default context: the instance of the scope
    const inst = await call("GET", "/settings/v3alpha/languages");
    assert.deepEqual(inst.json.details.owner, { type: "OWNER_TYPE_INSTANCE", id: "i1" });
  });

  test("an empty body means the body field is not set", async () => {
    const r = await call("PATCH", "/settings/v3alpha/languages?ctx.org_id=o3", "");
    assert.equal(r.status, 200);
    const g = await call("GET", "/settings/v3alpha/languages?ctx.org_id=o3");
    assert.deepEqual(g.json.settings.default_language.owner, { type: "OWNER_TYPE_SYSTEM", id: "" });
    const none = await call("PATCH", "/settings/v3alpha/languages?ctx.org_id=o3");
    assert.equal(none.status, 200);
  });

  test("malformed JSON, unknown fields and bad values are 400 rpcStatus naming the problem", async () => {
    const bad = await call("PATCH", "/settings/v3alpha/languages", "{not json");
    assert.equal(bad.status, 400);
    assert.equal(bad.json.code, 3);
    assert.match(bad.json.message, /^invalid JSON body: /);
    assert.deepEqual(bad.json.details, []);

    const unknown = await call("PATCH", "/settings/v3alpha/languages", {
      default_language: { key: "de", bogus: 1 },
    });
    assert.equal(unknown.status, 400);
    assert.equal(unknown.json.code, 3);
    assert.match(unknown.json.message, /key "bogus" is unknown/);

    const unknownTop = await call("PATCH", "/settings/v3alpha/languages", {
      defaultLanguage: { key: "de" },
      foo: true,
    });
    assert.equal(unknownTop.status, 400);
    assert.match(unknownTop.json.message, /"foo" is unknown/);

    const wrongType = await call("PATCH", "/settings/v3alpha/languages", { default_language: "de" });
    assert.equal(wrongType.status, 400);
    assert.match(
      wrongType.json.message,
      /^settings\.default_language: expected a JSON object \(platform\.settings\.language\.v3alpha\.Language\), got "de"$/,
    );

    const query = await call("GET", "/settings/v3alpha/languages?ctx.nope=1");
    assert.equal(query.status, 400);
    assert.deepEqual(query.json, { code: 3, message: 'unknown query parameter "ctx.nope"', details: [] });

    const oneof = await call("GET", "/settings/v3alpha/languages?ctx.org_id=1&ctx.system=true");
    assert.equal(oneof.status, 400);
    assert.match(oneof.json.message, /ctx\.system: only one of system, instance_id/);

    const sysFalse = await call("GET", "/settings/v3alpha/languages?ctx.system=false");
    assert.deepEqual(sysFalse.json, { code: 3, message: "ctx.system: must be true", details: [] });
  });

  test("validation errors over REST name the dotted snake_case field", async () => {
    for (const key of ["EN", "eng"]) {
      const r = await call("PATCH", "/settings/v3alpha/languages", { defaultLanguage: { key } });
      assert.equal(r.status, 400);
      assert.equal(r.json.code, 3);
      assert.equal(r.json.message, "settings.default_language.key: must match ^[a-z]{2}$");
    }
    // an empty default language is not a validation error: it resets the default language to the inherited one
    const reset = await call("PATCH", "/settings/v3alpha/languages?ctx.org_id=o-reset", {
      defaultLanguage: { key: "" },
    });
    assert.equal(reset.status, 200, JSON.stringify(reset.json));
    assert.deepEqual(reset.json, {
      details: {
        sequence: "1",
        change_date: "2024-05-06T07:08:09.123Z",
        owner: { type: "OWNER_TYPE_ORG", id: "o-reset" },
      },
    });
    const list = await call("PATCH", "/settings/v3alpha/languages", {
      restricted_languages: { languages: [{ key: "de" }, { key: "DE" }] },
    });
    assert.equal(list.json.message, "settings.restricted_languages.languages[1].key: must match ^[a-z]{2}$");
    const uri = await call("POST", "/testing/v1/things", { name: "t", rest_webhook: { url: "no uri" } });
    assert.deepEqual(uri.json, { code: 3, message: "thing.rest_webhook.url: must be a URI", details: [] });
    const oneof = await call("POST", "/testing/v1/things", { name: "t" });
    assert.equal(oneof.json.message, "thing.target_type: one of rest_webhook, rest_call must be set");
    const required = await call("POST", "/testing/v1/things", "");
    assert.equal(required.json.message, "thing: is required");
    const enumValue = await call("POST", "/testing/v1/things", {
      name: "t",
      restCall: { url: "https://x" },
      kind: 9,
    });
    assert.equal(enumValue.json.message, "thing.kind: must be a defined value");
  });

  test("Create RPCs answer 201, setHttpStatus overrides, response headers are forwarded", async () => {
    const created = await call("POST", "/testing/v1/things", {
      name: "t",
      rest_webhook: { url: "https://x.example/h" },
    });
    assert.equal(created.status, 201);
    assert.deepEqual(created.json, { details: { id: "id-t", sequence: "1" } });

    const body = { thing: { name: "t", rest_call: { url: "https://x.example/h" } } };
    const first = await call("PUT", "/testing/v1/things/p1", body);
    assert.equal(first.status, 201);
    assert.equal(first.headers.get("x-created"), "true");
    const second = await call("PUT", "/testing/v1/things/p1", body);
    assert.equal(second.status, 200);
    assert.equal(second.headers.get("x-created"), "false");
    // the implementation sets no sequence: its default is emitted too
    assert.deepEqual(second.json, { details: { id: "p1", sequence: "0" } });
  });

  test("path IDs may contain percent-encoded slashes and be long", async () => {
    const r = await call("GET", "/testing/v1/things/a%2Fb%2Fc");
    assert.equal(r.status, 200);
    assert.equal(r.json.id, "a/b/c");
    const long = "x".repeat(150);
    const l = await call("GET", `/testing/v1/things/${long}`);
    assert.equal(l.json.id, long);
    const tooLong = await call("GET", `/testing/v1/things/${"y".repeat(201)}`);
    assert.deepEqual(tooLong.json, { code: 3, message: "id: must be at most 200 characters", details: [] });
    const space = await call("GET", "/testing/v1/things/a%20b");
    assert.equal(space.json.id, "a b");
  });

  test("a repeated body field takes a JSON array; query params fill nested fields, enums by name or number", async () => {
    const r = await call(
      "POST",
      "/testing/v1/things/_search?query.limit=10&query.asc=true&query.offset=5&sorting_column=THING_KIND_BIG&ctx.org_id=123",
      [
        { name: { name: "a", method: "TEXT_FILTER_METHOD_CONTAINS" } },
        { state: { state: "EFFECTIVE_STATE_ACTIVE" } },
      ],
    );
    assert.equal(r.status, 200);
    assert.deepEqual(r.json, {
      ctx: { org_id: "123" },
      query: { offset: "5", limit: 10, asc: true },
      sorting_column: "THING_KIND_BIG",
      filters: [
        { name: { name: "a", method: "TEXT_FILTER_METHOD_CONTAINS" } },
        { state: { state: "EFFECTIVE_STATE_ACTIVE" } },
      ],
    });
    const byNumber = await call("POST", "/testing/v1/things/_search?sortingColumn=1", "");
    assert.equal(byNumber.status, 200);
    assert.deepEqual(byNumber.json, { sorting_column: "THING_KIND_SMALL", filters: [] });
    const badFilter = await call("POST", "/testing/v1/things/_search", [{ name: { name: "a" } }, {}]);
    assert.deepEqual(badFilter.json, {
      code: 3,
      message: "filters[1].filter: one of name, state must be set",
      details: [],
    });
    const notArray = await call("POST", "/testing/v1/things/_search", { name: { name: "a" } });
    assert.equal(notArray.status, 400);
    const badEnum = await call("POST", "/testing/v1/things/_search?sorting_column=NOPE");
    assert.equal(badEnum.status, 400);
    assert.match(badEnum.json.message, /NOPE/);
    const undefinedEnum = await call("POST", "/testing/v1/things/_search?sorting_column=7");
    assert.deepEqual(undefinedEnum.json, {
      code: 3,
      message: "sorting_column: must be a defined value",
      details: [],
    });
    // the body field cannot be set from the query: ignored like grpc-gateway
    const ignored = await call("POST", "/testing/v1/things/_search?filters.x=1", "");
    assert.equal(ignored.status, 400); // filters.x is not a field path (filters is repeated)
  });

  test("query parameters of every scalar kind, repeated and nested, snake_case and lowerCamelCase", async () => {
    const q = [
      "text=hello+world",
      "int32Value=-5",
      "uint64_value=18446744073709551615",
      "flag=true",
      "kind=THING_KIND_BIG",
      "names=a",
      "names=b",
      "kinds=1",
      "kinds=THING_KIND_BIG",
      "ratio=1.5",
      "data=aGk%3D",
      "timeout=1.5s",
      "maybe=",
      "nested.flag=1",
      "nested.id=ignored",
    ].join("&");
    const r = await call("GET", `/testing/v1/echo/n%2F1?${q}`);
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.deepEqual(r.json, {
      nested: { id: "n/1", flag: true },
      text: "hello world",
      int32_value: -5,
      uint64_value: "18446744073709551615",
      flag: true,
      kind: "THING_KIND_BIG",
      names: ["a", "b"],
      kinds: ["THING_KIND_SMALL", "THING_KIND_BIG"],
      ratio: 1.5,
      data: "aGk=",
      timeout: "1.500s",
      maybe: "",
      labels: {},
    });

    for (const [query, pattern] of [
      ["flag=yes", /flag: invalid boolean "yes"/],
      ["int32Value=abc", /int32_value/],
      ["text=a&text=b", /"text": given more than once/],
      ["labels=x", /map fields/],
      ["nested=x", /a message cannot be set from the path or query/],
    ] as const) {
      const e = await call("GET", `/testing/v1/echo/x?${query}`);
      assert.equal(e.status, 400, query);
      assert.equal(e.json.code, 3, query);
      assert.match(e.json.message, pattern, query);
    }
  });

  test("unknown paths below a REST prefix and unimplemented RPCs answer rpcStatus JSON", async () => {
    const nf = await call("GET", "/settings/v3alpha/nothing");
    assert.equal(nf.status, 404);
    assert.deepEqual(nf.json, {
      code: 5,
      message: "no REST route for GET /settings/v3alpha/nothing",
      details: [],
    });
    const wrongMethod = await call("DELETE", "/settings/v3alpha/languages");
    assert.equal(wrongMethod.status, 404);
    assert.equal(wrongMethod.json.code, 5);
    const unimplemented = await call("GET", "/settings/v3alpha/features");
    assert.equal(unimplemented.status, 501);
    assert.equal(unimplemented.json.code, 12);
  });

  test("internal errors are logged with the real error and answered as 'internal error'", async () => {
    logLines.length = 0;
    const r = await call("GET", "/settings/v3alpha/languages?ctx.org_id=boom");
    assert.equal(r.status, 500);
    assert.deepEqual(r.json, { code: 13, message: "internal error", details: [] });
    assert.ok(!JSON.stringify(r.json).includes("SELECT"));
    assert.ok(
      logLines.some((l) => l.includes("SELECT * FROM secret")),
      "the real error is logged",
    );
  });

  test("PlatformErrors keep code and message", async () => {
    const denied = await call("PATCH", "/settings/v3alpha/languages?ctx.org_id=deny", {
      default_language: { key: "de" },
    });
    assert.equal(denied.status, 403);
    assert.deepEqual(denied.json, {
      code: 7,
      message: "no permission for the settings of this context",
      details: [],
    });
    const invalid = await call("GET", "/settings/v3alpha/languages?ctx.org_id=invalid");
    assert.deepEqual(invalid.json, { code: 3, message: "ctx.org_id: is not usable", details: [] });
  });

  test("the call's signal is aborted when the client closes the connection, read before or after", async () => {
    for (const id of ["abort-early", "abort-late"]) {
      const req = http.get(`${base}/testing/v1/things/${id}`);
      req.on("error", () => {});
      await new Promise((resolve) => setTimeout(resolve, 100));
      req.destroy();
      for (let i = 0; i < testTime(50) && !aborted.has(id); i++)
        await new Promise((resolve) => setTimeout(resolve, 20));
      assert.equal(aborted.get(id), "Error: client closed the connection", id);
    }
  });

  test("an empty JSON array body and a JSON null body", async () => {
    const r = await call("POST", "/testing/v1/things/_search?query.limit=3", "[]");
    // implicit defaults are emitted: unset scalars and enums at their zero value, empty lists; unset messages
    // (ctx) and oneofs stay absent
    assert.deepEqual(r.json, {
      query: { offset: "0", limit: 3, asc: false },
      sorting_column: "THING_KIND_UNSPECIFIED",
      filters: [],
    });
    const n = await call("POST", "/testing/v1/things/_search", "null");
    assert.deepEqual(n.json, { sorting_column: "THING_KIND_UNSPECIFIED", filters: [] });
  });
});
