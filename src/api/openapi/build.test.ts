import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import path from "node:path";
import { before, describe, test } from "node:test";
import { fromJson, type JsonValue } from "@bufbuild/protobuf";
import { PlatformLanguageSettings } from "../../gen/platform/settings/language/v3alpha/language_service_pb.ts";
import { PlatformTesting } from "../../gen/platform/testing/v1/testing_pb.ts";
import { collectRestRoutes } from "../rest/transcoder.ts";
import { validate } from "../validate.ts";
import { buildOpenApi, DEFAULT_INFO, exampleFromPattern, openApiPath } from "./build.ts";
import { firstSentence, parseComment } from "./comments.ts";
import {
  COMMENTS_PATH,
  discoverServices,
  formatJson,
  type GeneratedOpenApi,
  generateOpenApi,
  OPENAPI_PATH,
  readProtoComments,
  repoRoot,
} from "./source.ts";

// biome-ignore lint/suspicious/noExplicitAny: walking a JSON document
type Any = any;

const LANG = "platform.settings.language.v3alpha";
const schemaRef = (name: string) => `#/components/schemas/${name}`;

let generated: GeneratedOpenApi;
let doc: Any;

before(async () => {
  generated = await generateOpenApi();
  doc = JSON.parse(generated.openapi);
});

/** Follows a local `$ref`. */
function deref(d: Any, node: Any): Any {
  let n = node;
  while (n && typeof n.$ref === "string") {
    n = n.$ref
      .slice(2)
      .split("/")
      .reduce((o: Any, k: string) => o?.[k.replaceAll("~1", "/").replaceAll("~0", "~")], d);
  }
  return n;
}

/** Every `$ref` in the document. */
function refs(node: unknown, out: string[] = []): string[] {
  if (Array.isArray(node)) {
    for (const n of node) refs(n, out);
  } else if (node && typeof node === "object") {
    for (const [k, v] of Object.entries(node)) {
      if (k === "$ref" && typeof v === "string") out.push(v);
      else refs(v, out);
    }
  }
  return out;
}

