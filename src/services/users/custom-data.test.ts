import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { decodeJwt } from "jose";
import {
  assertRejected,
  type RestCall,
  type RestReply,
  restClient,
  startPlatform,
  type TestPlatform,
} from "../../../test/helpers.ts";
import { client, discover, fixtureClient, registerFixtures } from "../../../test/oidc.ts";
import { sha256 } from "../../crypto/tokens.ts";
import { compiledValidators, MAX_DATA_BYTES } from "../../domain/user-schema/json-schema.ts";
import { PlatformUsers } from "../../gen/platform/resources/user/v3alpha/user_service_pb.ts";
import { addCallers } from "../actions/testing.ts";

const USERS = "/resources/v3alpha/users";
const SCHEMAS = "/resources/v3alpha/user_schemas";
const REDIRECT = "https://app.example/callback";
const SECRET = "web-app-secret-0123456789";
const DATA_SCOPE = "urn:platform:iam:user:data";
const PERMISSION = "urn:platform:schema:permission";

/** Every kind of field permission: explicit, default, owner-only, self-writable, nested. */
const schema = {
  type: "object",
  properties: {
    customer_number: { type: "string", title: "Customer number", [PERMISSION]: { owner: "rw", self: "r" } },
    tier: { type: "string", enum: ["basic", "gold"] },
    newsletter: { type: "boolean", [PERMISSION]: { owner: "r", self: "rw" } },
    internal_note: { type: "string", [PERMISSION]: { owner: "rw", self: "" } },
    age: { type: "integer", minimum: 0 },
    address: {
      type: "object",
      [PERMISSION]: { owner: "rw", self: "rw" },
      properties: {
        street: { type: "string" },
        zip: { type: "string", pattern: "^[0-9]{4}$" },
        verified: { type: "boolean", [PERMISSION]: { owner: "rw", self: "r" } },
      },
      additionalProperties: false,
    },
    blob: { type: "string" },
  },
  required: ["customer_number"],
  additionalProperties: false,
};

