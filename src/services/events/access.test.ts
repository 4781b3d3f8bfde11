import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { addMachineUser, assertRpcError, type Json, type TestPlatform } from "../../../test/helpers.ts";
import { aggregateTypes, eventTypes } from "../../domain/catalogue.ts";
import { SECRET_KEY } from "../../domain/redaction.ts";
import { type AuditFixture, EVENTS, SECRET_CARRYING, startAuditFixture, USERS } from "./testing.ts";

describe("events API: who may read what, payloads without secrets, type lists, retention", () => {
  let platform: TestPlatform;
  let instanceId: string;
  let orgId: string;
  let otherOrgId: string;
  let owner: { userId: string; token: string }; // IAM_OWNER
  let viewer: string; // IAM_OWNER_VIEWER
  let orgOwner: { userId: string; token: string }; // ORG_OWNER of the first organization
  let otherOwner: { userId: string; token: string }; // ORG_OWNER of another organization
  let adaId: string; // a human of the first organization, changed by the IAM_OWNER
  let otherUserId: string; // a user of the other organization, created by its owner
  let rest: AuditFixture["rest"];
  let search: AuditFixture["search"];
  let all: AuditFixture["all"];
  let systemToken: AuditFixture["systemToken"];

  before(async () => {
    const f = await startAuditFixture();
    ({ platform, instanceId, orgId, otherOrgId, owner, orgOwner, otherOwner, adaId, otherUserId } = f);
    ({ rest, search, all, systemToken } = f);
    viewer = f.viewer.token;
  });
  after(() => platform.stop());

  it("permissions: IAM_OWNER and IAM_OWNER_VIEWER read all, ORG_OWNER its organization's events, others 403", async () => {
    const everything = await all();
    assert.deepEqual(
      (await all(viewer)).map((e) => e.sequence),
      everything.map((e) => e.sequence),
    );

    // ORG_OWNER: exactly the events whose resource owner is its organization, with or without ctx.
    const mine = await all(orgOwner.token);
    assert.deepEqual(
      mine.map((e) => e.sequence),
      everything.filter((e) => e.resource_owner === orgId).map((e) => e.sequence),
    );
    assert.ok(mine.some((e) => e.aggregate_id === adaId));
    assert.deepEqual(
      (await all(orgOwner.token, `&ctx.org_id=${orgId}`)).map((e) => e.sequence),
      mine.map((e) => e.sequence),
    );
    const theirs = await all(otherOwner.token);
    assert.ok(theirs.length > 0);
    assert.ok(theirs.every((e) => e.resource_owner === otherOrgId));
    assert.ok(theirs.some((e) => e.aggregate_id === otherUserId));
    // Filters narrow within what is readable, never widen it.
    const foreign = await search({ resource_owner: otherOrgId }, "", orgOwner.token);
    assert.equal(foreign.status, 200);
    assert.deepEqual(foreign.json.result ?? [], []);
    const foreignUser = await search({ aggregate_id: otherUserId }, "", orgOwner.token);
    assert.deepEqual(foreignUser.json.result ?? [], []);
    // The newest readable event, not the instance's.
    const page = await search({}, "?query.limit=1", orgOwner.token);
    assert.equal(page.json.details.processed_sequence, mine[0].sequence);
    // Another organization's context: 403.
    assertRpcError(
      await search({}, `?ctx.org_id=${otherOrgId}`, orgOwner.token),
      403,
      7,
      "permission denied: events.read is required",
    );
    // An instance role narrowed to an organization by ctx.
    assert.deepEqual(
      (await all(owner.token, `&ctx.org_id=${otherOrgId}`)).map((e) => e.sequence),
      theirs.map((e) => e.sequence),
    );

    // Roles without events.read: 403 on the search and the type lists; no token: 401.
    for (const [username, contextType, roles] of [
      ["org-viewer", "org", ["ORG_OWNER_VIEWER"]],
      ["user-manager", "instance", ["IAM_USER_MANAGER"]],
      ["org-manager", "instance", ["IAM_ORG_MANAGER"]],
      ["org-user-manager", "org", ["ORG_USER_MANAGER"]],
      ["nobody", undefined, undefined],
    ] as const) {
      const { token } = await addMachineUser(platform, {
        username,
        membership: contextType ? { contextType, roles: [...roles!] } : undefined,
      });
      for (const call of [
        () => search({}, "", token),
        () => search({}, `?ctx.org_id=${orgId}`, token),
        () => rest("GET", `${EVENTS}/types`, { token }),
        () => rest("GET", `${EVENTS}/aggregate_types`, { token }),
      ])
        assertRpcError(await call(), 403, 7, "permission denied: events.read is required");
    }
    assertRpcError(await search({}, "", null), 401, 16);
    assertRpcError(await rest("GET", `${EVENTS}/types`, { token: null }), 401, 16);
    // The system context is no place to search events (403 for a user, 400 for a system user).
    assertRpcError(await search({}, "?ctx.system=true"), 403, 7);
    assertRpcError(await search({}, "?ctx.system=true", await systemToken()), 400, 3, "ctx: ");
    // A system user reads the instance's events.
    const system = await search({}, "?query.limit=1000", await systemToken());
    assert.equal(system.status, 200, system.text);
    assert.ok(system.json.result.length >= everything.length);
  });

  it("payloads never hold passwords, secrets, tokens, their hashes or key material", async () => {
    const raw = await platform.db.query<{ event_type: string; payload: Json }>(
      "SELECT event_type, payload FROM events WHERE instance_id = $1",
      [instanceId],
    );
    // Every secret-carrying event type occurred here, and the raw events do hold those values.
    const secrets: string[] = [];
    const carrying = new Set<string>();
    const collect = (type: string, value: Json): void => {
      if (Array.isArray(value)) {
        for (const v of value) collect(type, v);
      } else if (value && typeof value === "object")
        for (const [key, v] of Object.entries(value)) {
          if (SECRET_KEY.test(key) && typeof v === "string") {
            secrets.push(v);
            carrying.add(type);
          } else collect(type, v);
        }
    };
    for (const row of raw) collect(row.event_type, row.payload);
    assert.deepEqual([...carrying].sort(), [...SECRET_CARRYING].sort());
    assert.ok(
      secrets.some((s) => s.startsWith("$argon2id$")),
      "password hashes are stored in events",
    );

    for (const token of [owner.token, viewer, orgOwner.token]) {
      const r = await search({}, "?query.limit=1000", token);
      for (const secret of secrets) assert.ok(!r.text.includes(secret), "a stored secret value leaked");
      assert.doesNotMatch(r.text, /_hash"|"public_key"|"validation_token"|\$argon2/);
    }
    // The rest of these payloads stays.
    const events = await all();
    const pat = events.find((e) => e.event_type === "user.pat.added");
    assert.deepEqual(Object.keys(pat.payload), ["pat_id"]);
    const domain = events.find((e) => e.event_type === "org.domain.added" && !e.payload.generated);
    assert.equal(domain.payload.domain, "shop.example.com");
    const app = events.find((e) => e.event_type === "project.app.oidc.added" && e.payload.name === "Web");
    assert.equal(app.payload.name, "Web");
    assert.deepEqual(app.payload.config.redirect_uris, ["https://shop.example.com/cb"]);
  });

  it("lists the event types and aggregate types (every stored event has a listed type)", async () => {
    const types = await rest("GET", `${EVENTS}/types`);
    assert.equal(types.status, 200, types.text);
    assert.deepEqual(types.json.event_types, [...eventTypes]);
    assert.deepEqual(types.json.event_types, [...types.json.event_types].sort());
    for (const type of ["user.locked", "user.human.added", "idp.added", "instance.limits.set"])
      assert.ok(types.json.event_types.includes(type), type);
    assert.ok(!types.json.event_types.some((t: string) => t.startsWith("system.")));
    const aggregates = await rest("GET", `${EVENTS}/aggregate_types`, { token: viewer });
    assert.equal(aggregates.status, 200, aggregates.text);
    assert.deepEqual(aggregates.json.aggregate_types, [...aggregateTypes]);
    assert.ok(aggregates.json.aggregate_types.includes("user_grant"));
    for (const type of types.json.event_types)
      assert.ok(aggregates.json.aggregate_types.includes(type.split(".")[0]), type);
    // Every event stored in the instance has a listed type.
    for (const e of await all()) {
      assert.ok(types.json.event_types.includes(e.event_type), e.event_type);
      assert.ok(aggregates.json.aggregate_types.includes(e.aggregate_type), e.aggregate_type);
    }
    // ORG_OWNER may list them too.
    assert.equal((await rest("GET", `${EVENTS}/types`, { token: orgOwner.token })).status, 200);
  });

  it("the instance's audit_log_retention (instances API `_limit`) hides older events, and only from this search", async () => {
    const events = await all();
    const cut = events[Math.floor(events.length / 2)];
    // Two days pass for the older half (the clock cannot be moved, the events' times can).
    await platform.db.query(
      "UPDATE events SET created_at = created_at - interval '2 days' WHERE instance_id = $1 AND position <= $2",
      [instanceId, cut.sequence],
    );
    const system = await systemToken();
    const limited = await rest("POST", `/resources/v3alpha/instances/${instanceId}/_limit`, {
      token: system,
      json: { audit_log_retention: "86400s" },
    });
    assert.equal(limited.status, 200, limited.text);

    const visible = await all();
    const newer = events.filter((e) => BigInt(e.sequence) > BigInt(cut.sequence)).map((e) => e.sequence);
    // The newest event is the limit itself (an instance event, by the system user).
    assert.equal(visible[0].event_type, "instance.limits.set");
    assert.deepEqual(visible[0].editor, { user_id: "ops-robot", display_name: "" });
    assert.deepEqual(
      visible.slice(1).map((e) => e.sequence),
      newer,
    );
    const page = await search({}, "?query.limit=2&query.asc=true");
    assert.equal(page.json.result[0].sequence, newer.at(-1));
    assert.equal(page.json.details.total_result, String(newer.length + 1));
    // Filters and cursors cannot reach behind it, for any reader.
    const old = await search({ created_before: new Date(Date.now() - 86_400_000 - 60_000).toISOString() });
    assert.deepEqual(old.json.result ?? [], []);
    const behind = await search({ from_sequence: String(BigInt(cut.sequence) + 1n) });
    assert.deepEqual(behind.json.result ?? [], []);
    assert.ok((await all(orgOwner.token)).every((e) => BigInt(e.sequence) > BigInt(cut.sequence)));
    // The events are hidden, not gone: the read models still show the older changes.
    const ada = await rest("GET", `${USERS}/${adaId}`);
    assert.equal(ada.status, 200);

    // Removing the limit (0s) shows them again.
    const unlimited = await rest("POST", `/resources/v3alpha/instances/${instanceId}/_limit`, {
      token: system,
      json: { audit_log_retention: "0s" },
    });
    assert.equal(unlimited.status, 200, unlimited.text);
    assert.equal((await all()).length, events.length + 2);
  });
});