describe("OpenAPI document of the real services", () => {
  test("every annotated RPC of every non-testing service is an operation at its method and path", async () => {
    const services = await discoverServices();
    const names = services.map((s) => s.typeName);
    assert.ok(names.includes(`${LANG}.PlatformLanguageSettings`), names.join(", "));
    assert.ok(names.includes("platform.settings.feature.v3alpha.PlatformFeatureSettings"), names.join(", "));
    assert.ok(!names.some((n) => n.startsWith("platform.testing.")));
    const routes = collectRestRoutes(services);
    assert.ok(routes.length >= 4);
    for (const r of routes) {
      const p = openApiPath(r.template).path;
      const op = doc.paths[p]?.[r.httpMethod.toLowerCase()];
      assert.ok(op, `${r.httpMethod} ${p} (${r.method.name}) missing`);
      assert.match(op.operationId, new RegExp(`^(${r.service.name}_)?${r.method.name}(_\\d+)?$`));
      assert.deepEqual(op.tags, [r.service.name]);
      assert.equal(op["x-grpc-method"], `/${r.service.typeName}/${r.method.name}`);
      const success = r.method.name.startsWith("Create") ? "201" : "200";
      assert.ok(op.responses[success], `${r.method.name}: ${success}`);
      if (r.method.name.startsWith("Create")) assert.equal(op.responses["200"], undefined);
      for (const status of ["400", "401", "403", "404", "409", "429", "500"]) {
        const res = deref(doc, op.responses[status]);
        assert.equal(res.content["application/json"].schema.$ref, schemaRef("RpcStatus"), status);
      }
      if (r.body !== "") {
        assert.ok(
          op.requestBody.content["application/json"].example !== undefined,
          `${r.method.name} example`,
        );
      }
    }
    const ops = Object.values(doc.paths).flatMap((item: Any) => Object.values(item));
    assert.equal(ops.length, routes.length);
    const ids = ops.map((o: Any) => o.operationId);
    assert.equal(new Set(ids).size, ids.length, "operationIds are unique");
  });

  test("SetLanguages: PATCH with body SetLanguageSettings, summary and description from the proto comments", () => {
    const op = doc.paths["/settings/v3alpha/languages"].patch;
    assert.equal(op.operationId, "SetLanguages");
    assert.equal(op.summary, "Sets or unsets language settings in a context.");
    assert.match(op.description, /Only fields present are changed/);
    assert.equal(
      op.requestBody.content["application/json"].schema.$ref,
      schemaRef(`${LANG}.SetLanguageSettings`),
    );
    const example = op.requestBody.content["application/json"].example;
    assert.equal(example.default_language.key, "en", "example from the `e.g.` of the key's comment");
    assert.deepEqual(Object.keys(doc.paths["/settings/v3alpha/languages"]), ["get", "patch"]);
  });

  test("validation rules become JSON Schema keywords: settings.default_language.key has the pattern", () => {
    const body = deref(
      doc,
      doc.paths["/settings/v3alpha/languages"].patch.requestBody.content["application/json"].schema,
    );
    const language = deref(doc, body.properties.default_language);
    assert.equal(language.properties.key.type, "string");
    assert.equal(language.properties.key.pattern, "^[a-z]{2}$");
    const ctx = doc.components.schemas["platform.object.v3alpha.RequestContext"];
    assert.equal(ctx.properties.org_id.minLength, 1);
    assert.equal(ctx.properties.org_id.maxLength, 200);
    assert.equal(ctx.properties.system.const, true);
    assert.match(ctx.description, /exactly one of `system`, `instance_id`/);
    assert.deepEqual(ctx["x-oneofs"].context.required, true);
  });

  test("ResolveLanguages: GET with the ctx query parameters, dotted", () => {
    const op = doc.paths["/settings/v3alpha/languages"].get;
    assert.equal(op.operationId, "ResolveLanguages");
    assert.equal(op.requestBody, undefined);
    const params = op.parameters.map((p: Any) => `${p.in}:${p.name}`);
    assert.deepEqual(params, [
      "query:ctx.system",
      "query:ctx.instance_id",
      "query:ctx.instance_domain",
      "query:ctx.org_id",
      "query:ctx.org_domain",
    ]);
    const orgId = op.parameters.find((p: Any) => p.name === "ctx.org_id");
    assert.deepEqual(orgId.schema, { type: "string", minLength: 1, maxLength: 200 });
    assert.match(orgId.description, /organization/);
    assert.equal(
      op.responses["200"].content["application/json"].schema.$ref,
      schemaRef(`${LANG}.ResolveLanguagesResponse`),
    );
  });

  test("proto3 JSON mapping: uint64 as string, Timestamp as date-time, enums by name", () => {
    const details = doc.components.schemas["platform.settings.object.v3alpha.Details"];
    assert.equal(details.properties.sequence.type, "string");
    assert.deepEqual(
      { type: details.properties.change_date.type, format: details.properties.change_date.format },
      { type: "string", format: "date-time" },
    );
    const ownerType = doc.components.schemas["platform.object.v3alpha.OwnerType"];
    assert.equal(ownerType.type, "string");
    assert.ok(ownerType.enum.includes("OWNER_TYPE_ORG"));
  });

  test("document structure: OpenAPI 3.1, bearer security, every $ref resolves, schemas for requests too", () => {
    assert.equal(doc.openapi, "3.1.0");
    assert.equal(doc.info.title, DEFAULT_INFO.title);
    assert.equal(doc.info.version, DEFAULT_INFO.version);
    assert.deepEqual(doc.security, [{ bearerAuth: [] }]);
    assert.equal(doc.components.securitySchemes.bearerAuth.scheme, "bearer");
    assert.deepEqual(doc.components.schemas.RpcStatus.required, ["code", "message", "details"]);
    assert.ok(doc.components.schemas[`${LANG}.SetLanguagesRequest`]);
    for (const ref of refs(doc)) assert.ok(deref(doc, { $ref: ref }), `unresolved ${ref}`);
    assert.deepEqual(Object.keys(doc.components.schemas), Object.keys(doc.components.schemas).sort());
    assert.deepEqual(Object.keys(doc.paths), Object.keys(doc.paths).sort());
  });

  test("request body examples are valid requests (JSON mapping and validation rules)", async () => {
    const services = await discoverServices();
    for (const r of collectRestRoutes(services)) {
      if (r.body === "") continue;
      const op = doc.paths[openApiPath(r.template).path][r.httpMethod.toLowerCase()];
      const example = op.requestBody.content["application/json"].example as JsonValue;
      const json = (r.body === "*" ? { ...(example as object) } : { [r.body]: example }) as Record<
        string,
        JsonValue
      >;
      // Path variables come from the URL, not the body: give them a sample value as a request would.
      for (const variable of r.variables) {
        let target = json;
        for (const name of variable.fieldPath.slice(0, -1)) {
          target[name] ??= {};
          target = target[name] as Record<string, JsonValue>;
        }
        target[variable.fieldPath.at(-1)!] ??= "123";
      }
      const message = fromJson(r.method.input, json, { ignoreUnknownFields: false });
      assert.doesNotThrow(
        () => validate(r.method.input, message),
        `${r.method.name}: ${JSON.stringify(example)}`,
      );
    }
  });

  test("the committed docs/openapi.json and comments.json equal a fresh build (run `npm run generate`)", () => {
    const committed = readFileSync(path.join(repoRoot, OPENAPI_PATH), "utf8");
    assert.equal(committed, generated.openapi, `${OPENAPI_PATH} is stale: run \`npm run generate\``);
    const comments = readFileSync(path.join(repoRoot, COMMENTS_PATH), "utf8");
    assert.equal(comments, generated.comments, `${COMMENTS_PATH} is stale: run \`npm run generate\``);
  });

  test("the server's build (generated descriptors + committed comments) equals the committed document", () => {
    const runtime = buildOpenApi(generated.services, DEFAULT_INFO);
    assert.equal(formatJson(runtime), readFileSync(path.join(repoRoot, OPENAPI_PATH), "utf8"));
  });
});

