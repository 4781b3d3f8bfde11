import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import {
  addMachineUser,
  assertRpcError,
  expectNothingStored,
  type Json,
  type TestPlatform,
} from "../../../test/helpers.ts";
import { aggregateTypes } from "../../domain/catalogue.ts";
import { PlatformEvents } from "../../gen/platform/resources/event/v3alpha/event_service_pb.ts";
import { type AuditFixture, asFilters, micros, SEARCH, startAuditFixture } from "./testing.ts";

describe("events API: search, order, paging, filters, entries, errors", () => {
  let platform: TestPlatform;
  let instanceId: string;
  let orgId: string;
  let otherOrgId: string;
  let owner: { userId: string; token: string }; // IAM_OWNER
  let viewer: string; // IAM_OWNER_VIEWER
  let otherOwner: { userId: string; token: string }; // ORG_OWNER of another organization
  let adaId: string; // a human of the first organization, changed by the IAM_OWNER
  let rest: AuditFixture["rest"];
  let search: AuditFixture["search"];
  let all: AuditFixture["all"];

  before(async () => {
    const f = await startAuditFixture();
    ({ platform, instanceId, orgId, otherOrgId, owner, otherOwner, adaId } = f);
    ({ rest, search, all } = f);
    viewer = f.viewer.token;
  });
  after(() => platform.stop());

  it("searches the instance's events newest first by sequence; asc; paging by offset and by cursor", async () => {
    const events = await all();
    const sequences = events.map((e) => BigInt(e.sequence));
    assert.ok(events.length > 30, `${events.length} events`);
    for (let i = 1; i < sequences.length; i++) assert.ok(sequences[i - 1] > sequences[i], "descending");
    assert.ok(events.every((e) => e.sequence && e.created_at && e.event_type && e.aggregate_type));
    // The instance's own events are in it; the system's (instance_id '') are not.
    assert.ok(events.some((e) => e.event_type === "instance.added" && e.aggregate_id === instanceId));
    assert.ok(!events.some((e) => e.event_type.startsWith("system.")));

    const asc = await all(undefined, "&query.asc=true");
    assert.deepEqual(
      asc.map((e) => e.sequence),
      events.map((e) => e.sequence).reverse(),
    );
    assert.equal(asc[0].event_type, "instance.added");

    // Pages by offset: details tell the total and the end.
    const first = await search({}, "?query.limit=5");
    assert.equal(first.status, 200, first.text);
    assert.deepEqual(
      first.json.result.map((e: Json) => e.sequence),
      events.slice(0, 5).map((e) => e.sequence),
    );
    assert.equal(first.json.details.applied_limit, 5);
    assert.equal(first.json.details.total_result, String(events.length));
    assert.equal(first.json.details.end_of_list, false);
    assert.equal(first.json.details.processed_sequence, events[0].sequence);
    const second = await search({}, "?query.limit=5&query.offset=5");
    assert.deepEqual(
      second.json.result.map((e: Json) => e.sequence),
      events.slice(5, 10).map((e) => e.sequence),
    );
    const last = await search({}, `?query.limit=5&query.offset=${events.length - 2}`);
    assert.equal(last.json.result.length, 2);
    assert.equal(last.json.details.end_of_list, true);
    assert.equal(last.json.details.total_result, String(events.length));
    const beyond = await search({}, `?query.offset=${events.length + 10}`);
    assert.deepEqual(beyond.json.result ?? [], []);
    assert.equal(beyond.json.details.total_result, String(events.length));
    assert.equal(beyond.json.details.end_of_list, true);

    // Pages by cursor: the last sequence of a page, in either direction.
    const next = await search({ from_sequence: events[4].sequence }, "?query.limit=5");
    assert.deepEqual(
      next.json.result.map((e: Json) => e.sequence),
      events.slice(5, 10).map((e) => e.sequence),
    );
    const forward = await search({ fromSequence: asc[4].sequence }, "?query.limit=3&query.asc=true");
    assert.deepEqual(
      forward.json.result.map((e: Json) => e.sequence),
      asc.slice(5, 8).map((e) => e.sequence),
    );
  });

  it("entries: sequence, time, types, aggregate, owner, editor with display name, payload", async () => {
    const events = await all();
    const locked = events.find((e) => e.event_type === "user.locked" && e.aggregate_id === adaId);
    assert.ok(locked);
    assert.deepEqual(Object.keys(locked).sort(), [
      "aggregate_id",
      "aggregate_sequence",
      "aggregate_type",
      "created_at",
      "editor",
      "event_type",
      "payload",
      "resource_owner",
      "sequence",
    ]);
    assert.equal(locked.aggregate_type, "user");
    assert.equal(locked.resource_owner, orgId);
    assert.deepEqual(locked.editor, { user_id: owner.userId, display_name: "owner" });
    assert.equal(locked.aggregate_sequence, "3"); // added, password changed, locked
    assert.match(locked.created_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);
    assert.ok(Math.abs(Date.parse(locked.created_at) - Date.now()) < 10 * 60_000);
    assert.deepEqual(locked.payload, {});

    const added = events.find((e) => e.event_type === "user.human.added" && e.aggregate_id === adaId);
    assert.equal(added.payload.username, "ada");
    assert.equal(added.payload.profile.display_name, "Countess Ada");
    assert.equal(added.aggregate_sequence, "1");

    // The platform itself (bootstrap) is the editor `system`, no user.
    const boot = events.find((e) => e.event_type === "instance.added");
    assert.deepEqual(boot.editor, { user_id: "system", display_name: "" });
  });

  it("filters: aggregate type and ID, event types, editor, resource owner, time range, cursor; all at once", async () => {
    const events = await all();
    const check = async (filters: Json | Json[], expected: (e: Json) => boolean, query = "") => {
      const r = await search(filters, `?query.limit=1000${query}`);
      assert.equal(r.status, 200, r.text);
      const ordered = query.includes("query.asc=true") ? [...events].reverse() : events;
      const want = ordered.filter(expected).map((e) => e.sequence);
      assert.ok(want.length > 0, `${JSON.stringify(filters)} matches something`);
      assert.deepEqual(
        r.json.result.map((e: Json) => e.sequence),
        want,
        JSON.stringify(filters),
      );
      assert.equal(r.json.details.total_result, String(want.length));
      assert.ok(want.length < events.length, `${JSON.stringify(filters)} filters something out`);
    };
    await check({ aggregate_type: "project" }, (e) => e.aggregate_type === "project");
    await check({ aggregate_id: adaId }, (e) => e.aggregate_id === adaId);
    await check(
      [{ aggregateType: { aggregateType: "user" } }, { aggregateId: { aggregateId: adaId } }],
      (e) => e.aggregate_id === adaId,
    );
    await check(
      { event_types: ["user.locked", "project.app.secret.changed"] },
      (e) => e.event_type === "user.locked" || e.event_type === "project.app.secret.changed",
    );
    await check({ editor_user_id: otherOwner.userId }, (e) => e.editor.user_id === otherOwner.userId);
    await check({ resource_owner: otherOrgId }, (e) => e.resource_owner === otherOrgId);
    await check({ resource_owner: instanceId }, (e) => e.resource_owner === instanceId);

    // Time bounds are exclusive, to the microsecond an event was stored with.
    const pivot = events[Math.floor(events.length / 2)];
    await check({ created_after: pivot.created_at }, (e) => micros(e.created_at) > micros(pivot.created_at));
    await check({ created_before: pivot.created_at }, (e) => micros(e.created_at) < micros(pivot.created_at));
    const r = await search({ created_after: pivot.created_at, created_before: pivot.created_at }, "");
    assertRpcError(
      r,
      400,
      3,
      "filters[1].created_before.created_before: must be later than filters[0].created_after.created_after",
    );
    const beforeAll = await search({ created_before: "2000-01-01T00:00:00Z" });
    assert.deepEqual(beforeAll.json.result ?? [], []);
    assert.equal(beforeAll.json.details.total_result, "0");
    assert.equal(beforeAll.json.details.end_of_list, true);

    await check({ from_sequence: pivot.sequence }, (e) => BigInt(e.sequence) < BigInt(pivot.sequence));
    await check(
      { from_sequence: pivot.sequence },
      (e) => BigInt(e.sequence) > BigInt(pivot.sequence),
      "&query.asc=true",
    );
    const asc = await search({ aggregate_id: adaId }, "?query.asc=true");
    assert.deepEqual(
      asc.json.result.map((e: Json) => e.event_type),
      ["user.human.added", "user.password.changed", "user.locked"],
    );

    // Every filter together.
    const locked = events.find((e) => e.event_type === "user.locked");
    const together = await search({
      aggregate_type: "user",
      aggregate_id: adaId,
      event_types: ["user.locked"],
      editor_user_id: owner.userId,
      resource_owner: orgId,
      created_after: "2000-01-01T00:00:00Z",
      created_before: new Date(Date.now() + 60_000).toISOString(),
      from_sequence: String(BigInt(locked.sequence) + 1n),
    });
    assert.deepEqual(
      together.json.result.map((e: Json) => e.sequence),
      [locked.sequence],
    );
    // Filters that match nothing answer an empty page.
    const none = await search({ aggregate_id: "no-such-id" });
    assert.equal(none.status, 200);
    assert.deepEqual(none.json.result ?? [], []);
  });

  it("bad input: 400 naming the field, over REST and gRPC; a search stores nothing", async () => {
    const cases: Array<[string, unknown, string | RegExp]> = [
      [
        "",
        asFilters({ aggregate_type: "users" }),
        'filters[0].aggregate_type.aggregate_type: unknown aggregate type "users"',
      ],
      [
        "",
        asFilters({ aggregate_id: "1", event_types: ["user.locked", "user.lock"] }),
        'filters[1].event_types.event_types[1]: unknown event type "user.lock"',
      ],
      ["", asFilters({ event_types: [""] }), /^filters\[0\]\.event_types\.event_types\[0\]: /],
      ["", asFilters({ event_types: [] }), /^filters\[0\]\.event_types\.event_types: /],
      ["", asFilters({ created_after: "yesterday" }), /^filters\[0\]\.created_after\.created_after: /],
      [
        "",
        asFilters({ created_before: "2024-13-01T00:00:00Z" }),
        /^filters\[0\]\.created_before\.created_before: /,
      ],
      ["", asFilters({ from_sequence: "-1" }), /^filters\[0\]\.from_sequence\.from_sequence: /],
      [
        "",
        asFilters({ from_sequence: "18446744073709551615" }),
        "filters[0].from_sequence.from_sequence: is too large",
      ],
      ["", asFilters({ aggregate_id: "" }), /^filters\[0\]\.aggregate_id\.aggregate_id: /],
      // each kind once; a filter names one kind
      [
        "",
        [{ aggregate_id: { aggregate_id: "1" } }, { aggregate_id: { aggregate_id: "2" } }],
        "filters[1].aggregate_id: is given more than once (at filters[0])",
      ],
      ["", [{}], /^filters\[0\]/],
      ["", [{ editor: "x" }], /editor/],
      ["", '{"aggregate_type": ', /JSON|json/],
      // one object of filters (the old body) is refused: the body is an array like every search's
      ["", { aggregate_type: "user" }, /filters/],
      ["", Array.from({ length: 101 }, () => ({ aggregate_id: { aggregate_id: "1" } })), /^filters: /],
      ["?query.limit=1001", [], "query.limit: must be at most 1000"],
      ["?query.offset=x", [], /query\.offset/],
      ["?query.asc=maybe", [], /query\.asc/],
      ["?ctx.org_id=", [], /^ctx\.org_id: /],
    ];
    for (const [query, body, message] of cases) {
      const r = await expectNothingStored(platform, () =>
        rest("POST", `${SEARCH}${query}`, typeof body === "string" ? { body } : { json: body }),
      );
      assertRpcError(r, 400, 3, message);
    }
    // An unknown organization: 404.
    assertRpcError(await search({}, "?ctx.org_id=123"), 404, 5);

    const client = createClient(PlatformEvents, createGrpcTransport({ baseUrl: platform.url }));
    const headers = { authorization: `Bearer ${owner.token}` };
    await assert.rejects(
      client.searchEvents(
        { filters: [{ filter: { case: "eventTypes", value: { eventTypes: ["user.nope"] } } }] },
        { headers },
      ),
      (e) =>
        e instanceof ConnectError &&
        e.code === Code.InvalidArgument &&
        e.rawMessage.startsWith('filters[0].event_types.event_types[0]: unknown event type "user.nope"'),
    );
    await assert.rejects(
      client.searchEvents(
        {
          filters: [
            {
              filter: {
                case: "createdAfter",
                value: { createdAfter: { seconds: 253_402_300_800n, nanos: 0 } },
              },
            },
          ],
        },
        { headers },
      ),
      (e) =>
        e instanceof ConnectError &&
        e.code === Code.InvalidArgument &&
        e.rawMessage === "filters[0].created_after.created_after: is not a valid timestamp",
    );
    await assert.rejects(
      client.listEventTypes({}, { headers: { authorization: "Bearer nope" } }),
      (e) => e instanceof ConnectError && e.code === Code.Unauthenticated,
    );
  });

  it("gRPC: the same search, payloads as JSON objects, the same scoping", async () => {
    const client = createClient(PlatformEvents, createGrpcTransport({ baseUrl: platform.url }));
    const viaRest = await all(undefined);
    const answer = await client.searchEvents(
      {
        query: { limit: 1000 },
        filters: [{ filter: { case: "aggregateId", value: { aggregateId: adaId } } }],
      },
      { headers: { authorization: `Bearer ${owner.token}` } },
    );
    assert.deepEqual(
      answer.result.map((e) => e.sequence.toString()),
      viaRest.filter((e) => e.aggregate_id === adaId).map((e) => e.sequence),
    );
    const added = answer.result.find((e) => e.eventType === "user.human.added")!;
    assert.equal(added.payload?.username, "ada");
    assert.equal(added.payload?.password_hash, undefined);
    assert.equal(added.editor?.displayName, "owner");
    const scoped = await client.searchEvents(
      { query: { limit: 1000 } },
      { headers: { authorization: `Bearer ${otherOwner.token}` } },
    );
    assert.ok(scoped.result.length > 0);
    assert.ok(scoped.result.every((e) => e.resourceOwner === otherOrgId));
    const types = await client.listAggregateTypes({}, { headers: { authorization: `Bearer ${viewer}` } });
    assert.deepEqual(types.aggregateTypes, [...aggregateTypes]);
    const nobody = await addMachineUser(platform, { username: "grpc-nobody" });
    await assert.rejects(
      client.listEventTypes({}, { headers: { authorization: `Bearer ${nobody.token}` } }),
      (e) => e instanceof ConnectError && e.code === Code.PermissionDenied,
    );
  });
});
