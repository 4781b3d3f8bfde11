import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { toJson } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Interceptor, type Transport } from "@connectrpc/connect";
import {
  createConnectTransport,
  createGrpcTransport,
  createGrpcWebTransport,
  Http2SessionManager,
} from "@connectrpc/connect-node";
import { UnauthenticatedError } from "../errors.ts";
import {
  PlatformLanguageSettings,
  ResolveLanguagesResponseSchema,
  SetLanguagesResponseSchema,
} from "../gen/platform/settings/language/v3alpha/language_service_pb.ts";
import type { RequestScope } from "./scope.ts";
import { languageService, startServers, type TestServers } from "./test-support.ts";

const seen: RequestScope[] = [];
// an "auth" interceptor of the server: proves extra interceptors run for every protocol, before validation
const auth: Interceptor = (next) => async (req) => {
  if (req.header.get("authorization") === "Bearer bad") throw new UnauthenticatedError("invalid token");
  return next(req);
};
let servers: TestServers;
let h2session: Http2SessionManager;

before(async () => {
  servers = await startServers([languageService(seen)], [auth]);
  h2session = new Http2SessionManager(servers.http2);
});
after(async () => {
  h2session.abort(); // otherwise the HTTP/2 server waits for the idle session before closing
  await servers.close();
});

function transports(): Record<string, Transport> {
  return {
    grpc: createGrpcTransport({ baseUrl: servers.http2, sessionManager: h2session }),
    grpcWeb: createGrpcWebTransport({ baseUrl: servers.http1, httpVersion: "1.1" }),
    connectJson: createConnectTransport({ baseUrl: servers.http1, httpVersion: "1.1" }),
    connectProto: createConnectTransport({
      baseUrl: servers.http1,
      httpVersion: "1.1",
      useBinaryFormat: true,
    }),
  };
}