describe("custom data of users (user schemas)", () => {
  let platform: TestPlatform;
  let callers: Awaited<ReturnType<typeof addCallers>>;
  let rest: RestCall; // ORG_OWNER of the default organization: an administrator of the users' organization
  let owner: RestCall; // IAM_OWNER
  let schemaId: string;
  const rejects = (call: () => Promise<RestReply>, status: number, code: number, message?: RegExp | string) =>
    assertRejected(platform, call, status, code, message);
  let seq = 0;
  const human = (extra: Record<string, unknown> = {}) => ({
    username: `person-${++seq}`,
    human: {
      profile: { given_name: "Ada", family_name: "Lovelace" },
      email: { address: `person-${seq}@example.com`, is_verified: true },
    },
    ...extra,
  });
  const createUser = async (body: unknown) => {
    const r = await rest("POST", USERS, { json: body });
    assert.equal(r.status, 201, r.text);
    return r.json.details.id as string;
  };
  const createSchema = async (type: string, body: Record<string, unknown> = schema) => {
    const r = await owner("POST", SCHEMAS, { json: { type, schema: body } });
    assert.equal(r.status, 201, r.text);
    return r.json.details.id as string;
  };

  /** The user's own tokens through the token endpoint (a code as the authorization endpoint issues it). */
  const tokensOf = async (userId: string, scope: string, clientId = "web-app") => {
    const verifier = client.randomPKCECodeVerifier();
    const code = await platform.oidc.issueAuthorizationCode({
      instanceId: platform.bootstrapResult!.instanceId,
      issuer: platform.url,
      clientId,
      redirectUri: REDIRECT,
      scope: scope.split(" "),
      codeChallenge: await client.calculatePKCECodeChallenge(verifier),
      codeChallengeMethod: "S256",
      userId,
      sessionId: `session-${userId}`,
      authTime: new Date(Date.now() - 5000),
      amr: ["pwd"],
    });
    const config = await discover(platform.url, clientId, client.ClientSecretBasic(SECRET));
    const callback = new URL(
      `${REDIRECT}?code=${encodeURIComponent(code)}&iss=${encodeURIComponent(platform.url)}`,
    );
    const tokens = await client.authorizationCodeGrant(config, callback, {
      pkceCodeVerifier: verifier,
      idTokenExpected: scope.includes("openid"),
    });
    return { tokens, config };
  };
  /** A REST client calling with the user's own access token (management audience). */
  const selfClient = async (userId: string) => {
    const { tokens } = await tokensOf(userId, "openid urn:platform:iam:org:project:id:platform:aud");
    return restClient(platform, () => tokens.access_token);
  };

  before(async () => {
    platform = await startPlatform({ listen: true });
    callers = await addCallers(platform);
    rest = restClient(platform, () => callers.orgOwner);
    owner = restClient(platform, () => callers.owner);
    registerFixtures(platform, [
      fixtureClient(platform, { clientId: "web-app", secretHash: sha256(SECRET) }),
      fixtureClient(platform, {
        clientId: "web-app-jwt",
        secretHash: sha256(SECRET),
        accessTokenType: "jwt",
      }),
    ]);
    schemaId = await createSchema("customer");
  });
  after(() => platform?.stop());

  it("creates a human user with data checked against the schema; GetUser returns schema_id, revision, data", async () => {
    const data = { customer_number: "C-1", tier: "gold", internal_note: "vip", address: { zip: "8000" } };
    const id = await createUser(human({ schema_id: schemaId, data }));
    const got = await rest("GET", `${USERS}/${id}`);
    assert.equal(got.status, 200, got.text);
    assert.equal(got.json.user.schema_id, schemaId);
    assert.equal(got.json.user.schema_revision, 1);
    assert.deepEqual(got.json.user.data, data);
    const [added] = await platform.db.query<{ payload: Record<string, unknown> }>(
      "SELECT payload FROM events WHERE aggregate_id = $1 AND event_type = 'user.human.added'",
      [id],
    );
    assert.deepEqual(added.payload.data, data);
    // a user without a schema has none
    const plain = await createUser(human());
    const none = await rest("GET", `${USERS}/${plain}`);
    assert.equal(none.json.user.schema_id, "");
    assert.equal(none.json.user.data, undefined);
  });

  it("refuses data that does not match, naming the JSON pointer of the first problem, and stores nothing", async () => {
    const cases: [string, unknown, number, number, string][] = [
      ["required", { tier: "gold" }, 400, 3, "user.data: at /customer_number: is required"],
      ["type", { customer_number: "C", age: "old" }, 400, 3, "user.data: at /age: must be integer"],
      ["minimum", { customer_number: "C", age: -1 }, 400, 3, "user.data: at /age: must be >= 0"],
      [
        "enum",
        { customer_number: "C", tier: "platinum" },
        400,
        3,
        "user.data: at /tier: must be equal to one of the allowed values",
      ],
      [
        "nested",
        { customer_number: "C", address: { zip: "80" } },
        400,
        3,
        'user.data: at /address/zip: must match pattern "^[0-9]{4}$"',
      ],
      [
        "undeclared",
        { customer_number: "C", shoe_size: 44 },
        400,
        3,
        "user.data: at /shoe_size: is not allowed by the schema",
      ],
      [
        "nested undeclared",
        { customer_number: "C", address: { city: "Z" } },
        400,
        3,
        "user.data: at /address/city: is not allowed by the schema",
      ],
    ];
    for (const [what, data, status, code, message] of cases)
      await rejects(
        () => rest("POST", USERS, { json: human({ schema_id: schemaId, data }) }),
        status,
        code,
        message,
      ).catch((e) => {
        throw new Error(`${what}: ${e.message}`);
      });
    await rejects(
      () => rest("POST", USERS, { json: human({ data: { customer_number: "C" } }) }),
      400,
      3,
      "user.schema_id: is required with user.data",
    );
    await rejects(
      () => rest("POST", USERS, { json: human({ schema_id: "404404", data: { customer_number: "C" } }) }),
      404,
      5,
      "user schema 404404 not found",
    );
    await rejects(
      () =>
        rest("POST", USERS, {
          json: { username: "robot", machine: { name: "robot" }, schema_id: schemaId, data: {} },
        }),
      400,
      3,
      "user.schema_id: custom data exists only for human users",
    );
    const usersWithData = await platform.db.query("SELECT id FROM users WHERE data IS NOT NULL");
    assert.equal(usersWithData.length, 1, "only the user of the first test has data");
  });

  it("bounds the data at 64 KiB as compact JSON, tested at the edge", async () => {
    const base = { customer_number: "C", blob: "" };
    const room = MAX_DATA_BYTES - JSON.stringify(base).length;
    const edge = await createUser(human({ schema_id: schemaId, data: { ...base, blob: "x".repeat(room) } }));
    assert.equal((await rest("GET", `${USERS}/${edge}`)).json.user.data.blob.length, room);
    await rejects(
      () =>
        rest("POST", USERS, {
          json: human({ schema_id: schemaId, data: { ...base, blob: "x".repeat(room + 1) } }),
        }),
      400,
      3,
      `user.data: must be at most ${MAX_DATA_BYTES} bytes as JSON (is ${MAX_DATA_BYTES + 1})`,
    );
  });

  it("an inactive schema cannot be given to users; those that have it keep it", async () => {
    const id = await createSchema("retired", { type: "object", properties: { n: { type: "integer" } } });
    const user = await createUser(human({ schema_id: id, data: { n: 1 } }));
    assert.equal((await owner("POST", `${SCHEMAS}/${id}/_deactivate`)).status, 200);
    await rejects(
      () => rest("POST", USERS, { json: human({ schema_id: id, data: { n: 2 } }) }),
      400,
      9,
      `user.schema_id: user schema ${id} is inactive`.replace("user.schema_id: ", ""),
    );
    const other = await createUser(human());
    await rejects(
      () => rest("PATCH", `${USERS}/${other}`, { json: { schema_id: id } }),
      400,
      9,
      /is inactive/,
    );
    const patched = await rest("PATCH", `${USERS}/${user}`, { json: { data: { n: 3 } } });
    assert.equal(patched.status, 200, patched.text);
    assert.deepEqual((await rest("GET", `${USERS}/${user}`)).json.user.data, { n: 3 });
  });

  it("PatchUser merges data (RFC 7396), checks the result against the current revision; schema_id switches or removes", async () => {
    const id = await createSchema("mergeable", {
      type: "object",
      properties: { a: { type: "string" }, b: { type: "object" }, c: { type: "integer" } },
    });
    const user = await createUser(human({ schema_id: id, data: { a: "x", b: { p: 1, q: 2 } } }));
    const patch = (json: unknown) => rest("PATCH", `${USERS}/${user}`, { json });
    const read = async () => (await rest("GET", `${USERS}/${user}`)).json.user;
    assert.equal((await patch({ data: { b: { q: null, r: 3 }, c: 7 } })).status, 200);
    const compiled = compiledValidators(); // a revision is compiled once, then taken from the cache
    assert.deepEqual((await read()).data, { a: "x", b: { p: 1, r: 3 }, c: 7 });
    const before = await patch({ data: { a: null } });
    assert.deepEqual((await read()).data, { b: { p: 1, r: 3 }, c: 7 });
    const same = await patch({ data: { c: 7 } });
    assert.equal(same.json.details.sequence, before.json.details.sequence, "nothing changed, nothing stored");
    await rejects(() => patch({ data: { c: "seven" } }), 400, 3, "user.data: at /c: must be integer");

    // a new revision of the schema applies to the next write; the user keeps its revision until then
    const changed = await owner("PATCH", `${SCHEMAS}/${id}`, {
      json: { schema: { type: "object", properties: { c: { type: "integer", maximum: 5 } } } },
    });
    assert.equal(changed.status, 200, changed.text);
    assert.equal((await read()).schema_revision, 1);
    assert.equal(compiledValidators(), compiled, "revision 1 was compiled once for all its writes");
    await rejects(() => patch({ data: { c: 6 } }), 400, 3, "user.data: at /c: must be <= 5");
    assert.equal(compiledValidators(), compiled + 1, "revision 2 is compiled once");
    assert.equal((await patch({ data: { c: 5 } })).status, 200);
    assert.equal((await read()).schema_revision, 2);

    // another schema replaces the data; an empty schema_id removes schema and data
    assert.equal((await patch({ schema_id: schemaId, data: { customer_number: "M-1" } })).status, 200);
    assert.deepEqual((await read()).data, { customer_number: "M-1" });
    assert.equal((await read()).schema_id, schemaId);
    assert.equal((await patch({ schema_id: "" })).status, 200);
    const removed = await read();
    assert.equal(removed.schema_id, "");
    assert.equal(removed.data, undefined);
    await rejects(() => patch({ data: { a: "x" } }), 400, 9, "the user has no schema");
    const types = await platform.db.query<{ event_type: string }>(
      "SELECT event_type FROM events WHERE aggregate_id = $1 AND event_type LIKE 'user.data.%' ORDER BY sequence",
      [user],
    );
    assert.deepEqual(
      types.map((t) => t.event_type),
      ["user.data.set", "user.data.set", "user.data.set", "user.data.set", "user.data.removed"],
    );
  });

  it("field permissions: the organization's administrators (owner) and the user itself (self)", async () => {
    const data = {
      customer_number: "C-7",
      tier: "basic",
      internal_note: "owner only",
      address: { street: "Main 1", verified: true },
    };
    const user = await createUser(human({ schema_id: schemaId, data }));
    // owner may not write `newsletter` (owner: r), not even on creation
    await rejects(
      () =>
        rest("POST", USERS, {
          json: human({ schema_id: schemaId, data: { customer_number: "C", newsletter: true } }),
        }),
      403,
      7,
      "user.data: the caller may not write the property at /newsletter",
    );

    const self = await selfClient(user);
    const own = await self("GET", `${USERS}/${user}`);
    assert.equal(own.status, 200, own.text);
    // self reads everything but internal_note (self: ""); tier has the default (self r)
    assert.deepEqual(own.json.user.data, {
      customer_number: "C-7",
      tier: "basic",
      address: { street: "Main 1", verified: true },
    });
    // self writes newsletter (rw) and address (rw) but not address.verified (r), customer_number (r), tier (default r)
    const ok = await self("PATCH", `${USERS}/${user}`, {
      json: { data: { newsletter: true, address: { street: "Side 2" } } },
    });
    assert.equal(ok.status, 200, ok.text);
    for (const [property, body] of [
      ["/customer_number", { customer_number: "C-8" }],
      ["/tier", { tier: "gold" }],
      ["/internal_note", { internal_note: null }],
      ["/address/verified", { address: { verified: false } }],
    ] as const)
      await rejects(
        () => self("PATCH", `${USERS}/${user}`, { json: { data: body } }),
        403,
        7,
        `user.data: the caller may not write the property at ${property}`,
      );
    // the user itself may change only its data this way
    await rejects(() => self("PATCH", `${USERS}/${user}`, { json: { username: "renamed" } }), 404, 5);

    // the administrator sees internal_note and the newsletter choice, and may not change the latter
    const seen = await rest("GET", `${USERS}/${user}`);
    assert.deepEqual(seen.json.user.data, {
      customer_number: "C-7",
      tier: "basic",
      newsletter: true,
      internal_note: "owner only",
      address: { street: "Side 2", verified: true },
    });
    await rejects(
      () => rest("PATCH", `${USERS}/${user}`, { json: { data: { newsletter: false } } }),
      403,
      7,
      "user.data: the caller may not write the property at /newsletter",
    );
    assert.equal((await rest("PATCH", `${USERS}/${user}`, { json: { data: { tier: "gold" } } })).status, 200);

    // another user may not read it at all
    const stranger = await selfClient(await createUser(human()));
    await rejects(() => stranger("GET", `${USERS}/${user}`), 404, 5);
    await rejects(
      () => stranger("PATCH", `${USERS}/${user}`, { json: { data: { newsletter: false } } }),
      404,
      5,
    );
  });

  it("searches users by schema; search results carry the data the caller may read", async () => {
    const id = await createSchema("searchable", {
      type: "object",
      properties: {
        diary: { type: "string", [PERMISSION]: { owner: "", self: "rw" } },
        n: { type: "integer" },
      },
    });
    const a = await createUser(human({ schema_id: id, data: { n: 1 } }));
    // the owner cannot write `diary`; a user writes its own
    const b = await createUser(human({ schema_id: id, data: { n: 2 } }));
    const self = await selfClient(b);
    assert.equal((await self("PATCH", `${USERS}/${b}`, { json: { data: { diary: "dear diary" } } })).status, 200);
    const found = await rest("POST", `${USERS}/_search?query.asc=true`, {
      json: [{ schema_id: { schema_id: id } }],
    });
    assert.equal(found.status, 200, found.text);
    assert.deepEqual(
      found.json.result.map((u: { details: { id: string }; data: unknown }) => [u.details.id, u.data]),
      [
        [a, { n: 1 }],
        [b, { n: 2 }],
      ],
    );
    const none = await rest("POST", `${USERS}/_search`, { json: [{ schema_id: { schema_id: "404404" } }] });
    assert.equal(none.json.result?.length ?? 0, 0);
    // the audit log shows the data as the administrators may read it, not more
    const events = await owner("POST", "/resources/v3alpha/events/_search?query.asc=true", {
      json: { aggregate_id: b, event_types: ["user.data.set"] },
    });
    assert.equal(events.status, 200, events.text);
    assert.deepEqual(
      events.json.result.map((e: { payload: unknown }) => e.payload),
      [{ schema_id: id, schema_revision: 1, data: { n: 2 } }],
    );
    assert.ok(!events.text.includes("dear diary"));
  });

  it("a schema that users have cannot be deleted", async () => {
    const id = await createSchema("in-use", { type: "object" });
    const user = await createUser(human({ schema_id: id, data: {} }));
    await rejects(
      () => owner("DELETE", `${SCHEMAS}/${id}`),
      400,
      9,
      `user schema ${id} is used by 1 user(s)`,
    );
    assert.equal((await rest("DELETE", `${USERS}/${user}`)).status, 200);
    assert.equal((await owner("DELETE", `${SCHEMAS}/${id}`)).status, 200);
  });

  it("userinfo, ID token, JWT access token and introspection carry the data only with the scope urn:platform:iam:user:data", async () => {
    const user = await createUser(
      human({ schema_id: schemaId, data: { customer_number: "C-9", internal_note: "hidden", tier: "gold" } }),
    );
    const expected = { customer_number: "C-9", tier: "gold" }; // what the user itself may read
    const withScope = await tokensOf(user, `openid profile ${DATA_SCOPE}`);
    const info = await client.fetchUserInfo(withScope.config, withScope.tokens.access_token, user);
    assert.deepEqual(info[DATA_SCOPE], expected);
    assert.deepEqual(withScope.tokens.claims()![DATA_SCOPE], expected);
    const introspected = await client.tokenIntrospection(withScope.config, withScope.tokens.access_token);
    assert.deepEqual(introspected[DATA_SCOPE], expected);
    const jwt = await tokensOf(user, `openid ${DATA_SCOPE}`, "web-app-jwt");
    assert.deepEqual(decodeJwt(jwt.tokens.access_token)[DATA_SCOPE], expected);

    const without = await tokensOf(user, "openid profile");
    const plain = await client.fetchUserInfo(without.config, without.tokens.access_token, user);
    assert.equal(plain[DATA_SCOPE], undefined);
    assert.equal(without.tokens.claims()![DATA_SCOPE], undefined);
    const plainJwt = await tokensOf(user, "openid profile", "web-app-jwt");
    assert.equal(decodeJwt(plainJwt.tokens.access_token)[DATA_SCOPE], undefined);
    const discovery = (await (await fetch(`${platform.url}/.well-known/openid-configuration`)).json()) as {
      claims_supported: string[];
    };
    assert.ok(discovery.claims_supported.includes(DATA_SCOPE));
  });

  it("works over Connect: data as a google.protobuf.Struct", async () => {
    const users = createClient(
      PlatformUsers,
      createConnectTransport({ baseUrl: platform.url, httpVersion: "1.1" }),
    );
    const headers = { authorization: `Bearer ${callers.orgOwner}` };
    const created = await users.createUser(
      {
        user: {
          username: "connect-person",
          type: {
            case: "human",
            value: {
              profile: { givenName: "Grace", familyName: "Hopper" },
              email: { address: "grace@example.com", isVerified: true },
            },
          },
          schemaId,
          data: { customer_number: "G-1", address: { street: "Navy 1" } },
        },
      },
      { headers },
    );
    const got = await users.getUser({ id: created.details!.id }, { headers });
    assert.equal(got.user?.schemaId, schemaId);
    assert.equal(got.user?.schemaRevision, 1);
    assert.deepEqual(got.user?.data, { customer_number: "G-1", address: { street: "Navy 1" } });
  });
});