describe("OpenAPI builder on the transport test service", () => {
  let testDoc: Any;
  const THINGS = "platform.testing.v1";

  before(() => {
    const comments = readProtoComments([PlatformTesting]);
    testDoc = buildOpenApi([PlatformTesting], { title: "t", version: "1", serverUrl: "http://x", comments });
  });

  test("Create* answers 201, Put* 200 or 201, others 200", () => {
    const create = testDoc.paths["/testing/v1/things"].post;
    assert.equal(create.operationId, "CreateThing");
    assert.deepEqual(
      Object.keys(create.responses).filter((s) => s.startsWith("2")),
      ["201"],
    );
    assert.deepEqual(
      Object.keys(testDoc.paths["/testing/v1/things/{id}"].put.responses).filter((s) => s.startsWith("2")),
      ["200", "201"],
    );
    assert.ok(testDoc.paths["/testing/v1/things/{id}"].get.responses["200"]);
    assert.deepEqual(testDoc.servers, [{ url: "http://x" }]);
  });

  test("path parameters: {id} with the percent-encoding note, {nested.id} keeps its dotted name", () => {
    const get = testDoc.paths["/testing/v1/things/{id}"].get;
    const id = get.parameters.find((p: Any) => p.name === "id");
    assert.equal(id.in, "path");
    assert.equal(id.required, true);
    assert.equal(id.schema.maxLength, 200);
    assert.match(id.description, /%2F/);
    const echo = testDoc.paths["/testing/v1/echo/{nested.id}"].get;
    const names = echo.parameters.map((p: Any) => `${p.in}:${p.name}`);
    assert.equal(names[0], "path:nested.id");
    assert.ok(
      names.includes("query:nested.flag"),
      "the unbound sibling of a path field is a query parameter",
    );
    assert.ok(!names.includes("query:nested.id"));
    assert.ok(!names.some((n: string) => n.startsWith("query:labels")), "maps cannot be set from the query");
    const byName = Object.fromEntries(echo.parameters.map((p: Any) => [p.name, p.schema]));
    assert.deepEqual(byName.kinds, { type: "array", items: { type: "string", enum: enumNames() } });
    assert.deepEqual(byName.uint64_value, { type: "string", format: "uint64", pattern: "^[0-9]+$" });
    assert.equal(byName.timeout.type, "string");
    assert.equal(byName.data.format, "byte");
  });

  test("repeated body field: the body is an array; paging and sorting are dotted query parameters", () => {
    const search = testDoc.paths["/testing/v1/things/_search"].post;
    const schema = search.requestBody.content["application/json"].schema;
    assert.equal(schema.type, "array");
    assert.equal(schema.items.$ref, schemaRef(`${THINGS}.ThingFilter`));
    assert.ok(Array.isArray(search.requestBody.content["application/json"].example));
    const names = search.parameters.map((p: Any) => p.name);
    for (const n of ["ctx.org_id", "query.offset", "query.limit", "query.asc", "sorting_column"]) {
      assert.ok(names.includes(n), n);
    }
    assert.ok(!names.includes("filters"));
    const sorting = search.parameters.find((p: Any) => p.name === "sorting_column");
    assert.deepEqual(sorting.schema.enum, enumNames());
  });

  test("body `*`: the whole request message; Thing carries its rules, oneof and Duration", () => {
    const put = testDoc.paths["/testing/v1/things/{id}"].put;
    assert.equal(
      put.requestBody.content["application/json"].schema.$ref,
      schemaRef(`${THINGS}.PutThingRequest`),
    );
    assert.equal(put.requestBody.content["application/json"].example.id, undefined, "path fields left out");
    assert.ok(!put.parameters.some((p: Any) => p.in === "query"), "no query parameters with body *");
    const thing = testDoc.components.schemas[`${THINGS}.Thing`];
    assert.deepEqual(thing.required, ["name"]);
    assert.equal(thing.properties.name.maxLength, 200);
    assert.deepEqual(
      { ...thing.properties.tags, description: undefined },
      {
        description: undefined,
        type: "array",
        items: { type: "string", minLength: 1, maxLength: 10 },
        maxItems: 3,
      },
    );
    assert.match(thing.properties.timeout.pattern, /s\$$/);
    assert.match(thing.properties.rest_webhook.description, /Member of oneof `target_type`/);
    const webhook = testDoc.components.schemas[`${THINGS}.Webhook`];
    assert.equal(webhook.properties.url.format, "uri");
    assert.equal(webhook.properties.url.maxLength, 1000);
    const create = testDoc.paths["/testing/v1/things"].post;
    assert.equal(create.requestBody.required, true);
    const example = create.requestBody.content["application/json"].example;
    const message = fromJson(PlatformTesting.method.createThing.input, { thing: example });
    assert.doesNotThrow(() => validate(PlatformTesting.method.createThing.input, message));
    assert.equal(example.rest_webhook.url, "https://example.com/hook");
  });

  test("the same input gives the same document", () => {
    const comments = readProtoComments([PlatformTesting]);
    const again = buildOpenApi([PlatformTesting], {
      title: "t",
      version: "1",
      serverUrl: "http://x",
      comments,
    });
    assert.equal(JSON.stringify(again), JSON.stringify(testDoc));
  });
});

