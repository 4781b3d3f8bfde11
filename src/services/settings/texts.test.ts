import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { toJson } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import {
  addMachineUser,
  addOrg,
  eventCount,
  type Json,
  restClient,
  startPlatform,
  type TestPlatform,
} from "../../../test/helpers.ts";
import {
  PlatformTextSettings,
  ResolveTextsResponseSchema,
} from "../../gen/platform/settings/text/v3alpha/text_service_pb.ts";

const TEXTS = "/settings/v3alpha/texts";
const SYSTEM = { type: "OWNER_TYPE_SYSTEM", id: "system" };

describe("text settings", () => {
  let platform: TestPlatform;
  let owner: string; // IAM_OWNER
  let instanceId: string;
  const rest = restClient(
    () => platform,
    () => owner,
  );
  const resolve = async (language: string, query = "", token?: string) => {
    const response = await rest("GET", `${TEXTS}/${language}${query}`, token ? { token } : {});
    assert.equal(response.status, 200, response.text);
    return response.json as {
      details: Json;
      settings: { language: string; texts: Record<string, { value: string; owner?: Json }> };
    };
  };
  const patch = (language: string, texts: Json, query = "", token?: string) =>
    rest("PATCH", `${TEXTS}/${language}${query}`, { json: { texts }, ...(token ? { token } : {}) });
  /** A refused patch: 400 INVALID_ARGUMENT whose message matches, nothing stored. */
  const refused = async (language: string, texts: Json, message: RegExp, query = "") => {
    const before = await eventCount(platform);
    const response = await patch(language, texts, query);
    assert.equal(response.status, 400, `${JSON.stringify(texts)}: ${response.text}`);
    assert.equal(response.json.code, 3);
    assert.match(response.json.message, message);
    assert.equal(await eventCount(platform), before, "nothing stored");
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

  it("lists every key with its description and placeholders (`_keys` is no language)", async () => {
    const response = await rest("GET", `${TEXTS}/_keys`);
    assert.equal(response.status, 200, response.text);
    const keys = response.json.keys as { key: string; description: string; placeholders?: string[] }[];
    const byKey = new Map(keys.map((k) => [k.key, k]));
    assert.ok(keys.length > 200, `${keys.length} keys`);
    for (const k of keys) assert.ok(k.description.trim(), `${k.key} has a description`);
    assert.deepEqual(
      keys.map((k) => k.key),
      keys.map((k) => k.key).sort((a, b) => a.localeCompare(b)),
      "sorted",
    );
    assert.deepEqual(byKey.get("login.password.title")?.placeholders ?? [], []);
    assert.deepEqual(byKey.get("login.layout.footer")?.placeholders, ["{{.Instance}}"]);
    assert.deepEqual(byKey.get("login.idp.linkProposal")?.placeholders, ["{{.Instance}}", "{{.Provider}}"]);
    const reset = byKey.get("message.password_reset.subject")!;
    assert.match(reset.description, /password reset e-mail: subject/);
    assert.ok(reset.placeholders!.includes("{{.DisplayName}}"));
    assert.ok(reset.placeholders!.includes("{{.Code}}"));
    assert.ok(reset.placeholders!.includes("{{.URL}}"));
    assert.ok(!byKey.get("message.password_changed.subject")!.placeholders!.includes("{{.Code}}"));
    // the texts of a language have exactly these keys
    const de = await resolve("de");
    assert.deepEqual(Object.keys(de.settings.texts).sort(), [...byKey.keys()].sort());
  });

  it("resolves the built-in texts of a language, owned by the system, in the API's format", async () => {
    const de = await resolve("de");
    assert.equal(de.settings.language, "de");
    assert.deepEqual(de.details.owner, { type: "OWNER_TYPE_INSTANCE", id: instanceId });
    assert.deepEqual(de.settings.texts["login.password.title"], {
      value: "Passwort eingeben",
      owner: SYSTEM,
    });
    assert.equal(de.settings.texts["login.layout.footer"].value, "Geschützt durch {{.Instance}}");
    // a plural shows its `other` form, its number as the placeholder
    assert.equal(
      (await resolve("en")).settings.texts["login.policy.length"].value,
      "at least {{.Min}} characters",
    );
    assert.equal(
      de.settings.texts["message.password_reset.subject"].value,
      "Setzen Sie Ihr Passwort bei {{.InstanceName}} zurück",
    );
  });

  it("sets and resets texts: organization → instance → built-in, each with its owner", async () => {
    const orgId = await addOrg(platform, "Text Org");
    const org = `?ctx.org_id=${orgId}`;
    let response = await patch("de", {
      "login.password.title": { set: "Ihr Kennwort" },
      "message.password_reset.subject": { set: "Neues Kennwort für {{.DisplayName}}" },
    });
    assert.equal(response.status, 200, response.text);
    assert.deepEqual(response.json.details.owner, { type: "OWNER_TYPE_INSTANCE", id: instanceId });
    let instance = await resolve("de");
    assert.deepEqual(instance.settings.texts["login.password.title"], { value: "Ihr Kennwort" });
    assert.equal(instance.details.sequence, response.json.details.sequence);
    assert.deepEqual(instance.settings.texts["message.password_reset.subject"], {
      value: "Neues Kennwort für {{.DisplayName}}",
    });
    // other languages keep their texts
    assert.equal((await resolve("en")).settings.texts["login.password.title"].value, "Enter your password");

    let inOrg = await resolve("de", org);
    assert.deepEqual(inOrg.settings.texts["login.password.title"], {
      value: "Ihr Kennwort",
      owner: { type: "OWNER_TYPE_INSTANCE", id: instanceId },
    });
    response = await patch("de", { "login.password.title": { set: "Kennwort der Org" } }, org);
    assert.equal(response.status, 200, response.text);
    assert.deepEqual(response.json.details.owner, { type: "OWNER_TYPE_ORG", id: orgId });
    inOrg = await resolve("de", org);
    assert.deepEqual(inOrg.settings.texts["login.password.title"], { value: "Kennwort der Org" });
    assert.deepEqual(inOrg.details.owner, { type: "OWNER_TYPE_ORG", id: orgId });
    instance = await resolve("de");
    assert.deepEqual(instance.settings.texts["login.password.title"], { value: "Ihr Kennwort" });

    // a partial patch: the subject stays, the organization's title is reset to the instance's
    response = await patch("de", { "login.password.title": { reset: true } }, org);
    assert.equal(response.status, 200, response.text);
    inOrg = await resolve("de", org);
    assert.deepEqual(inOrg.settings.texts["login.password.title"], {
      value: "Ihr Kennwort",
      owner: { type: "OWNER_TYPE_INSTANCE", id: instanceId },
    });
    assert.equal(
      inOrg.settings.texts["message.password_reset.subject"].value,
      "Neues Kennwort für {{.DisplayName}}",
    );
    response = await patch("de", { "login.password.title": { reset: true } });
    assert.equal(response.status, 200, response.text);
    assert.deepEqual((await resolve("de", org)).settings.texts["login.password.title"], {
      value: "Passwort eingeben",
      owner: SYSTEM,
    });
    assert.deepEqual((await resolve("de")).settings.texts["message.password_reset.subject"], {
      value: "Neues Kennwort für {{.DisplayName}}",
    });

    // a patch that changes nothing appends nothing
    const before = await eventCount(platform);
    response = await patch("de", {
      "message.password_reset.subject": { set: "Neues Kennwort für {{.DisplayName}}" },
    });
    assert.equal(response.status, 200);
    assert.equal(await eventCount(platform), before);
    await patch("de", { "message.password_reset.subject": { reset: true } });
  });

  it("Connect and gRPC answer like REST", async () => {
    await patch("fr", { "login.loginname.title": { set: "Connexion à {{.Instance}}" } });
    const headers = { authorization: `Bearer ${owner}` };
    for (const transport of [
      createConnectTransport({ baseUrl: platform.url, httpVersion: "1.1" }),
      createGrpcTransport({ baseUrl: platform.url }),
    ]) {
      const client = createClient(PlatformTextSettings, transport);
      const resolved = await client.resolveTexts({ language: "fr" }, { headers });
      const json = toJson(ResolveTextsResponseSchema, resolved, {
        useProtoFieldName: true,
        alwaysEmitImplicit: true,
      });
      assert.deepEqual(json, await resolve("fr"));
      const keys = await client.listTextKeys({}, { headers });
      assert.ok(keys.keys.some((k) => k.key === "message.otp_sms.text"));
      await client.setTexts(
        {
          language: "fr",
          settings: { texts: { "login.loginname.title": { value: { case: "set", value: "Entrée" } } } },
        },
        { headers },
      );
      assert.deepEqual((await resolve("fr")).settings.texts["login.loginname.title"], { value: "Entrée" });
      await assert.rejects(
        client.setTexts(
          { language: "fr", settings: { texts: { "login.nope": { value: { case: "set", value: "x" } } } } },
          { headers },
        ),
        (error) =>
          error instanceof ConnectError &&
          error.code === Code.InvalidArgument &&
          /login\.nope/.test(error.rawMessage),
      );
      await assert.rejects(
        client.resolveTexts({ language: "fr" }),
        (error) => error instanceof ConnectError && error.code === Code.Unauthenticated,
      );
    }
    // Connect JSON over plain HTTP: the same body as REST
    const response = await rest("POST", "/platform.settings.text.v3alpha.PlatformTextSettings/ResolveTexts", {
      body: '{"language": "fr"}',
    });
    assert.equal(response.status, 200);
    assert.deepEqual(response.json, await resolve("fr"));
  });

  it("refuses unknown keys and unsupported languages, naming them, and stores nothing", async () => {
    await refused(
      "de",
      { "login.password.nope": { set: "x" } },
      /^settings\.texts\["login\.password\.nope"\]: unknown text key/,
    );
    await refused("de", { "password.title": { set: "x" } }, /"password\.title"/);
    await refused(
      "es",
      { "login.password.title": { set: "x" } },
      /^language: "es" is not a supported language \(supported: en, de, fr, it\)/,
    );
    await refused(
      "EN",
      { "login.password.title": { set: "x" } },
      /^language: "EN" is not a supported language/,
    );
    const unsupported = await rest("GET", `${TEXTS}/xx`);
    assert.equal(unsupported.status, 400);
    assert.match(unsupported.json.message, /^language: "xx" is not a supported language/);
    // the set's own limit, and an empty text
    await refused(
      "de",
      { "login.password.title": { set: "x".repeat(2049) } },
      /login\.password\.title.*2048/,
    );
    await refused("de", { "login.password.title": { set: "  " } }, /login\.password\.title.*empty/);
    await refused("de", { "login.password.title": {} }, /login\.password\.title/);
  });

  it("refuses template injection naming the key; ICU syntax and markup are literal text", async () => {
    const title = /^settings\.texts\["login\.password\.title"\]\.set: /;
    await refused("en", { "login.password.title": { set: "Hi {{.Evil}}" } }, title);
    await refused("en", { "login.password.title": { set: "Hi {{ }}" } }, title);
    await refused("en", { "login.password.title": { set: '{{ printf "%s" .Code }}' } }, title);
    await refused("en", { "login.password.title": { set: "Hi {{.Instance" } }, title);
    // a placeholder of another key
    await refused(
      "en",
      { "login.password.title": { set: "{{.Instance}}" } },
      /not a placeholder of this text \(allowed: none\)/,
    );
    await refused(
      "en",
      { "message.password_changed.text": { set: "Code {{.Code}}" } },
      /message\.password_changed\.text.*"\{\{\.Code\}\}" is not a placeholder/,
    );
    // a code-only message's text must show the code
    await refused(
      "en",
      { "message.otp_sms.text": { set: "Your code" } },
      /message\.otp_sms\.text.*\{\{\.Code\}\}/,
    );

    const literal = "It's {instance} #1 <b>{count, plural, one {x} other {y}}</b> '{'";
    const response = await patch("en", {
      "login.layout.footer": { set: `${literal} · {{ .Instance }}` },
      "message.otp_sms.text": { set: "{{.Code}} is it {Code}" },
    });
    assert.equal(response.status, 200, response.text);
    const en = await resolve("en");
    assert.equal(en.settings.texts["login.layout.footer"].value, `${literal} · {{ .Instance }}`);
    assert.equal(en.settings.texts["message.otp_sms.text"].value, "{{.Code}} is it {Code}");
  });

  it("instance texts need IAM_OWNER, an organization's its ORG_OWNER; reading needs authentication", async () => {
    const orgA = await addOrg(platform, "Org A");
    const orgB = await addOrg(platform, "Org B");
    const { token: orgOwner } = await addMachineUser(platform, {
      username: "org-a-owner",
      orgId: orgA,
      membership: { contextType: "org", roles: ["ORG_OWNER"] },
    });
    const { token: nobody } = await addMachineUser(platform, { username: "texts-nobody" });
    const set = { "login.password.title": { set: "Org A" } };
    const before = await eventCount(platform);
    assert.equal((await patch("de", set, "", orgOwner)).status, 403, "not the instance's");
    assert.equal((await patch("de", set, `?ctx.org_id=${orgB}`, orgOwner)).status, 403, "not another org's");
    assert.equal((await patch("de", set, `?ctx.org_id=${orgA}`, nobody)).status, 403, "no role");
    assert.equal((await rest("GET", `${TEXTS}/de`, { token: null })).status, 401);
    assert.equal((await rest("GET", `${TEXTS}/_keys`, { token: null })).status, 401);
    assert.equal(await eventCount(platform), before);
    assert.equal((await patch("de", set, `?ctx.org_id=${orgA}`, orgOwner)).status, 200);
    assert.deepEqual(
      (await resolve("de", `?ctx.org_id=${orgA}`, nobody)).settings.texts["login.password.title"],
      {
        value: "Org A",
      },
    );
    assert.equal((await rest("GET", `${TEXTS}/_keys`, { token: nobody })).status, 200);
  });
});
