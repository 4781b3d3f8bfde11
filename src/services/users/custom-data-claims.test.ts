import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { decodeJwt } from "jose";
import { client } from "../../../test/oidc.ts";
import { PlatformUsers } from "../../gen/platform/resources/user/v3alpha/user_service_pb.ts";
import { customDataSuite, DATA_SCOPE, PERMISSION, SCHEMAS, USERS } from "./testing.ts";

describe("custom data of users: search, deletion, audit log, tokens, Connect", () => {
  const { s, rejects, human, createUser, createSchema, tokensOf, selfClient } = customDataSuite();
  const rest = (...args: Parameters<typeof s.rest>) => s.rest(...args);
  const owner = (...args: Parameters<typeof s.owner>) => s.owner(...args);

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
    assert.equal(
      (await self("PATCH", `${USERS}/${b}`, { json: { data: { diary: "dear diary" } } })).status,
      200,
    );
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
      json: [{ aggregate_id: { aggregate_id: b } }, { event_types: { event_types: ["user.data.set"] } }],
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
      human({
        schema_id: s.schemaId,
        data: { customer_number: "C-9", internal_note: "hidden", tier: "gold" },
      }),
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
    const discovery = (await (await fetch(`${s.platform.url}/.well-known/openid-configuration`)).json()) as {
      claims_supported: string[];
    };
    assert.ok(discovery.claims_supported.includes(DATA_SCOPE));
  });

  it("works over Connect: data as a google.protobuf.Struct", async () => {
    const users = createClient(
      PlatformUsers,
      createConnectTransport({ baseUrl: s.platform.url, httpVersion: "1.1" }),
    );
    const headers = { authorization: `Bearer ${s.callers.orgOwner}` };
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
          schemaId: s.schemaId,
          data: { customer_number: "G-1", address: { street: "Navy 1" } },
        },
      },
      { headers },
    );
    const got = await users.getUser({ id: created.details!.id }, { headers });
    assert.equal(got.user?.schemaId, s.schemaId);
    assert.equal(got.user?.schemaRevision, 1);
    assert.deepEqual(got.user?.data, { customer_number: "G-1", address: { street: "Navy 1" } });
  });
});