async function rest(method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(servers.http1 + path, {
    method,
    headers: { "content-type": "application/json", ...headers },
    body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, json: text ? JSON.parse(text) : undefined, headers: res.headers };
}

describe("registerApi: one implementation, every protocol", () => {
  test("SetLanguages and ResolveLanguages give identical results over REST, gRPC, gRPC-web and Connect", async () => {
    // REST: snake_case body, then the same over the other protocols in other organizations
    const restSet = await rest("PATCH", "/settings/v3alpha/languages?ctx.org_id=o-rest", {
      default_language: { key: "de" },
      restricted_languages: { languages: [{ key: "de" }, { key: "fr" }] },
    });
    assert.equal(restSet.status, 200);
    assert.deepEqual(restSet.json, {
      details: {
        sequence: "1",
        change_date: "2024-05-06T07:08:09.123Z",
        owner: { type: "OWNER_TYPE_ORG", id: "o-rest" },
      },
    });
    const restGet = await rest("GET", "/settings/v3alpha/languages?ctx.orgId=o-rest");
    assert.equal(restGet.status, 200);
    // implicit defaults are emitted: the system owner has the empty ID
    assert.deepEqual(restGet.json, {
      details: {
        sequence: "1",
        change_date: "2024-05-06T07:08:09.123Z",
        owner: { type: "OWNER_TYPE_ORG", id: "o-rest" },
      },
      settings: {
        default_language: { value: "de" },
        restricted_languages: { value: [{ key: "de" }, { key: "fr" }] },
        supported_languages: {
          value: [{ key: "de" }, { key: "en" }, { key: "fr" }],
          owner: { type: "OWNER_TYPE_SYSTEM", id: "" },
        },
      },
    });

    for (const [name, transport] of Object.entries(transports())) {
      const client = createClient(PlatformLanguageSettings, transport);
      const org = `o-rest`;
      const ctx = { context: { case: "orgId" as const, value: `${org}-${name}` } };
      const set = await client.setLanguages({
        ctx,
        settings: {
          defaultLanguage: { key: "de" },
          restrictedLanguages: { languages: [{ key: "de" }, { key: "fr" }] },
        },
      });
      const setJson = toJson(SetLanguagesResponseSchema, set, {
        useProtoFieldName: true,
        alwaysEmitImplicit: true, // as the REST transcoder
      }) as {
        details: { owner: { id: string } };
      };
      assert.equal(setJson.details.owner.id, `${org}-${name}`, name);
      setJson.details.owner.id = org;
      assert.deepEqual(setJson, restSet.json, name);

      const got = await client.resolveLanguages({ ctx });
      const gotJson = toJson(ResolveLanguagesResponseSchema, got, {
        useProtoFieldName: true,
        alwaysEmitImplicit: true, // as the REST transcoder
      }) as {
        details: { owner: { id: string } };
      };
      gotJson.details.owner.id = org;
      assert.deepEqual(gotJson, restGet.json, name);
    }
    assert.deepEqual(restGet.json.settings.restricted_languages.value, [{ key: "de" }, { key: "fr" }]);
  });

  test("every protocol hands the request scope to the implementation", async () => {
    seen.length = 0;
    await rest("GET", "/settings/v3alpha/languages", undefined, { "x-request-id": "rid-rest" });
    for (const [name, transport] of Object.entries(transports())) {
      await createClient(PlatformLanguageSettings, transport).resolveLanguages(
        {},
        { headers: { "x-request-id": `rid-${name}` } },
      );
    }
    assert.deepEqual(
      seen.map((s) => s.requestId),
      ["rid-rest", "rid-grpc", "rid-grpcWeb", "rid-connectJson", "rid-connectProto"],
    );
    assert.ok(seen.every((s) => s.instanceId === "instance-1"));
  });

  test("validation errors name the field over every protocol", async () => {
    const calls = seen.length;
    for (const key of ["EN", "eng"]) {
      const r = await rest("PATCH", "/settings/v3alpha/languages", { default_language: { key } });
      assert.equal(r.status, 400);
      assert.deepEqual(r.json, {
        code: 3,
        message: "settings.default_language.key: must match ^[a-z]{2}$",
        details: [],
      });
      for (const [name, transport] of Object.entries(transports())) {
        const err = await createClient(PlatformLanguageSettings, transport)
          .setLanguages({ settings: { defaultLanguage: { key } } })
          .then(
            () => assert.fail(`${name}: expected an error`),
            (e: unknown) => ConnectError.from(e),
          );
        assert.equal(err.code, Code.InvalidArgument, name);
        assert.equal(err.rawMessage, "settings.default_language.key: must match ^[a-z]{2}$", name);
      }
    }
    assert.equal(seen.length, calls, "the implementation is never called with an invalid request");
  });

  test("PermissionDeniedError is 403 / PermissionDenied everywhere", async () => {
    const r = await rest("GET", "/settings/v3alpha/languages?ctx.org_id=deny");
    assert.equal(r.status, 403);
    assert.deepEqual(r.json, {
      code: 7,
      message: "no permission for the settings of this context",
      details: [],
    });
    for (const [name, transport] of Object.entries(transports())) {
      const err = await createClient(PlatformLanguageSettings, transport)
        .resolveLanguages({ ctx: { context: { case: "orgId", value: "deny" } } })
        .then(
          () => assert.fail("expected an error"),
          (e: unknown) => ConnectError.from(e),
        );
      assert.equal(err.code, Code.PermissionDenied, name);
      assert.equal(err.rawMessage, "no permission for the settings of this context", name);
    }
  });

  test("a plain Error is INTERNAL 'internal error' without leaking details", async () => {
    const r = await rest("GET", "/settings/v3alpha/languages?ctx.org_id=boom");
    assert.equal(r.status, 500);
    assert.deepEqual(r.json, { code: 13, message: "internal error", details: [] });
    for (const [name, transport] of Object.entries(transports())) {
      const err = await createClient(PlatformLanguageSettings, transport)
        .resolveLanguages({ ctx: { context: { case: "orgId", value: "boom" } } })
        .then(
          () => assert.fail("expected an error"),
          (e: unknown) => ConnectError.from(e),
        );
      assert.equal(err.code, Code.Internal, name);
      assert.equal(err.rawMessage, "internal error", name);
    }
  });

  test("extra interceptors run for every protocol, and their PlatformErrors are mapped", async () => {
    const r = await rest("GET", "/settings/v3alpha/languages", undefined, { authorization: "Bearer bad" });
    assert.equal(r.status, 401);
    assert.deepEqual(r.json, { code: 16, message: "invalid token", details: [] });
    for (const [name, transport] of Object.entries(transports())) {
      const err = await createClient(PlatformLanguageSettings, transport)
        .resolveLanguages({}, { headers: { authorization: "Bearer bad" } })
        .then(
          () => assert.fail("expected an error"),
          (e: unknown) => ConnectError.from(e),
        );
      assert.equal(err.code, Code.Unauthenticated, name);
    }
  });

  test("Connect JSON accepts snake_case and lowerCamelCase and rejects unknown fields", async () => {
    const call = (body: unknown, method = "SetLanguages") =>
      fetch(`${servers.http1}/platform.settings.language.v3alpha.PlatformLanguageSettings/${method}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      }).then(async (r) => ({
        status: r.status,
        json: (await r.json()) as {
          code?: string;
          message?: string;
          details: { sequence: string; owner: { id: string } };
        },
      }));
    const snake = await call({ ctx: { org_id: "cj" }, settings: { default_language: { key: "fr" } } });
    assert.equal(snake.status, 200);
    assert.equal(snake.json.details.owner.id, "cj");
    const camel = await call({ ctx: { orgId: "cj" }, settings: { defaultLanguage: { key: "it" } } });
    assert.equal(camel.status, 200);
    assert.equal(camel.json.details.sequence, "2");
    const unknown = await call({ settings: { default_language: { key: "fr", extra: 1 } } });
    assert.equal(unknown.status, 400);
    assert.equal(unknown.json.code, "invalid_argument");
    assert.match(unknown.json.message ?? "", /extra/);
    // Connect JSON output emits implicit defaults like REST: sequence 0 and the empty ID of the system owner
    const resolved = await call({ ctx: { org_id: "cj-none" } }, "ResolveLanguages");
    assert.equal(resolved.status, 200);
    assert.deepEqual(resolved.json, {
      details: {
        sequence: "0",
        change_date: "2024-05-06T07:08:09.123Z",
        owner: { type: "OWNER_TYPE_ORG", id: "cj-none" },
      },
      settings: {
        default_language: { value: "en", owner: { type: "OWNER_TYPE_SYSTEM", id: "" } },
        restricted_languages: { value: [{ key: "en" }] },
        supported_languages: {
          value: [{ key: "de" }, { key: "en" }, { key: "fr" }],
          owner: { type: "OWNER_TYPE_SYSTEM", id: "" },
        },
      },
    });
  });
});
