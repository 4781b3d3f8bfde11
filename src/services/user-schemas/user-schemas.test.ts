import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Code, type ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import {
  assertRejected,
  type RestCall,
  type RestReply,
  restClient,
  startPlatform,
  type TestPlatform,
} from "../../../test/helpers.ts";
import { eventTypes } from "../../domain/catalogue.ts";
import { MAX_SCHEMA_BYTES } from "../../domain/user-schema/json-schema.ts";
import {
  AuthenticatorType,
  UserSchemaState,
} from "../../gen/platform/resources/user_schema/v3alpha/user_schema_pb.ts";
import { PlatformUserSchemas } from "../../gen/platform/resources/user_schema/v3alpha/user_schema_service_pb.ts";
import { addCallers } from "../actions/testing.ts";

const SCHEMAS = "/resources/v3alpha/user_schemas";

const customerSchema = {
  $schema: "https://json-schema.org/draft/2020-12/schema",
  type: "object",
  properties: {
    customer_number: { type: "string", "urn:platform:schema:permission": { owner: "rw", self: "r" } },
    tier: { type: "string", enum: ["basic", "gold"] },
  },
  required: ["customer_number"],
};

describe("user schemas", () => {
  let platform: TestPlatform;
  let callers: Awaited<ReturnType<typeof addCallers>>;
  let rest: RestCall;
  const rejects = (call: () => Promise<RestReply>, status: number, code: number, message?: RegExp | string) =>
    assertRejected(platform, call, status, code, message);
  const valid = (extra: Record<string, unknown> = {}) => ({
    type: "customer",
    schema: customerSchema,
    possible_authenticators: ["AUTHENTICATOR_TYPE_USERNAME", "AUTHENTICATOR_TYPE_PASSWORD"],
    ...extra,
  });
  const createSchema = async (body: unknown) => {
    const r = await rest("POST", SCHEMAS, { json: body });
    assert.equal(r.status, 201, r.text);
    return r.json.details.id as string;
  };

  before(async () => {
    platform = await startPlatform({ listen: true });
    callers = await addCallers(platform);
    rest = restClient(platform, () => callers.owner);
  });
  after(() => platform?.stop());

  it("creates a schema (201, active, revision 1), reads it back; a schema patch is the next revision", async () => {
    const id = await createSchema(valid());
    const got = await rest("GET", `${SCHEMAS}/${id}`);
    assert.equal(got.status, 200, got.text);
    assert.equal(got.json.details.id, id);
    assert.deepEqual(got.json.details.resource_owner, {
      type: "OWNER_TYPE_INSTANCE",
      id: platform.bootstrapResult!.instanceId,
    });
    assert.equal(got.json.state, "USER_SCHEMA_STATE_ACTIVE");
    assert.equal(got.json.revision, 1);
    assert.deepEqual(got.json.user_schema, valid());

    // the type and the authenticators do not change the revision; the schema does
    const renamed = await rest("PATCH", `${SCHEMAS}/${id}`, {
      json: { type: "client", possible_authenticators: ["AUTHENTICATOR_TYPE_WEBAUTHN"] },
    });
    assert.equal(renamed.status, 200, renamed.text);
    assert.equal((await rest("GET", `${SCHEMAS}/${id}`)).json.revision, 1);
    const schema = { ...customerSchema, required: [] };
    const patched = await rest("PATCH", `${SCHEMAS}/${id}`, { json: { schema } });
    assert.equal(patched.status, 200, patched.text);
    const after = await rest("GET", `${SCHEMAS}/${id}`);
    assert.equal(after.json.revision, 2);
    assert.deepEqual(after.json.user_schema, {
      type: "client",
      schema,
      possible_authenticators: ["AUTHENTICATOR_TYPE_WEBAUTHN"],
    });
    // the same schema again changes nothing
    const same = await rest("PATCH", `${SCHEMAS}/${id}`, { json: { schema } });
    assert.equal(same.json.details.sequence, patched.json.details.sequence);
    assert.equal((await rest("GET", `${SCHEMAS}/${id}`)).json.revision, 2);
    // [] empties the authenticators over REST
    await rest("PATCH", `${SCHEMAS}/${id}`, { json: { possible_authenticators: [] } });
    assert.deepEqual((await rest("GET", `${SCHEMAS}/${id}`)).json.user_schema.possible_authenticators, []);

    const events = await platform.db.query<{ event_type: string }>(
      "SELECT event_type FROM events WHERE aggregate_id = $1 ORDER BY sequence",
      [id],
    );
    assert.deepEqual(
      events.map((e) => e.event_type),
      ["user_schema.added", "user_schema.changed", "user_schema.changed", "user_schema.changed"],
    );
  });

  it("deactivates and reactivates; deletes and frees the type", async () => {
    const id = await createSchema(valid({ type: "lifecycle" }));
    assert.equal((await rest("POST", `${SCHEMAS}/${id}/_deactivate`)).status, 200);
    assert.equal((await rest("GET", `${SCHEMAS}/${id}`)).json.state, "USER_SCHEMA_STATE_INACTIVE");
    const again = await rest("POST", `${SCHEMAS}/${id}/_deactivate`);
    assert.equal(again.status, 200, "deactivating an inactive schema changes nothing");
    assert.equal((await rest("POST", `${SCHEMAS}/${id}/_reactivate`)).status, 200);
    assert.equal((await rest("GET", `${SCHEMAS}/${id}`)).json.state, "USER_SCHEMA_STATE_ACTIVE");
    await rejects(() => rest("POST", SCHEMAS, { json: valid({ type: "lifecycle" }) }), 409, 6, /lifecycle/);
    assert.equal((await rest("DELETE", `${SCHEMAS}/${id}`)).status, 200);
    await rejects(() => rest("GET", `${SCHEMAS}/${id}`), 404, 5, `user schema ${id} not found`);
    await createSchema(valid({ type: "lifecycle" }));
    for (const type of ["deactivated", "reactivated", "removed"])
      assert.ok(eventTypes.includes(`user_schema.${type}`), `user_schema.${type} is in the catalogue`);
  });

  it("searches by id, type (text methods) and state", async () => {
    const a = await createSchema(valid({ type: "search-alpha" }));
    const b = await createSchema(valid({ type: "search-beta" }));
    await rest("POST", `${SCHEMAS}/${b}/_deactivate`);
    const ids = async (filters: unknown, query = "?query.asc=true") => {
      const r = await rest("POST", `${SCHEMAS}/_search${query}`, { json: filters });
      assert.equal(r.status, 200, r.text);
      return (r.json.result ?? []).map((s: { details: { id: string } }) => s.details.id);
    };
    assert.deepEqual(await ids([{ id: { id: a } }]), [a]);
    assert.deepEqual(await ids([{ type: { type: "search-", method: "TEXT_FILTER_METHOD_STARTS_WITH" } }]), [
      a,
      b,
    ]);
    assert.deepEqual(
      await ids([{ type: { type: "SEARCH-ALPHA", method: "TEXT_FILTER_METHOD_EQUALS_IGNORE_CASE" } }]),
      [a],
    );
    assert.deepEqual(
      await ids([
        { type: { type: "search-", method: "TEXT_FILTER_METHOD_STARTS_WITH" } },
        { state: { state: "USER_SCHEMA_STATE_INACTIVE" } },
      ]),
      [b],
    );
    const sorted = await ids(
      [{ type: { type: "search-", method: "TEXT_FILTER_METHOD_STARTS_WITH" } }],
      "?sorting_column=USER_SCHEMA_FIELD_NAME_TYPE&query.asc=false",
    );
    assert.deepEqual(sorted, [b, a]);
  });

  it("refuses bad input naming the problem and stores nothing", async () => {
    // the bound is on the schema as compact JSON: one byte more than it is refused, exactly it is taken
    const overhead = JSON.stringify({ type: "object", description: "" }).length;
    const big = { type: "object", description: "x".repeat(MAX_SCHEMA_BYTES - overhead + 1) };
    const cases: [string, unknown, string | RegExp][] = [
      ["type required", valid({ type: "" }), "user_schema.type: is required"],
      ["type at most 200", valid({ type: "t".repeat(201) }), "user_schema.type: must be at most 200"],
      ["schema required", valid({ schema: undefined }), "user_schema.schema: is required"],
      [
        "not a JSON Schema",
        valid({ schema: { type: "objekt" } }),
        /^user_schema\.schema: is not a valid JSON Schema \(draft 2020-12\): at \/type: /,
      ],
      [
        "a keyword with a wrong value",
        valid({ schema: { type: "object", properties: { a: { minLength: "3" } } } }),
        "user_schema.schema: is not a valid JSON Schema (draft 2020-12): at /properties/a/minLength: must be integer",
      ],
      [
        "invalid pattern",
        valid({ schema: { type: "string", pattern: "(" } }),
        /^user_schema\.schema: is not a usable JSON Schema: .*regular expression/i,
      ],
      [
        "a backreference (the linear-time engine has none)",
        valid({ schema: { type: "object", properties: { a: { type: "string", pattern: "^(a)\\1$" } } } }),
        /^user_schema\.schema: is not a usable JSON Schema: pattern "\^\(a\)\\\\1\$" is not supported \(patterns run on a linear-time engine, without backreferences or lookaround\)/,
      ],
      [
        "a named backreference",
        valid({ schema: { type: "string", pattern: "(?<x>a)\\k<x>" } }),
        /^user_schema\.schema: is not a usable JSON Schema: pattern .* is not supported .*: it holds a backreference$/,
      ],
      [
        "a lookahead in patternProperties",
        valid({ schema: { type: "object", patternProperties: { "^(?!x)": { type: "string" } } } }),
        /^user_schema\.schema: is not a usable JSON Schema: pattern "\^\(\?!x\)" is not supported/,
      ],
      [
        "remote $ref",
        valid({ schema: { type: "object", properties: { a: { $ref: "https://example.com/s.json" } } } }),
        'user_schema.schema: at /properties/a/$ref: $ref "https://example.com/s.json" refers to another document',
      ],
      [
        "relative $ref",
        valid({ schema: { $ref: "other.json" } }),
        'user_schema.schema: at /$ref: $ref "other.json" refers to another document',
      ],
      [
        "unresolvable local $ref",
        valid({ schema: { $ref: "#/$defs/missing" } }),
        /^user_schema\.schema: is not a usable JSON Schema: can't resolve reference #\/\$defs\/missing/,
      ],
      [
        "another draft",
        valid({ schema: { $schema: "http://json-schema.org/draft-07/schema#", type: "object" } }),
        "user_schema.schema: at /$schema: must be https://json-schema.org/draft/2020-12/schema",
      ],
      [
        "a bad field permission",
        valid({
          schema: { type: "object", properties: { a: { "urn:platform:schema:permission": { owner: "x" } } } },
        }),
        /^user_schema\.schema: is not a usable JSON Schema: .*urn:platform:schema:permission/,
      ],
      [
        "larger than 64 KiB",
        valid({ schema: big }),
        `user_schema.schema: must be at most ${MAX_SCHEMA_BYTES} bytes as JSON (is ${MAX_SCHEMA_BYTES + 1})`,
      ],
      [
        "unknown authenticator",
        valid({ possible_authenticators: ["AUTHENTICATOR_TYPE_UNSPECIFIED"] }),
        "user_schema.possible_authenticators: must not hold AUTHENTICATOR_TYPE_UNSPECIFIED",
      ],
      ["body required", undefined, "user_schema: is required"],
    ];
    for (const [what, body, message] of cases) {
      await rejects(
        () => (body === undefined ? rest("POST", SCHEMAS) : rest("POST", SCHEMAS, { json: body })),
        400,
        3,
        message,
      ).catch((e) => {
        throw new Error(`${what}: ${e.message}`);
      });
    }
    await createSchema(
      valid({
        type: "at-the-edge",
        schema: { type: "object", description: "x".repeat(MAX_SCHEMA_BYTES - overhead) },
      }),
    );
    const id = await createSchema(valid({ type: "patched-badly" }));
    await rejects(
      () => rest("PATCH", `${SCHEMAS}/${id}`, { json: { schema: { type: 5 } } }),
      400,
      3,
      /^user_schema\.schema: is not a valid JSON Schema/,
    );
    await rejects(() => rest("PATCH", `${SCHEMAS}/${id}`, { json: { type: "lifecycle" } }), 409, 6);
    await rejects(() => rest("GET", `${SCHEMAS}/404404`), 404, 5, "user schema 404404 not found");
    await rejects(() => rest("PATCH", `${SCHEMAS}/404404`, { json: { type: "x" } }), 404, 5);
    await rejects(() => rest("POST", `${SCHEMAS}/404404/_deactivate`), 404, 5);
    await rejects(() => rest("DELETE", `${SCHEMAS}/404404`), 404, 5);
  });

  it("IAM_OWNER manages schemas, IAM_OWNER_VIEWER reads them, ORG_OWNER and users without roles may not", async () => {
    const id = await createSchema(valid({ type: "permissions" }));
    const as = (token: string) => restClient(platform, () => token);
    const viewer = as(callers.viewer);
    assert.equal((await viewer("GET", `${SCHEMAS}/${id}`)).status, 200);
    assert.equal((await viewer("POST", `${SCHEMAS}/_search`, { json: [] })).status, 200);
    await rejects(() => viewer("POST", SCHEMAS, { json: valid({ type: "v" }) }), 403, 7);
    await rejects(() => viewer("DELETE", `${SCHEMAS}/${id}`), 403, 7);
    for (const token of [callers.orgOwner, callers.nobody]) {
      const caller = as(token);
      await rejects(() => caller("GET", `${SCHEMAS}/${id}`), 403, 7);
      await rejects(() => caller("POST", `${SCHEMAS}/_search`, { json: [] }), 403, 7);
      await rejects(() => caller("POST", SCHEMAS, { json: valid({ type: "o" }) }), 403, 7);
      await rejects(() => caller("PATCH", `${SCHEMAS}/${id}`, { json: { type: "o" } }), 403, 7);
      await rejects(() => caller("POST", `${SCHEMAS}/${id}/_deactivate`), 403, 7);
      await rejects(() => caller("DELETE", `${SCHEMAS}/${id}`), 403, 7);
    }
    await rejects(() => rest("GET", `${SCHEMAS}/${id}`, { token: null }), 401, 16);
  });

  it("works over Connect with the same rules", async () => {
    const client = createClient(
      PlatformUserSchemas,
      createConnectTransport({ baseUrl: platform.url, httpVersion: "1.1" }),
    );
    const headers = { authorization: `Bearer ${callers.owner}` };
    const created = await client.createUserSchema(
      {
        userSchema: {
          type: "over-connect",
          schema: { type: "object", properties: { n: { type: "integer" } } },
          possibleAuthenticators: [AuthenticatorType.PASSWORD],
        },
      },
      { headers },
    );
    const id = created.details!.id;
    const got = await client.getUserSchema({ id }, { headers });
    assert.equal(got.state, UserSchemaState.ACTIVE);
    assert.equal(got.revision, 1);
    assert.deepEqual(got.userSchema?.schema, { type: "object", properties: { n: { type: "integer" } } });
    await client.patchUserSchema({ id, userSchema: { schema: { type: "object" } } }, { headers });
    assert.equal((await client.getUserSchema({ id }, { headers })).revision, 2);
    // binary protobuf cannot send []: update_mask empties the list
    await client.patchUserSchema(
      { id, userSchema: {}, updateMask: { paths: ["possible_authenticators"] } },
      { headers },
    );
    assert.deepEqual(
      (await client.getUserSchema({ id }, { headers })).userSchema?.possibleAuthenticators,
      [],
    );
    await client.deactivateUserSchema({ id }, { headers });
    const found = await client.searchUserSchemas(
      { filters: [{ filter: { case: "state", value: { state: UserSchemaState.INACTIVE } } }] },
      { headers },
    );
    assert.ok(found.result.some((s) => s.details?.id === id));
    await assert.rejects(
      client.createUserSchema(
        { userSchema: { type: "bad-connect", schema: { $ref: "https://example.com/x" } } },
        { headers },
      ),
      (e: ConnectError) => e.code === Code.InvalidArgument && /refers to another document/.test(e.message),
    );
    await assert.rejects(
      client.getUserSchema({ id }, { headers: { authorization: `Bearer ${callers.orgOwner}` } }),
      (e: ConnectError) => e.code === Code.PermissionDenied,
    );
  });
});
