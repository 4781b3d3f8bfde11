import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Queryable, Row } from "../storage/database.ts";
import { Broadcast, CACHE_CHANNEL, EVENTS_TOPIC } from "./broadcast.ts";

/** A database that records the payloads of each statement and answers after `delayMs`. */
function recorder(delayMs = 5) {
  const statements: string[][] = [];
  const db: Queryable = {
    async query<T extends Row = Row>(_sql: string, params: readonly unknown[] = []) {
      assert.equal(params[0], CACHE_CHANNEL);
      statements.push(params[1] as string[]);
      await new Promise((resolve) => setTimeout(resolve, delayMs));
      return [] as T[];
    },
    async exec() {},
  };
  return { db, statements };
}

const log = { warn() {} };

describe("broadcast of cache changes", () => {
  it("sends nothing without a database to send on (the embedded one)", async () => {
    const broadcast = new Broadcast();
    assert.equal(broadcast.enabled, false);
    await broadcast.publish(EVENTS_TOPIC, [1, 1]);
  });

  it("what is published while a statement is on its way goes out together, close event ranges merged", async () => {
    const { db, statements } = recorder();
    const broadcast = new Broadcast(db);
    const first = broadcast.publish(EVENTS_TOPIC, [10, 10]);
    await new Promise((resolve) => setImmediate(resolve)); // its statement is on its way
    const rest = [
      broadcast.publish(EVENTS_TOPIC, [12, 14]),
      broadcast.publish(EVENTS_TOPIC, [11, 11]),
      broadcast.publish(EVENTS_TOPIC, [5_000, 5_001]),
      broadcast.publish("revoked", { instanceId: "i", tokenId: "t" }),
    ];
    await broadcast.flushed();
    assert.equal(statements.length, 2);
    await Promise.all([first, ...rest]);
    const p = broadcast.processId;
    assert.deepEqual(statements, [
      [JSON.stringify({ p, t: "events", m: [10, 10] })],
      [
        JSON.stringify({ p, t: "events", m: [11, 14] }),
        JSON.stringify({ p, t: "events", m: [5_000, 5_001] }),
        JSON.stringify({ p, t: "revoked", m: { instanceId: "i", tokenId: "t" } }),
      ],
    ]);
  });

  it("a message too large for PostgreSQL goes out as 'clear everything'", async () => {
    const { db, statements } = recorder();
    const broadcast = new Broadcast(db);
    await broadcast.publish("revoked", {
      instanceId: "i",
      sessionIds: Array.from({ length: 2000 }, (_, i) => `s${i}`),
    });
    assert.deepEqual(statements, [[JSON.stringify({ p: broadcast.processId, t: "stale" })]]);
  });

  it("a failed send is not the writer's failure", async () => {
    const broadcast = new Broadcast({
      query: async () => {
        throw new Error("connection lost");
      },
      exec: async () => {},
    });
    await broadcast.publish(EVENTS_TOPIC, [1, 2]);
  });

  it("receives: its own messages skipped, a topic to its handler, anything it cannot read clears the caches", async () => {
    const broadcast = new Broadcast();
    const other = new Broadcast();
    const received: unknown[] = [];
    broadcast.subscribe("revoked", (message) => void received.push(message));
    let stale = 0;
    broadcast.onStale(() => stale++);
    const channel = broadcast.channel(log);
    const db = recorder().db;
    const from = (sender: Broadcast, t: string, m?: unknown) => JSON.stringify({ p: sender.processId, t, m });

    await channel.notified(from(broadcast, "revoked", { tokenId: "own" }), db);
    await channel.notified(from(other, "revoked", { tokenId: "theirs" }), db);
    assert.deepEqual(received, [{ tokenId: "theirs" }]);
    assert.equal(stale, 0);
    await channel.notified(from(other, "stale"), db);
    await channel.notified(from(other, "a topic of a newer version"), db);
    await channel.notified("not json", db);
    assert.equal(stale, 3);
    channel.connected(); // listening again after a lost connection: whatever was sent meanwhile is unknown
    assert.equal(stale, 4);
    assert.throws(() => broadcast.subscribe("revoked", () => {}), /taken/);
  });
});
