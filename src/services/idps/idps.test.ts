import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { toJson } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import {
  assertRejected,
  eventCount,
  grpcCall,
  type Json,
  type RestReply,
  restClient,
  startPlatform,
  type TestPlatform,
} from "../../../test/helpers.ts";
import { unseal } from "../../crypto/masterkey.ts";
import {
  GetOIDCIDPResponseSchema,
  PlatformIdentityProviders,
} from "../../gen/platform/resources/idp/v3alpha/idp_service_pb.ts";
import { activeIdpForOrg, activeIdpsForOrg, idpSecretContext } from "../../query/idps.ts";
import {
  IDPS,
  type IdpTypePath,
  NO_OPTIONS,
  PROVIDER_TYPES,
  readConfig,
  setUp,
  TYPE_PATHS,
  validConfig,
} from "./testing.ts";

describe("identity providers: operations, fields, validation, secrets, flag", () => {
  let platform: TestPlatform;
  let s: Awaited<ReturnType<typeof setUp>>;
  let rest: ReturnType<typeof restClient>;
  const rejects = (call: () => Promise<RestReply>, status: number, code: number, message?: RegExp | string) =>
    assertRejected(platform, call, status, code, message);
  const create = (type: IdpTypePath, body: unknown, query = "", token?: string) =>
    rest("POST", `${IDPS}/${type}${query}`, { json: body, token });
  const valid = (type: IdpTypePath, name: string, idp: Record<string, unknown> = {}) => ({
    idp: { name, ...idp },
    config: validConfig(type),
  });
  const created = async (type: IdpTypePath, name: string, query = "", idp: Record<string, unknown> = {}) => {
    const reply = await create(type, valid(type, name, idp), query);
    assert.equal(reply.status, 201, reply.text);
    return reply.json.details.id as string;
  };

  before(async () => {
    platform = await startPlatform({ listen: true });
    s = await setUp(platform);
    rest = restClient(platform, () => s.owner);
  });
  after(() => platform.stop());

  it("creates a provider of each type (201) and gets it back with every field, without its secret", async () => {
    for (const type of TYPE_PATHS) {
      const options = {
        is_manual_linking_allowed: true,
        is_manual_creation_allowed: true,
        is_auto_creation: true,
        is_auto_update: true,
        auto_linking: "AUTO_LINKING_OPTION_EMAIL",
      };
      const config = validConfig(type);
      const reply = await create(type, { idp: { name: `All ${type}`, options }, config });
      assert.equal(reply.status, 201, reply.text);
      const { details } = reply.json;
      assert.match(details.id, /^\d+$/);
      assert.equal(details.sequence, "1");
      assert.deepEqual(details.resource_owner, { type: "OWNER_TYPE_INSTANCE", id: s.instanceId });
      const got = await rest("GET", `${IDPS}/${type}/${details.id}`);
      assert.equal(got.status, 200, got.text);
      assert.deepEqual(got.json.idp, {
        details: { ...details },
        state: "EFFECTIVE_STATE_ACTIVE",
        type: PROVIDER_TYPES[type],
        idp: {
          idp: { name: `All ${type}`, state_policy: "STATE_POLICY_ACTIVATE", options },
          config: readConfig(config),
        },
      });
      assert.ok(!got.text.includes("client_secret"), "the secret is write-only");
      assert.ok(!got.text.includes(String(config.client_secret)));
    }
  });

  it("defaults: options off, ACTIVATE when unspecified; DEACTIVATE creates it inactive; lowerCamelCase input", async () => {
    const id = await created("codehost_b", "Defaults");
    const got = await rest("GET", `${IDPS}/codehost_b/${id}`);
    assert.deepEqual(got.json.idp.idp.idp, {
      name: "Defaults",
      state_policy: "STATE_POLICY_ACTIVATE",
      options: NO_OPTIONS,
    });
    const off = await created("oidc", "Off", "", { state_policy: "STATE_POLICY_DEACTIVATE" });
    const gotOff = await rest("GET", `${IDPS}/oidc/${off}`);
    assert.equal(gotOff.json.idp.state, "EFFECTIVE_STATE_INACTIVE");
    assert.equal(gotOff.json.idp.idp.idp.state_policy, "STATE_POLICY_DEACTIVATE");
    const camel = await create("oidc", {
      idp: { name: "Camel", statePolicy: "STATE_POLICY_ACTIVATE", options: { isAutoCreation: true } },
      config: { issuer: "https://camel.example", clientId: "c", clientSecret: "s", isIdTokenMapping: true },
    });
    assert.equal(camel.status, 201, camel.text);
    const gotCamel = await rest("GET", `${IDPS}/oidc/${camel.json.details.id}`);
    assert.equal(gotCamel.json.idp.idp.idp.options.is_auto_creation, true);
    assert.deepEqual(gotCamel.json.idp.idp.config, {
      issuer: "https://camel.example",
      client_id: "c",
      scopes: [],
      is_id_token_mapping: true,
    });
  });

  it("client secrets are write-only, encrypted at rest with the master key and in no event", async () => {
    const secret = "very-secret-value-1234";
    const reply = await create("oidc", {
      idp: { name: "Sealed" },
      config: { ...validConfig("oidc"), client_secret: secret },
    });
    const id = reply.json.details.id;
    assert.ok(!reply.text.includes(secret));
    const rows = await platform.db.query<{ client_secret: string }>(
      "SELECT client_secret FROM idp_client_secrets WHERE instance_id = $1 AND idp_id = $2",
      [s.instanceId, id],
    );
    assert.equal(rows.length, 1);
    assert.ok(!rows[0].client_secret.includes(secret), "stored encrypted");
    assert.equal(
      unseal(platform.deps.masterKey, rows[0].client_secret, idpSecretContext(s.instanceId, id)),
      secret,
    );
    const events = await platform.db.query<{ payload: unknown }>(
      "SELECT payload FROM events WHERE aggregate_id = $1",
      [id],
    );
    assert.ok(!JSON.stringify(events).includes(secret), "never in an event");
    // the read models hold no secret either
    const readModel = await platform.db.query("SELECT * FROM idps WHERE id = $1", [id]);
    assert.ok(!JSON.stringify(readModel).includes(secret));
    // the login side gets it decrypted
    const login = await activeIdpForOrg(platform.db, platform.deps.masterKey, s.instanceId, s.orgA, id);
    assert.equal(login?.config.clientSecret, secret);
    // a new secret by patch: stored sealed, still never returned nor in events
    const patched = await rest("PATCH", `${IDPS}/oidc/${id}`, {
      json: { config: { client_secret: "second-secret" } },
    });
    assert.equal(patched.status, 200, patched.text);
    assert.equal(patched.json.details.sequence, "2");
    assert.equal(
      (await activeIdpForOrg(platform.db, platform.deps.masterKey, s.instanceId, s.orgA, id))?.config
        .clientSecret,
      "second-secret",
    );
    const after = await platform.db.query<{ payload: Json }>(
      "SELECT payload FROM events WHERE aggregate_id = $1 ORDER BY sequence",
      [id],
    );
    assert.ok(!JSON.stringify(after).includes("second-secret"));
    assert.equal(after[1].payload.client_secret_changed, true);
    // the same secret again changes nothing
    const before = await eventCount(platform);
    const same = await rest("PATCH", `${IDPS}/oidc/${id}`, {
      json: { config: { client_secret: "second-secret" } },
    });
    assert.equal(same.status, 200);
    assert.equal(same.json.details.sequence, "2");
    assert.equal(await eventCount(platform), before);
    const got = await rest("GET", `${IDPS}/oidc/${id}`);
    assert.ok(!got.text.includes("secret"), got.text);
  });

  it("validates every field of a create (one failing and one passing case each); nothing is stored on failure", async () => {
    const long = (n: number) => "x".repeat(n);
    const cases: [string, IdpTypePath, unknown, string | RegExp][] = [
      ["body required", "codehost_b", undefined, "idp: is required"],
      ["idp.idp required", "codehost_b", { config: validConfig("codehost_b") }, "idp.idp: is required"],
      ["idp.config required", "codehost_b", { idp: { name: "n" } }, "idp.config: is required"],
      [
        "name required",
        "codehost_b",
        { idp: {}, config: validConfig("codehost_b") },
        "idp.idp.name: is required",
      ],
      [
        "name not blank",
        "codehost_b",
        { idp: { name: "   " }, config: validConfig("codehost_b") },
        "idp.idp.name: must not be blank",
      ],
      [
        "name at most 200",
        "codehost_b",
        { idp: { name: long(201) }, config: validConfig("codehost_b") },
        "idp.idp.name: must be at most 200 characters",
      ],
      [
        "state_policy INHERIT at the owner",
        "codehost_b",
        valid("codehost_b", "n", { state_policy: "STATE_POLICY_INHERIT" }),
        "idp.idp.state_policy: STATE_POLICY_INHERIT is only possible in a child context",
      ],
      [
        "state_policy defined",
        "codehost_b",
        valid("codehost_b", "n", { state_policy: 7 }),
        "idp.idp.state_policy: must be a defined value",
      ],
      [
        "auto_linking defined",
        "codehost_b",
        valid("codehost_b", "n", { options: { auto_linking: 9 } }),
        "idp.idp.options.auto_linking: must be a defined value",
      ],
      [
        "client_id required",
        "codehost_b",
        { idp: { name: "n" }, config: { ...validConfig("codehost_b"), client_id: "" } },
        "idp.config.client_id: is required",
      ],
      [
        "client_id at most 200",
        "codehost_b",
        { idp: { name: "n" }, config: { ...validConfig("codehost_b"), client_id: long(201) } },
        "idp.config.client_id: must be at most 200 characters",
      ],
      [
        "client_secret required",
        "codehost_b",
        { idp: { name: "n" }, config: readConfig(validConfig("codehost_b")) },
        "idp.config.client_secret: is required",
      ],
      [
        "client_secret not empty",
        "codehost_b",
        { idp: { name: "n" }, config: { ...validConfig("codehost_b"), client_secret: "" } },
        "idp.config.client_secret: must not be empty",
      ],
      [
        "client_secret at most 1000",
        "codehost_b",
        { idp: { name: "n" }, config: { ...validConfig("codehost_b"), client_secret: long(1001) } },
        "idp.config.client_secret: must be at most 1000 characters",
      ],
      [
        "scope without space",
        "codehost_b",
        { idp: { name: "n" }, config: { ...validConfig("codehost_b"), scopes: ["open id"] } },
        "idp.config.scopes[0]: must match",
      ],
      [
        "scope not empty",
        "codehost_b",
        { idp: { name: "n" }, config: { ...validConfig("codehost_b"), scopes: ["openid", ""] } },
        "idp.config.scopes[1]: must not be empty",
      ],
      [
        "scope at most 200",
        "codehost_b",
        { idp: { name: "n" }, config: { ...validConfig("codehost_b"), scopes: [long(201)] } },
        "idp.config.scopes[0]: must be at most 200 characters",
      ],
      [
        "at most 50 scopes",
        "codehost_b",
        {
          idp: { name: "n" },
          config: { ...validConfig("codehost_b"), scopes: Array.from({ length: 51 }, (_, i) => `s${i}`) },
        },
        "idp.config.scopes: must have at most 50 items",
      ],
      [
        "issuer required (self-hosted)",
        "codehost_b_self_hosted",
        { idp: { name: "n" }, config: { ...validConfig("codehost_b_self_hosted"), issuer: "" } },
        "idp.config.issuer: is required",
      ],
      [
        "issuer a URI (self-hosted)",
        "codehost_b_self_hosted",
        { idp: { name: "n" }, config: { ...validConfig("codehost_b_self_hosted"), issuer: "not a uri" } },
        "idp.config.issuer: must be a URI",
      ],
      [
        "issuer required (oidc)",
        "oidc",
        { idp: { name: "n" }, config: { ...validConfig("oidc"), issuer: undefined } },
        "idp.config.issuer: is required",
      ],
      [
        "issuer http(s) (oidc)",
        "oidc",
        { idp: { name: "n" }, config: { ...validConfig("oidc"), issuer: "ftp://sso.example.com" } },
        "idp.config.issuer: must be an http or https URI",
      ],
      [
        "issuer at most 1000",
        "oidc",
        { idp: { name: "n" }, config: { ...validConfig("oidc"), issuer: `https://e.com/${long(987)}` } },
        "idp.config.issuer: must be at most 1000 characters",
      ],
      [
        "authorization_endpoint required",
        "oauth",
        { idp: { name: "n" }, config: { ...validConfig("oauth"), authorization_endpoint: "" } },
        "idp.config.authorization_endpoint: is required",
      ],
      [
        "authorization_endpoint http(s)",
        "oauth",
        { idp: { name: "n" }, config: { ...validConfig("oauth"), authorization_endpoint: "mailto:a@b.c" } },
        "idp.config.authorization_endpoint: must be an http or https URI",
      ],
      [
        "token_endpoint required",
        "oauth",
        { idp: { name: "n" }, config: { ...validConfig("oauth"), token_endpoint: "" } },
        "idp.config.token_endpoint: is required",
      ],
      [
        "token_endpoint a URI",
        "oauth",
        { idp: { name: "n" }, config: { ...validConfig("oauth"), token_endpoint: "::" } },
        "idp.config.token_endpoint: must be a URI",
      ],
      [
        "user_endpoint required",
        "oauth",
        { idp: { name: "n" }, config: { ...validConfig("oauth"), user_endpoint: "" } },
        "idp.config.user_endpoint: is required",
      ],
      [
        "user_endpoint http(s)",
        "oauth",
        { idp: { name: "n" }, config: { ...validConfig("oauth"), user_endpoint: "urn:x:y" } },
        "idp.config.user_endpoint: must be an http or https URI",
      ],
      [
        "id_attribute required",
        "oauth",
        { idp: { name: "n" }, config: { ...validConfig("oauth"), id_attribute: "" } },
        "idp.config.id_attribute: is required",
      ],
      [
        "id_attribute not blank",
        "oauth",
        { idp: { name: "n" }, config: { ...validConfig("oauth"), id_attribute: " " } },
        "idp.config.id_attribute: must not be blank",
      ],
      [
        "id_attribute at most 200",
        "oauth",
        { idp: { name: "n" }, config: { ...validConfig("oauth"), id_attribute: long(201) } },
        "idp.config.id_attribute: must be at most 200 characters",
      ],
      [
        "unknown field",
        "oidc",
        { idp: { name: "n" }, config: { ...validConfig("oidc"), secret: "x" } },
        /secret/,
      ],
      [
        "a field of another type",
        "codehost_b",
        { idp: { name: "n" }, config: { ...validConfig("codehost_b"), issuer: "https://x.example" } },
        /issuer/,
      ],
      ["malformed JSON", "oidc", "{", /./],
    ];
    for (const [what, type, body, message] of cases) {
      await rejects(
        () =>
          body === undefined
            ? rest("POST", `${IDPS}/${type}`)
            : typeof body === "string"
              ? rest("POST", `${IDPS}/${type}`, { body })
              : create(type, body),
        400,
        3,
        message,
      ).catch((e) => {
        throw new Error(`${what}: ${e.message}`);
      });
    }
    // the passing side of each rule
    const passing: [string, IdpTypePath, unknown][] = [
      ["name of 200", "codehost_b", { idp: { name: long(200) }, config: validConfig("codehost_b") }],
      ["name trimmed", "codehost_b", { idp: { name: "  Trimmed  " }, config: validConfig("codehost_b") }],
      [
        "state_policy ACTIVATE",
        "codehost_b",
        valid("codehost_b", "n", { state_policy: "STATE_POLICY_ACTIVATE" }),
      ],
      [
        "auto_linking USERNAME",
        "codehost_b",
        valid("codehost_b", "n", { options: { auto_linking: "AUTO_LINKING_OPTION_USERNAME" } }),
      ],
      [
        "client_id of 200",
        "codehost_b",
        { idp: { name: "n" }, config: { ...validConfig("codehost_b"), client_id: long(200) } },
      ],
      [
        "client_secret of 1000",
        "codehost_b",
        { idp: { name: "n" }, config: { ...validConfig("codehost_b"), client_secret: long(1000) } },
      ],
      [
        "no scopes",
        "codehost_b",
        { idp: { name: "n" }, config: { ...validConfig("codehost_b"), scopes: [] } },
      ],
      [
        "50 scopes of 200",
        "codehost_b",
        {
          idp: { name: "n" },
          config: {
            ...validConfig("codehost_b"),
            scopes: Array.from({ length: 50 }, (_, i) => `${i}${long(198)}`),
          },
        },
      ],
      [
        "issuer http",
        "oidc",
        { idp: { name: "n" }, config: { ...validConfig("oidc"), issuer: "http://localhost:9999" } },
      ],
      [
        "issuer of 1000",
        "oidc",
        { idp: { name: "n" }, config: { ...validConfig("oidc"), issuer: `https://e.com/${long(986)}` } },
      ],
      [
        "id_attribute of 200",
        "oauth",
        { idp: { name: "n" }, config: { ...validConfig("oauth"), id_attribute: long(200) } },
      ],
    ];
    for (const [what, type, body] of passing) {
      const reply = await create(type, body);
      assert.equal(reply.status, 201, `${what}: ${reply.text}`);
    }
    const trimmed = await rest("POST", `${IDPS}/_search`, {
      json: [{ name: { name: "Trimmed", method: "TEXT_FILTER_METHOD_EQUALS" } }],
    });
    assert.equal(trimmed.json.result.length, 1);
  });

  it("creates in an organization with ctx (owner: the organization); unknown or system ctx are refused", async () => {
    const reply = await create("codehost_b", valid("codehost_b", "Org's own"), `?ctx.org_id=${s.orgA}`);
    assert.equal(reply.status, 201, reply.text);
    assert.deepEqual(reply.json.details.resource_owner, { type: "OWNER_TYPE_ORG", id: s.orgA });
    const got = await rest("GET", `${IDPS}/codehost_b/${reply.json.details.id}`);
    assert.deepEqual(got.json.idp.details.resource_owner, { type: "OWNER_TYPE_ORG", id: s.orgA });
    assert.equal(got.json.idp.parent, undefined, "the owner's view has no parent");
    assert.equal(got.json.idp.idp.idp.state_policy, "STATE_POLICY_ACTIVATE");
    // ctx by instance ID: the instance
    const byInstance = await create(
      "codehost_b",
      valid("codehost_b", "by instance"),
      `?ctx.instance_id=${s.instanceId}`,
    );
    assert.equal(byInstance.status, 201);
    assert.deepEqual(byInstance.json.details.resource_owner, {
      type: "OWNER_TYPE_INSTANCE",
      id: s.instanceId,
    });
    await rejects(
      () => create("codehost_b", valid("codehost_b", "n"), "?ctx.org_id=4242"),
      404,
      5,
      "organization not found",
    );
    await rejects(() => create("codehost_b", valid("codehost_b", "n"), "?ctx.system=true"), 403, 7);
    await rejects(
      () => create("codehost_b", valid("codehost_b", "n"), `?ctx.org_id=${"9".repeat(201)}`),
      400,
      3,
      "ctx.org_id: must be at most 200 characters",
    );
  });

  it("patches in the owning context: only the fields present; a patch changing nothing stores nothing", async () => {
    for (const type of TYPE_PATHS) {
      const id = await created(type, `Patch ${type}`);
      const path = `${IDPS}/${type}/${id}`;
      const changes: Record<IdpTypePath, Record<string, unknown>> = {
        codehost_b: { client_id: "new-b", scopes: ["openid", "profile"] },
        codehost_b_self_hosted: {
          issuer: "https://other.example.com",
          client_id: "new-bsh",
          scopes: ["email"],
        },
        oidc: {
          issuer: "https://other-sso.example.com",
          client_id: "new-oidc",
          scopes: ["openid"],
          is_id_token_mapping: false,
        },
        oauth: {
          authorization_endpoint: "https://o2.example/a",
          token_endpoint: "https://o2.example/t",
          user_endpoint: "https://o2.example/u",
          client_id: "new-oauth",
          scopes: ["x"],
          id_attribute: "sub",
        },
      };
      const patched = await rest("PATCH", path, {
        json: {
          idp: {
            name: `Renamed ${type}`,
            options: { is_auto_update: true, auto_linking: "AUTO_LINKING_OPTION_USERNAME" },
          },
          config: changes[type],
        },
      });
      assert.equal(patched.status, 200, patched.text);
      assert.equal(patched.json.details.sequence, "2");
      assert.deepEqual(patched.json.details.resource_owner, {
        type: "OWNER_TYPE_INSTANCE",
        id: s.instanceId,
      });
      const got = await rest("GET", path);
      assert.deepEqual(got.json.idp.idp, {
        idp: {
          name: `Renamed ${type}`,
          state_policy: "STATE_POLICY_ACTIVATE",
          options: { ...NO_OPTIONS, is_auto_update: true, auto_linking: "AUTO_LINKING_OPTION_USERNAME" },
        },
        config: { ...readConfig(validConfig(type)), ...changes[type] },
      });
      assert.equal(got.json.idp.details.sequence, "2");
      assert.equal(got.json.idp.details.change_date, patched.json.details.change_date);
      // one field only: the others stay
      const one = await rest("PATCH", path, { json: { config: { client_id: "only-this" } } });
      assert.equal(one.status, 200);
      const again = await rest("GET", path);
      assert.equal(again.json.idp.idp.config.client_id, "only-this");
      assert.equal(again.json.idp.idp.idp.name, `Renamed ${type}`);
      assert.deepEqual(
        again.json.idp.idp.config.scopes,
        changes[type].scopes,
        "an absent (empty) scope list changes nothing",
      );
      // nothing changes: no event, the current version
      const before = await eventCount(platform);
      for (const json of [
        undefined,
        {},
        { idp: { name: `Renamed ${type}` } },
        { config: { client_id: "only-this" } },
        // the same options and configuration again (stored as jsonb: key order must not matter)
        { idp: { options: { is_auto_update: true, auto_linking: "AUTO_LINKING_OPTION_USERNAME" } } },
        { idp: { state_policy: "STATE_POLICY_ACTIVATE" } },
        { config: { ...changes[type], client_id: "only-this" } },
      ]) {
        const same = await rest("PATCH", path, { json });
        assert.equal(same.status, 200, same.text);
        assert.equal(same.json.details.sequence, "3");
      }
      assert.equal(await eventCount(platform), before);
    }
  });

  it("patch changes options one by one and empties scopes only when asked: REST JSON and binary gRPC", async () => {
    const grpcMethod: Record<IdpTypePath, string> = {
      codehost_b: "PatchCodehostBIDP",
      codehost_b_self_hosted: "PatchCodehostBSelfHostedIDP",
      oidc: "PatchOIDCIDP",
      oauth: "PatchOAuthIDP",
    };
    const all = {
      is_manual_linking_allowed: true,
      is_manual_creation_allowed: true,
      is_auto_creation: true,
      is_auto_update: true,
      auto_linking: "AUTO_LINKING_OPTION_EMAIL",
    };
    for (const type of TYPE_PATHS) {
      const id = await created(type, `Options ${type}`, "", { options: all });
      const path = `${IDPS}/${type}/${id}`;
      const get = async () => (await rest("GET", path)).json.idp.idp;
      const grpc = (request: Json) =>
        grpcCall(platform, s.owner, PlatformIdentityProviders, grpcMethod[type], { id, ...request });
      const config = readConfig(validConfig(type));
      let expected = {
        idp: { name: `Options ${type}`, state_policy: "STATE_POLICY_ACTIVATE", options: all },
        config,
      };

      // REST: one option changes, the other four stay.
      const one = await rest("PATCH", path, { json: { idp: { options: { is_auto_creation: false } } } });
      assert.equal(one.status, 200, one.text);
      expected = { ...expected, idp: { ...expected.idp, options: { ...all, is_auto_creation: false } } };
      assert.deepEqual(await get(), expected);
      // gRPC: false is sent (PatchOptions' fields are optional), the others stay.
      await grpc({ idp: { idp: { options: { is_auto_update: false } } } });
      expected = {
        ...expected,
        idp: { ...expected.idp, options: { ...expected.idp.options, is_auto_update: false } },
      };
      assert.deepEqual(await get(), expected);

      // Scopes: an empty list over gRPC is absent (nothing changes) unless update_mask names it.
      await grpc({ idp: { config: { scopes: [] } } });
      assert.deepEqual(await get(), expected);
      await grpc({ idp: { config: { scopes: [], client_id: "not-named" } }, update_mask: "config.scopes" });
      expected = { ...expected, config: { ...config, scopes: [] } };
      assert.deepEqual(await get(), expected);
      // REST: a list replaces, [] empties (the provider's default scopes apply again).
      const scopes = await rest("PATCH", path, { json: { config: { scopes: ["openid", "groups"] } } });
      assert.equal(scopes.status, 200, scopes.text);
      assert.deepEqual((await get()).config.scopes, ["openid", "groups"]);
      const emptied = await rest("PATCH", path, { json: { config: { scopes: [] } } });
      assert.equal(emptied.status, 200, emptied.text);
      assert.deepEqual(await get(), expected);
      // A client secret named in update_mask but not given is refused, not emptied.
      await rejects(
        () => rest("PATCH", `${path}?update_mask=config.client_secret`, { json: {} }),
        400,
        3,
        "idp.config.client_secret: must not be empty",
      );
    }
  });

  it("patch: the owner's state policy switches its state; INHERIT there and each invalid field are refused", async () => {
    const id = await created("codehost_b", "Switch");
    const path = `${IDPS}/codehost_b/${id}`;
    const off = await rest("PATCH", path, { json: { idp: { state_policy: "STATE_POLICY_DEACTIVATE" } } });
    assert.equal(off.status, 200);
    const got = await rest("GET", path);
    assert.equal(got.json.idp.state, "EFFECTIVE_STATE_INACTIVE");
    assert.equal(got.json.idp.idp.idp.state_policy, "STATE_POLICY_DEACTIVATE");
    // an explicit UNSPECIFIED in a patch is no policy (refused as in a child context): it must not
    // silently reactivate a provider that was switched off
    for (const state_policy of ["STATE_POLICY_UNSPECIFIED", 0])
      await rejects(
        () => rest("PATCH", path, { json: { idp: { state_policy } } }),
        400,
        3,
        "idp.idp.state_policy: must be STATE_POLICY_ACTIVATE or STATE_POLICY_DEACTIVATE",
      );
    assert.equal((await rest("GET", path)).json.idp.state, "EFFECTIVE_STATE_INACTIVE");
    assert.equal(
      (await rest("PATCH", path, { json: { idp: { state_policy: "STATE_POLICY_ACTIVATE" } } })).status,
      200,
    );
    assert.equal((await rest("GET", path)).json.idp.state, "EFFECTIVE_STATE_ACTIVE");
    const cases: [string, unknown, string | RegExp][] = [
      [
        "INHERIT at the owner",
        { idp: { state_policy: "STATE_POLICY_INHERIT" } },
        "idp.idp.state_policy: STATE_POLICY_INHERIT is only possible in a child context",
      ],
      [
        "state_policy defined",
        { idp: { state_policy: 12 } },
        "idp.idp.state_policy: must be a defined value",
      ],
      ["name not empty", { idp: { name: "" } }, "idp.idp.name: must not be empty"],
      ["name not blank", { idp: { name: "  " } }, "idp.idp.name: must not be blank"],
      [
        "name at most 200",
        { idp: { name: "n".repeat(201) } },
        "idp.idp.name: must be at most 200 characters",
      ],
      [
        "auto_linking defined",
        { idp: { options: { auto_linking: 5 } } },
        "idp.idp.options.auto_linking: must be a defined value",
      ],
      ["client_id not empty", { config: { client_id: "" } }, "idp.config.client_id: must not be empty"],
      ["client_id not blank", { config: { client_id: " " } }, "idp.config.client_id: must not be blank"],
      [
        "client_secret not empty",
        { config: { client_secret: "" } },
        "idp.config.client_secret: must not be empty",
      ],
      [
        "client_secret at most 1000",
        { config: { client_secret: "s".repeat(1001) } },
        "idp.config.client_secret: must be at most 1000 characters",
      ],
      ["scope pattern", { config: { scopes: ["a b"] } }, "idp.config.scopes[0]: must match"],
      ["unknown field", { config: { issuer: "https://x.example" } }, /issuer/],
    ];
    for (const [what, body, message] of cases) {
      await rejects(() => rest("PATCH", path, { json: body }), 400, 3, message).catch((e) => {
        throw new Error(`${what}: ${e.message}`);
      });
    }
    const oauthId = await created("oauth", "OAuth patch rules");
    const oauthPath = `${IDPS}/oauth/${oauthId}`;
    for (const [field, value, message] of [
      ["authorization_endpoint", "ftp://x.example", "must be an http or https URI"],
      ["token_endpoint", "nope", "must be a URI"],
      ["user_endpoint", "", "must not be empty"],
      ["id_attribute", "", "must not be empty"],
    ] as const) {
      await rejects(
        () => rest("PATCH", oauthPath, { json: { config: { [field]: value } } }),
        400,
        3,
        `idp.config.${field}: ${message}`,
      );
    }
    const oidcId = await created("oidc", "OIDC patch rules");
    await rejects(
      () => rest("PATCH", `${IDPS}/oidc/${oidcId}`, { json: { config: { issuer: "file:///etc" } } }),
      400,
      3,
      "idp.config.issuer: must be an http or https URI",
    );
    assert.equal(
      (await rest("PATCH", `${IDPS}/oidc/${oidcId}`, { json: { config: { issuer: "http://localhost:1" } } }))
        .status,
      200,
    );
  });

  it("path id 1..200; unknown IDs and IDs of another type are 404; DELETE serves every type", async () => {
    const id = await created("oidc", "Typed");
    await rejects(
      () => rest("GET", `${IDPS}/oidc/${"1".repeat(201)}`),
      400,
      3,
      "id: must be at most 200 characters",
    );
    await rejects(
      () => rest("PATCH", `${IDPS}/oidc/${"1".repeat(201)}`, { json: {} }),
      400,
      3,
      "id: must be at most 200 characters",
    );
    await rejects(
      () => rest("DELETE", `${IDPS}/${"1".repeat(201)}`),
      400,
      3,
      "id: must be at most 200 characters",
    );
    assert.equal((await rest("GET", `${IDPS}/oidc/${"1".repeat(200)}`)).status, 404);
    await rejects(() => rest("GET", `${IDPS}/oidc/4242`), 404, 5, "identity provider 4242 not found");
    await rejects(() => rest("PATCH", `${IDPS}/oidc/4242`, { json: { idp: { name: "x" } } }), 404, 5);
    await rejects(() => rest("DELETE", `${IDPS}/4242`), 404, 5);
    for (const other of TYPE_PATHS.filter((t) => t !== "oidc")) {
      await rejects(() => rest("GET", `${IDPS}/${other}/${id}`), 404, 5);
      await rejects(() => rest("PATCH", `${IDPS}/${other}/${id}`, { json: { idp: { name: "x" } } }), 404, 5);
    }
    for (const type of TYPE_PATHS) {
      const victim = await created(type, `Delete ${type}`);
      const deleted = await rest("DELETE", `${IDPS}/${victim}`);
      assert.equal(deleted.status, 200, deleted.text);
      assert.equal(deleted.json.details.id, victim);
      assert.equal(deleted.json.details.sequence, "2");
      assert.deepEqual(deleted.json.details.resource_owner, {
        type: "OWNER_TYPE_INSTANCE",
        id: s.instanceId,
      });
      await rejects(() => rest("GET", `${IDPS}/${type}/${victim}`), 404, 5);
      await rejects(() => rest("DELETE", `${IDPS}/${victim}`), 404, 5);
      const secrets = await platform.db.query("SELECT 1 FROM idp_client_secrets WHERE idp_id = $1", [victim]);
      assert.equal(secrets.length, 0, "the secret goes with the provider");
    }
  });

  it("authentication and permissions: 401 without a token, 403 without idp.read / idp.write / idp.delete", async () => {
    const id = await created("codehost_b", "Guarded");
    const path = `${IDPS}/codehost_b/${id}`;
    for (const [method, p, json] of [
      ["POST", `${IDPS}/codehost_b`, valid("codehost_b", "x")],
      ["GET", path, undefined],
      ["PATCH", path, { idp: { name: "x" } }],
      ["DELETE", `${IDPS}/${id}`, undefined],
      ["POST", `${IDPS}/_search`, []],
    ] as const) {
      await rejects(() => rest(method, p, { json, token: null }), 401, 16);
      await rejects(() => rest(method, p, { json, token: "not-a-token" }), 401, 16);
    }
    // a user without roles and a viewer
    await rejects(
      () => create("codehost_b", valid("codehost_b", "x"), "", s.nobody),
      403,
      7,
      "permission denied: idp.write is required",
    );
    await rejects(
      () => rest("GET", path, { token: s.nobody }),
      403,
      7,
      "permission denied: idp.read is required",
    );
    await rejects(() => rest("PATCH", path, { token: s.nobody, json: { idp: { name: "x" } } }), 403, 7);
    await rejects(
      () => rest("DELETE", `${IDPS}/${id}`, { token: s.nobody }),
      403,
      7,
      "permission denied: idp.delete is required",
    );
    const none = await rest("POST", `${IDPS}/_search`, { token: s.nobody, json: [] });
    assert.equal(none.status, 200);
    assert.equal(none.json.result.length, 0, "searches drop what the caller may not read");
    assert.equal((await rest("GET", path, { token: s.viewer })).status, 200, "IAM_OWNER_VIEWER reads");
    assert.ok((await rest("POST", `${IDPS}/_search`, { token: s.viewer, json: [] })).json.result.length > 0);
    await rejects(() => create("codehost_b", valid("codehost_b", "x"), "", s.viewer), 403, 7);
    await rejects(() => rest("PATCH", path, { token: s.viewer, json: { idp: { name: "x" } } }), 403, 7);
    await rejects(() => rest("DELETE", `${IDPS}/${id}`, { token: s.viewer }), 403, 7);
  });

  it("the flag multitenancy_resources_api off answers 400 FAILED_PRECONDITION naming it, for every operation", async () => {
    const id = await created("oidc", "Flagged");
    const set = await rest("PATCH", "/settings/v3alpha/features", {
      json: { multitenancy_resources_api: { set: false } },
    });
    assert.equal(set.status, 200, set.text);
    try {
      const calls: [string, string, unknown][] = [
        ["DELETE", `${IDPS}/${id}`, undefined],
        ["POST", `${IDPS}/_search`, []],
        ["POST", `${IDPS}/_search?ctx.org_id=${s.orgA}`, []],
      ];
      for (const type of TYPE_PATHS) {
        calls.push(["POST", `${IDPS}/${type}`, valid(type, "while off")]);
        calls.push(["POST", `${IDPS}/${type}?ctx.org_id=${s.orgA}`, valid(type, "while off")]);
        calls.push(["GET", `${IDPS}/${type}/${id}`, undefined]);
        calls.push(["PATCH", `${IDPS}/${type}/${id}`, { idp: { name: "renamed" } }]);
      }
      for (const [method, path, json] of calls) {
        await rejects(
          () => rest(method, path, { json }),
          400,
          9,
          /feature "multitenancy_resources_api" is disabled/,
        ).catch((e) => {
          throw new Error(`${method} ${path}: ${e.message}`);
        });
      }
    } finally {
      await rest("PATCH", "/settings/v3alpha/features", {
        json: { multitenancy_resources_api: { reset: true } },
      });
    }
    assert.equal((await rest("GET", `${IDPS}/oidc/${id}`)).status, 200);
  });

  it("gRPC gives the same results and errors as REST", async () => {
    const client = createClient(PlatformIdentityProviders, createGrpcTransport({ baseUrl: platform.url }));
    const headers = { authorization: `Bearer ${s.owner}` };
    const made = await client.createOIDCIDP(
      {
        idp: {
          idp: { name: "Over gRPC", options: { isAutoCreation: true } },
          config: {
            issuer: "https://grpc.example",
            clientId: "g",
            clientSecret: "grpc-secret",
            scopes: ["openid"],
          },
        },
      },
      { headers },
    );
    const id = made.details!.id;
    const viaGrpc = toJson(GetOIDCIDPResponseSchema, await client.getOIDCIDP({ id }, { headers }), {
      useProtoFieldName: true,
      alwaysEmitImplicit: true,
    });
    const viaRest = await rest("GET", `${IDPS}/oidc/${id}`);
    assert.deepEqual(viaGrpc, viaRest.json);
    assert.equal((await client.getOIDCIDP({ id }, { headers })).idp?.idp?.config?.clientSecret, undefined);
    // a child context's policy over gRPC
    const patched = await client.patchOIDCIDP(
      {
        id,
        ctx: { context: { case: "orgId", value: s.orgA } },
        idp: { idp: { statePolicy: 2 } },
      },
      { headers },
    );
    assert.equal(patched.details?.sequence, 2n);
    const found = await client.searchIDPs(
      {
        ctx: { context: { case: "orgId", value: s.orgA } },
        filters: [{ filter: { case: "id", value: { id } } }],
      },
      { headers },
    );
    assert.equal(found.result.length, 1);
    assert.equal(found.result[0].state, 2);
    assert.equal(found.result[0].idp?.statePolicy, 2);
    assert.equal(found.result[0].parent?.state, 1);
    // errors: read-only configuration in the child, validation, not found
    const failures: [() => Promise<unknown>, Code, RegExp][] = [
      [
        () =>
          client.patchOIDCIDP(
            { id, ctx: { context: { case: "orgId", value: s.orgA } }, idp: { idp: { name: "nope" } } },
            { headers },
          ),
        Code.FailedPrecondition,
        /configuration is read-only in this context/,
      ],
      [() => client.createOIDCIDP({}, { headers }), Code.InvalidArgument, /^idp: is required/],
      [() => client.getOIDCIDP({ id: "4242" }, { headers }), Code.NotFound, /not found/],
      [
        () => client.deleteIDP({ id, ctx: { context: { case: "orgId", value: s.orgA } } }, { headers }),
        Code.FailedPrecondition,
        /owns it/,
      ],
    ];
    for (const [call, code, message] of failures) {
      const before = await eventCount(platform);
      await assert.rejects(call(), (e: unknown) => {
        assert.ok(e instanceof ConnectError);
        assert.equal(e.code, code);
        assert.match(e.rawMessage, message);
        return true;
      });
      assert.equal(await eventCount(platform), before);
    }
    assert.equal((await client.deleteIDP({ id }, { headers })).details?.id, id);
  });

  it("activeIdpsForOrg / activeIdpForOrg: the providers active in an organization, by name, secrets decrypted", async () => {
    const inst = await created("codehost_b", "zz login instance");
    const own = await created("oauth", "zz login A's own", `?ctx.org_id=${s.orgA}`);
    const otherOrg = await created("oidc", "zz login B's own", `?ctx.org_id=${s.orgB}`);
    const names = async (orgId: string) =>
      (await activeIdpsForOrg(platform.db, platform.deps.masterKey, s.instanceId, orgId))
        .filter((i) => i.name.startsWith("zz login"))
        .map((i) => i.name);
    assert.deepEqual(await names(s.orgA), ["zz login A's own", "zz login instance"]);
    assert.deepEqual(await names(s.orgB), ["zz login B's own", "zz login instance"]);
    const a = await activeIdpForOrg(platform.db, platform.deps.masterKey, s.instanceId, s.orgA, own);
    assert.deepEqual(a, {
      id: own,
      name: "zz login A's own",
      type: "oauth",
      owner: "organization",
      options: {
        isManualLinkingAllowed: false,
        isManualCreationAllowed: false,
        isAutoCreation: false,
        isAutoUpdate: false,
        autoLinking: "unspecified",
      },
      config: {
        authorizationEndpoint: "https://oauth.example.com/authorize",
        tokenEndpoint: "https://oauth.example.com/token",
        userEndpoint: "https://oauth.example.com/user",
        idAttribute: "id",
        clientId: "cid-oauth",
        clientSecret: "secret-of-oauth",
        scopes: ["profile"],
      },
    });
    const b = await activeIdpForOrg(platform.db, platform.deps.masterKey, s.instanceId, s.orgA, inst);
    assert.equal(b?.type, "codehost_b");
    assert.equal(b?.config.issuer, undefined, "codehost_b: the login uses the fixed or configured issuer");
    assert.equal(b?.config.clientSecret, "secret-of-codehost_b");
    assert.equal(
      await activeIdpForOrg(platform.db, platform.deps.masterKey, s.instanceId, s.orgA, otherOrg),
      null,
      "another org's provider",
    );
    assert.equal(
      await activeIdpForOrg(platform.db, platform.deps.masterKey, s.instanceId, s.orgA, "4242"),
      null,
    );
    assert.equal(
      await activeIdpForOrg(platform.db, platform.deps.masterKey, "4242", s.orgA, inst),
      null,
      "another instance",
    );
    // inactive in A only: gone there, still in B
    await rest("PATCH", `${IDPS}/codehost_b/${inst}?ctx.org_id=${s.orgA}`, {
      json: { idp: { state_policy: "STATE_POLICY_DEACTIVATE" } },
    });
    assert.deepEqual(await names(s.orgA), ["zz login A's own"]);
    assert.deepEqual(await names(s.orgB), ["zz login B's own", "zz login instance"]);
    assert.equal(
      await activeIdpForOrg(platform.db, platform.deps.masterKey, s.instanceId, s.orgA, inst),
      null,
    );
    const oidc = await activeIdpForOrg(platform.db, platform.deps.masterKey, s.instanceId, s.orgB, otherOrg);
    assert.deepEqual(oidc?.config, {
      issuer: "https://sso.example.com",
      clientId: "cid-oidc",
      clientSecret: "secret-of-oidc",
      scopes: ["openid", "profile", "email"],
      isIdTokenMapping: true,
    });
  });
});
