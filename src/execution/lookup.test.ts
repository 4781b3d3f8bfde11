import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { EventStore } from "../eventstore/eventstore.ts";
import type { Queryable } from "../storage/database.ts";
import { ExecutionLookup } from "./lookup.ts";

/** A transaction that answers the execution IDs and counts how often it was asked. */
function countingTx(): Queryable & { reads: number } {
  const tx = {
    reads: 0,
    async query<T>(sql: string): Promise<T[]> {
      assert.match(sql, /FROM action_executions/);
      tx.reads++;
      return [{ id: "request./zitadel.user.v2.UserService/AddHumanUser" }] as T[];
    },
    async exec(): Promise<void> {},
  };
  return tx as unknown as Queryable & { reads: number };
}

const noEvents = { onCommitted() {}, onStale() {} } as unknown as EventStore;

describe("execution lookup: the execution IDs cached for transactions", () => {
  it("reads once per time-to-live, also after an entry expired (not on every push)", async () => {
    const tx = countingTx();
    const lookup = new ExecutionLookup(tx, noEvents, 30);
    const first = await lookup.idsInTransaction(tx, "instance", true);
    assert.ok(first.has("request./zitadel.user.v2.UserService/AddHumanUser"));
    await lookup.idsInTransaction(tx, "instance", true);
    assert.equal(tx.reads, 1, "cached while fresh");
    await new Promise((resolve) => setTimeout(resolve, 40));
    await lookup.idsInTransaction(tx, "instance", true);
    assert.equal(tx.reads, 2, "expired: read again");
    await lookup.idsInTransaction(tx, "instance", true);
    await lookup.idsInTransaction(tx, "instance", true);
    assert.equal(tx.reads, 2, "the expired entry was renewed by that read");
  });

  it("does not keep what a transaction that changes executions read", async () => {
    const tx = countingTx();
    const lookup = new ExecutionLookup(tx, noEvents, 10_000);
    await lookup.idsInTransaction(tx, "instance", false);
    await lookup.idsInTransaction(tx, "instance", true);
    assert.equal(tx.reads, 2);
  });
});