function enumNames(): string[] {
  return ["THING_KIND_UNSPECIFIED", "THING_KIND_SMALL", "THING_KIND_BIG"];
}

describe("helpers", () => {
  test("openApiPath", () => {
    assert.deepEqual(openApiPath("/settings/v3alpha/languages"), {
      path: "/settings/v3alpha/languages",
      params: [],
    });
    assert.equal(openApiPath("/a/{id}").path, "/a/{id}");
    assert.equal(openApiPath("/a/{id=*}/b:activate").path, "/a/{id}/b:activate");
    const multi = openApiPath("/v1/{name=things/*}/parts");
    assert.equal(multi.path, "/v1/things/{name}/parts");
    assert.match(multi.params[0].note ?? "", /Sets `name` to `things\/\{name\}`/);
    const rest = openApiPath("/files/{path=**}");
    assert.equal(rest.path, "/files/{path}");
    assert.equal(rest.params[0].multiSegment, true);
    assert.equal(openApiPath("/a/{x.y}/b").path, "/a/{x.y}/b");
  });

  test("exampleFromPattern", () => {
    assert.equal(exampleFromPattern("^[a-z]{2}$"), "aa");
    assert.equal(exampleFromPattern("^\\d{3}-[A-Z]+$"), "000-A");
    assert.equal(exampleFromPattern("^(a|b)$"), undefined);
  });

  test("comments: tags and first sentence", () => {
    const c = parseComment('Creates a thing. Second sentence.\n@example {"a": 1,\n  "b": 2}');
    assert.equal(c.text, "Creates a thing. Second sentence.");
    assert.deepEqual(JSON.parse(c.tags.get("example") ?? ""), { a: 1, b: 2 });
    assert.equal(firstSentence("Key, e.g. `en`. More."), "Key, e.g. `en`.");
    assert.equal(firstSentence("One line\nwrapped. Next."), "One line wrapped.");
  });

  test("a service without comments still builds (descriptions left out)", () => {
    const d: Any = buildOpenApi([PlatformLanguageSettings], { title: "t", version: "1", comments: {} });
    assert.equal(d.paths["/settings/v3alpha/languages"].patch.summary, undefined);
    assert.ok(d.paths["/settings/v3alpha/languages"].patch.description.includes("/SetLanguages"));
    const body = d.paths["/settings/v3alpha/languages"].patch.requestBody.content["application/json"].example;
    assert.match(body.default_language.key, /^[a-z]{2}$/, "generated from the pattern");
  });
});
