import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { toJson } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Transport } from "@connectrpc/connect";
import {
  createConnectTransport,
  createGrpcTransport,
  createGrpcWebTransport,
} from "@connectrpc/connect-node";
import {
  addMachineUser,
  addOrg,
  eventCount,
  grpcCall,
  type Json,
  restClient,
  startPlatform,
  type TestPlatform,
} from "../../../test/helpers.ts";
import {
  PlatformLanguageSettings,
  ResolveLanguagesResponseSchema,
} from "../../gen/platform/settings/language/v3alpha/language_service_pb.ts";

describe("language settings", () => {
  let platform: TestPlatform;
  let owner: string; // IAM_OWNER token
  let instanceId: string;
  const rest = restClient(
    () => platform,
    () => owner,
  );
  const resolveJson = async (query = "") => {
    const response = await rest("GET", `/settings/v3alpha/languages${query}`);
    assert.equal(response.status, 200);
    // biome-ignore lint/suspicious/noExplicitAny: JSON bodies of the tests
    return response.json as { details: Record<string, unknown>; settings: Record<string, any> };
  };

  before(async () => {
    platform = await startPlatform({ listen: true });
    instanceId = platform.bootstrapResult!.instanceId;
    ({ token: owner } = await addMachineUser(platform, {
      username: "owner",
      membership: { contextType: "instance", roles: ["IAM_OWNER"] },
    }));
  });
  after(() => platform.stop());

  it("REST, gRPC, gRPC-web and Connect give identical results", async () => {
    // REST, snake_case and lowerCamelCase input.
    let response = await rest("PATCH", "/settings/v3alpha/languages", {
      json: {
        default_language: { key: "de" },
        restricted_languages: { languages: [{ key: "de" }, { key: "en" }] },
      },
    });
    assert.equal(response.status, 200);
    const patched = response.json as { details: { sequence: string; owner: unknown } };
    assert.deepEqual(patched.details.owner, { type: "OWNER_TYPE_INSTANCE", id: instanceId });
    response = await rest("PATCH", "/settings/v3alpha/languages", {
      json: { defaultLanguage: { key: "fr" } },
    });
    assert.equal(response.status, 200);
    const first = await resolveJson();
    assert.equal(first.settings.default_language.value, "fr");
    assert.equal(first.settings.default_language.owner, undefined, "set in the instance itself");
    assert.deepEqual(first.settings.restricted_languages.value, [{ key: "de" }, { key: "en" }]);

    const transports: Record<string, Transport> = {
      grpc: createGrpcTransport({ baseUrl: platform.url }),
      grpcWeb: createGrpcWebTransport({ baseUrl: platform.url, httpVersion: "1.1" }),
      connectJson: createConnectTransport({ baseUrl: platform.url, httpVersion: "1.1" }),
      connectProto: createConnectTransport({
        baseUrl: platform.url,
        httpVersion: "1.1",
        useBinaryFormat: true,
      }),
    };
    const headers = { authorization: `Bearer ${owner}` };
    for (const [name, transport] of Object.entries(transports)) {
      const client = createClient(PlatformLanguageSettings, transport);
      const viaRest = await resolveJson();
      const resolved = await client.resolveLanguages({}, { headers });
      const json = toJson(ResolveLanguagesResponseSchema, resolved, {
        useProtoFieldName: true,
        alwaysEmitImplicit: true,
      });
      assert.deepEqual(json, viaRest, `${name} resolves like REST`);

      // A write through this protocol, then back to "fr" so the next protocol sees the same state.
      await client.setLanguages({ settings: { defaultLanguage: { key: "it" } } }, { headers });
      assert.equal((await resolveJson()).settings.default_language.value, "it", `${name} wrote`);
      await client.setLanguages({ settings: { defaultLanguage: { key: "fr" } } }, { headers });
    }
  });

  it("errors are the same code over every protocol, and nothing is stored", async () => {
    const before = await eventCount(platform);
    const response = await rest("PATCH", "/settings/v3alpha/languages", {
      json: { default_language: { key: "EN" } },
    });
    assert.equal(response.status, 400);
    assert.deepEqual(response.json, {
      code: 3,
      message: "settings.default_language.key: must match ^[a-z]{2}$",
      details: [],
    });
    const client = createClient(PlatformLanguageSettings, createGrpcTransport({ baseUrl: platform.url }));
    await assert.rejects(
      client.setLanguages(
        { settings: { defaultLanguage: { key: "eng" } } },
        { headers: { authorization: `Bearer ${owner}` } },
      ),
      (error) =>
        error instanceof ConnectError &&
        error.code === Code.InvalidArgument &&
        /settings\.default_language\.key/.test(error.rawMessage),
    );
    await assert.rejects(
      client.resolveLanguages({}),
      (error) => error instanceof ConnectError && error.code === Code.Unauthenticated,
    );
    assert.equal(await eventCount(platform), before);
  });

  it("inherits system → instance → organization, and an org reset falls back to the instance", async () => {
    const orgId = await addOrg(platform, "Inheriting Org");
    await rest("PATCH", "/settings/v3alpha/languages", { json: { default_language: { key: "de" } } });

    let org = await resolveJson(`?ctx.org_id=${orgId}`);
    assert.deepEqual(org.settings.default_language, {
      value: "de",
      owner: { type: "OWNER_TYPE_INSTANCE", id: instanceId },
    });
    assert.deepEqual(org.details.owner, { type: "OWNER_TYPE_ORG", id: orgId });
    assert.deepEqual(org.settings.supported_languages, {
      value: [{ key: "en" }, { key: "de" }, { key: "fr" }, { key: "it" }],
      owner: { type: "OWNER_TYPE_SYSTEM", id: "system" },
    });

    let response = await rest("PATCH", `/settings/v3alpha/languages?ctx.orgId=${orgId}`, {
      json: {
        defaultLanguage: { key: "it" },
        restrictedLanguages: { languages: [{ key: "it" }, { key: "de" }] },
      },
    });
    assert.equal(response.status, 200);
    const setDetails = (response.json as { details: { sequence: string; owner: unknown } }).details;
    assert.deepEqual(setDetails.owner, { type: "OWNER_TYPE_ORG", id: orgId });
    org = await resolveJson(`?ctx.org_id=${orgId}`);
    assert.deepEqual(org.settings.default_language, { value: "it" });
    assert.deepEqual(org.settings.restricted_languages, { value: [{ key: "it" }, { key: "de" }] });
    assert.equal(org.details.sequence, setDetails.sequence);
    // The instance is unaffected by the org override.
    assert.equal((await resolveJson()).settings.default_language.value, "de");

    // Reset the default language only: it comes from the instance again; restricted stays the org's.
    response = await rest("PATCH", `/settings/v3alpha/languages?ctx.org_id=${orgId}`, {
      json: { default_language: {} },
    });
    assert.equal(response.status, 200);
    org = await resolveJson(`?ctx.org_id=${orgId}`);
    assert.deepEqual(org.settings.default_language, {
      value: "de",
      owner: { type: "OWNER_TYPE_INSTANCE", id: instanceId },
    });
    assert.deepEqual(org.settings.restricted_languages, { value: [{ key: "it" }, { key: "de" }] });

    // Resetting the instance's value makes the org inherit the system default through the instance.
    await rest("PATCH", "/settings/v3alpha/languages", { json: { default_language: { key: "" } } });
    org = await resolveJson(`?ctx.org_id=${orgId}`);
    assert.deepEqual(org.settings.default_language, {
      value: "en",
      owner: { type: "OWNER_TYPE_SYSTEM", id: "system" },
    });
  });

  it("a patch sets or unsets only the fields it gives (REST and gRPC)", async () => {
    const languages = async () => {
      const { default_language, restricted_languages } = (await resolveJson()).settings;
      return { default_language, restricted_languages };
    };
    const grpc = (settings: Json) =>
      grpcCall(platform, owner, PlatformLanguageSettings, "SetLanguages", { settings });
    assert.equal(
      (await rest("PATCH", "/settings/v3alpha/languages", { json: { default_language: { key: "de" } } }))
        .status,
      200,
    );
    const initial = await languages();
    await grpc({ restricted_languages: { languages: [{ key: "de" }, { key: "fr" }] } });
    const restricted = { value: [{ key: "de" }, { key: "fr" }] };
    assert.deepEqual(await languages(), { ...initial, restricted_languages: restricted });
    const response = await rest("PATCH", "/settings/v3alpha/languages", {
      json: { default_language: { key: "fr" } },
    });
    assert.equal(response.status, 200);
    assert.deepEqual(await languages(), {
      default_language: { value: "fr" },
      restricted_languages: restricted,
    });
    await grpc({});
    assert.deepEqual(await languages(), {
      default_language: { value: "fr" },
      restricted_languages: restricted,
    });
    // A present but empty message unsets that field only (message presence survives binary protobuf).
    await grpc({ restricted_languages: {} });
    const unset = await languages();
    assert.deepEqual(unset.default_language, { value: "fr" });
    assert.equal(unset.restricted_languages.owner.type, "OWNER_TYPE_SYSTEM", "inherited again");
    await grpc({ default_language: {} });
    const reset = await languages();
    assert.equal(reset.default_language.owner.type, "OWNER_TYPE_SYSTEM", "inherited again");
    assert.deepEqual(reset.restricted_languages, unset.restricted_languages);
  });

  it("a patch that changes nothing succeeds and appends no event", async () => {
    await rest("PATCH", "/settings/v3alpha/languages", { json: { default_language: { key: "fr" } } });
    const before = await eventCount(platform);
    const response = await rest("PATCH", "/settings/v3alpha/languages", {
      json: { default_language: { key: "fr" } },
    });
    assert.equal(response.status, 200);
    assert.equal(await eventCount(platform), before);
    const empty = await rest("PATCH", "/settings/v3alpha/languages");
    assert.equal(empty.status, 200);
    assert.equal(await eventCount(platform), before);
  });

  it("rejects bad input with 400 naming the field and stores nothing", async () => {
    const before = await eventCount(platform);
    const cases: Array<{ body: string; message: RegExp }> = [
      {
        body: '{"default_language": {"key": "EN"}}',
        message: /^settings\.default_language\.key: must match/,
      },
      {
        body: '{"default_language": {"key": "eng"}}',
        message: /^settings\.default_language\.key: must match/,
      },
      {
        body: '{"default_language": {"key": "xx"}}',
        message: /^settings\.default_language\.key: "xx" is not a supported language/,
      },
      {
        body: '{"restricted_languages": {"languages": [{"key": "de"}, {"key": "es"}]}}',
        message: /^settings\.restricted_languages\.languages\[1\]\.key: "es" is not a supported language/,
      },
      { body: '{"default_language": {"key": "de"', message: /JSON/i },
      { body: '{"default_language": {"key": "de"}, "colour": "red"}', message: /colour/ },
      { body: '{"default_language": {"key": 7}}', message: /key/ },
    ];
    for (const { body, message } of cases) {
      const response = await rest("PATCH", "/settings/v3alpha/languages", {
        body,
        headers: { "content-type": "application/json" },
      });
      assert.equal(response.status, 400, body);
      const error = response.json as { code: number; message: string };
      assert.equal(error.code, 3, body);
      assert.match(error.message, message, body);
    }
    const wrongEnum = await rest("GET", "/settings/v3alpha/languages?ctx.system=maybe");
    assert.equal(wrongEnum.status, 400);
    assert.equal(await eventCount(platform), before);
  });

  it("answers 401 without a valid token, 403 without the permission, 404 for an unknown host or org", async () => {
    const before = await eventCount(platform);
    assert.equal((await rest("GET", "/settings/v3alpha/languages", { token: null })).status, 401);
    assert.equal((await rest("GET", "/settings/v3alpha/languages", { token: "not-a-token" })).status, 401);
    const { token: nobody } = await addMachineUser(platform, { username: "nobody" });
    const after1 = await eventCount(platform);
    // Any user of the instance may read the languages; changing them needs settings.write.
    assert.equal((await rest("GET", "/settings/v3alpha/languages", { token: nobody })).status, 200);
    const denied = await rest("PATCH", "/settings/v3alpha/languages", {
      token: nobody,
      json: { default_language: { key: "de" } },
    });
    assert.equal(denied.status, 403);
    assert.equal((denied.json as { code: number }).code, 7);

    const unknownHost = await rest("GET", "/settings/v3alpha/languages", { host: "nowhere.example" });
    assert.equal(unknownHost.status, 404);
    assert.deepEqual(unknownHost.json, { code: 5, message: "instance not found", details: [] });
    const unknownOrg = await rest("GET", "/settings/v3alpha/languages?ctx.org_id=12345");
    assert.equal(unknownOrg.status, 404);
    assert.equal(await eventCount(platform), after1);
    assert.ok(after1 > before);
  });

  it("is gated by the multitenancy_settings flag", async () => {
    let response = await rest("PATCH", "/settings/v3alpha/features", {
      json: { multitenancy_settings: { set: false } },
    });
    assert.equal(response.status, 200);
    const before = await eventCount(platform);
    response = await rest("PATCH", "/settings/v3alpha/languages", {
      json: { default_language: { key: "de" } },
    });
    assert.equal(response.status, 400);
    const error = response.json as { code: number; message: string };
    assert.equal(error.code, 9);
    assert.match(error.message, /multitenancy_settings/);
    assert.equal((await rest("GET", "/settings/v3alpha/languages")).status, 400);
    assert.equal(await eventCount(platform), before);
    response = await rest("PATCH", "/settings/v3alpha/features", {
      json: { multitenancy_settings: { reset: true } },
    });
    assert.equal(response.status, 200);
    assert.equal((await rest("GET", "/settings/v3alpha/languages")).status, 200);
  });

  it("answers the same message shapes to a resolve over Connect JSON as the REST body", async () => {
    const response = await rest(
      "POST",
      "/platform.settings.language.v3alpha.PlatformLanguageSettings/ResolveLanguages",
      { body: "{}" },
    );
    assert.equal(response.status, 200);
    assert.deepEqual(response.json, await resolveJson());
  });
});
