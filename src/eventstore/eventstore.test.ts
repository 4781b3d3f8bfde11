import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { startPlatform, type TestPlatform } from "../../test/helpers.ts";
import { changeSettings } from "../domain/settings/commands.ts";
import { OwnerType } from "../domain/settings/events.ts";
import { AlreadyExistsError } from "../errors.ts";
import { newId } from "../id.ts";
import type { NewEvent } from "./types.ts";

describe("event store", () => {
  let platform: TestPlatform;
  let instanceId: string;
  before(async () => {
    platform = await startPlatform();
    instanceId = platform.bootstrapResult!.instanceId;
  });
  after(() => platform.stop());

  const countEvents = async () =>
    Number((await platform.db.query<{ n: number }>("SELECT count(*)::int AS n FROM events"))[0].n);

  it("20 parallel writers to one aggregate: no duplicate sequence, no lost event", async () => {
    const aggregateId = newId();
    const ctx = { instanceId, creator: "test" };
    const writers = Array.from({ length: 20 }, (_, i) =>
      platform.eventStore.push(ctx, async (tx) => {
        const current = await tx.load("counter", aggregateId);
        return [
          {
            aggregateType: "counter",
            aggregateId,
            resourceOwner: instanceId,
            type: "counter.incremented",
            payload: { writer: i, seen: current.length },
          },
        ];
      }),
    );
    const results = await Promise.all(writers);
    assert.equal(results.flat().length, 20);
    const events = await platform.eventStore.aggregateEvents(instanceId, "counter", aggregateId);
    assert.deepEqual(
      events.map((e) => e.sequence),
      Array.from({ length: 20 }, (_, i) => i + 1),
    );
    assert.deepEqual(new Set(events.map((e) => e.payload!.writer)).size, 20);
    // Each writer saw exactly the events before its own: the optimistic lock re-ran the losers.
    assert.deepEqual(
      events.map((e) => e.payload!.seen),
      Array.from({ length: 20 }, (_, i) => i),
    );
  });

  it("expect() locks on the current sequence without reading the history", async () => {
    const aggregateId = newId();
    const ctx = { instanceId, creator: "test" };
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        platform.eventStore.push(ctx, async (tx) => {
          const seen = await tx.expect("counter", aggregateId);
          return [
            {
              aggregateType: "counter",
              aggregateId,
              resourceOwner: instanceId,
              type: "counter.incremented",
              payload: { writer: i, seen },
            },
          ];
        }),
      ),
    );
    assert.equal(results.flat().length, 20);
    const events = await platform.eventStore.aggregateEvents(instanceId, "counter", aggregateId);
    assert.deepEqual(
      events.map((e) => [e.sequence, e.payload!.seen]),
      Array.from({ length: 20 }, (_, i) => [i + 1, i]),
    );
  });

  it("a unique-constraint violation rolls back the events and the projection rows", async () => {
    const orgId = platform.bootstrapResult!.orgId;
    const userEvent = (username: string): NewEvent => ({
      aggregateType: "user",
      aggregateId: newId(),
      resourceOwner: orgId,
      type: "user.machine.added",
      payload: { username, name: username, access_token_type: 0 },
      uniqueConstraints: [
        { action: "add", type: "username", field: username, ignoreCase: true, message: "taken" },
      ],
    });
    await platform.eventStore.push({ instanceId, creator: "test" }, async () => [userEvent("robot")]);
    const eventsBefore = await countEvents();
    const usersBefore = await platform.db.query("SELECT id FROM users ORDER BY id");

    // One push: a fresh user (would be projected) and a case-variant of a taken username.
    await assert.rejects(
      platform.eventStore.push({ instanceId, creator: "test" }, async () => [
        userEvent("fresh"),
        userEvent("ROBOT"),
      ]),
      (error) => error instanceof AlreadyExistsError && error.message === "taken",
    );
    assert.equal(await countEvents(), eventsBefore);
    assert.deepEqual(await platform.db.query("SELECT id FROM users ORDER BY id"), usersBefore);
    const claimed = await platform.db.query("SELECT 1 FROM unique_constraints WHERE unique_field = 'fresh'");
    assert.equal(claimed.length, 0);
  });

  it("rebuilding a projection gives identical read-model rows", async () => {
    // Every projection gets events: bootstrap made the identity ones, this the settings ones.
    await changeSettings(platform.eventStore, {
      category: "language",
      owner: { type: OwnerType.instance, id: instanceId },
      instanceId,
      set: { default_language: "de" },
      reset: [],
      creator: "test",
    });
    // Every table of every projection, rows in a canonical order.
    const tables = platform.eventStore.projections.flatMap((p) => p.tables);
    const snapshot = async () => {
      const out: Record<string, unknown[]> = {};
      for (const table of tables) {
        out[table] = await platform.db.query(`SELECT * FROM ${table} ORDER BY (to_jsonb(${table}.*))::text`);
      }
      return out;
    };
    const before = await snapshot();
    assert.ok(before.users.length >= 2);
    for (const projection of platform.eventStore.projections) {
      const replayed = await platform.eventStore.rebuild(projection.name);
      const stored = await platform.db.query(
        "SELECT 1 FROM events WHERE aggregate_type = ANY($1) AND event_type = ANY($2) LIMIT 1",
        [projection.aggregateTypes, Object.keys(projection.handlers)],
      );
      assert.equal(replayed > 0, stored.length > 0, `${projection.name} replayed its events`);
    }
    assert.deepEqual(await snapshot(), before);
  });

  it("a command that returns no events appends nothing", async () => {
    const before = await countEvents();
    const stored = await platform.eventStore.push({ instanceId, creator: "test" }, async () => []);
    assert.deepEqual(stored, []);
    assert.equal(await countEvents(), before);
  });
});
