import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { compiledValidators, MAX_DATA_BYTES } from "../../domain/user-schema/json-schema.ts";
import { customDataSuite, SCHEMAS, USERS } from "./testing.ts";

describe("custom data of users (user schemas)", () => {
  const { s, rejects, human, createUser, createSchema, selfClient } = customDataSuite();
  const rest = (...args: Parameters<typeof s.rest>) => s.rest(...args);
  const owner = (...args: Parameters<typeof s.owner>) => s.owner(...args);

  it("creates a human user with data checked against the schema; GetUser returns schema_id, revision, data", async () => {
    const data = { customer_number: "C-1", tier: "gold", internal_note: "vip", address: { zip: "8000" } };
    const id = await createUser(human({ schema_id: s.schemaId, data }));
    const got = await rest("GET", `${USERS}/${id}`);
    assert.equal(got.status, 200, got.text);
    assert.equal(got.json.user.schema_id, s.schemaId);
    assert.equal(got.json.user.schema_revision, 1);
    assert.deepEqual(got.json.user.data, data);
    const [added] = await s.platform.db.query<{ payload: Record<string, unknown> }>(
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
        () => rest("POST", USERS, { json: human({ schema_id: s.schemaId, data }) }),
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
          json: { username: "robot", machine: { name: "robot" }, schema_id: s.schemaId, data: {} },
        }),
      400,
      3,
      "user.schema_id: custom data exists only for human users",
    );
    const usersWithData = await s.platform.db.query("SELECT id FROM users WHERE data IS NOT NULL");
    assert.equal(usersWithData.length, 1, "only the user of the first test has data");
  });

  it("bounds the data at 64 KiB as compact JSON, tested at the edge", async () => {
    const base = { customer_number: "C", blob: "" };
    const room = MAX_DATA_BYTES - JSON.stringify(base).length;
    const edge = await createUser(
      human({ schema_id: s.schemaId, data: { ...base, blob: "x".repeat(room) } }),
    );
    assert.equal((await rest("GET", `${USERS}/${edge}`)).json.user.data.blob.length, room);
    await rejects(
      () =>
        rest("POST", USERS, {
          json: human({ schema_id: s.schemaId, data: { ...base, blob: "x".repeat(room + 1) } }),
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
    assert.equal((await patch({ schema_id: s.schemaId, data: { customer_number: "M-1" } })).status, 200);
    assert.deepEqual((await read()).data, { customer_number: "M-1" });
    assert.equal((await read()).schema_id, s.schemaId);
    assert.equal((await patch({ schema_id: "" })).status, 200);
    const removed = await read();
    assert.equal(removed.schema_id, "");
    assert.equal(removed.data, undefined);
    await rejects(() => patch({ data: { a: "x" } }), 400, 9, "the user has no schema");
    const types = await s.platform.db.query<{ event_type: string }>(
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
    const user = await createUser(human({ schema_id: s.schemaId, data }));
    // owner may not write `newsletter` (owner: r), not even on creation
    await rejects(
      () =>
        rest("POST", USERS, {
          json: human({ schema_id: s.schemaId, data: { customer_number: "C", newsletter: true } }),
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
});
