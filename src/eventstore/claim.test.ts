import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { startPlatform, type TestPlatform } from "../../test/helpers.ts";
import { newId } from "../id.ts";
import type { Queryable } from "../storage/database.ts";
import { type PushClaim, withPushClaim } from "./claim.ts";
import type { NewEvent, StoredEvent } from "./types.ts";

/** A claim writing one row of its own table, recording what the event store asked of it. */
class RecordingClaim implements PushClaim {
  readonly calls: string[] = [];
  bound = false;
  constructor(
    private readonly name: string,
    private readonly failEnter = false,
  ) {}
  async enter(tx: Queryable): Promise<boolean> {
    this.calls.push("enter");
    if (this.bound) return false;
    if (this.failEnter) throw new Error("claim taken");
    await tx.query("INSERT INTO claim_test (name) VALUES ($1)", [this.name]);
    return true;
  }
  async leave(tx: Queryable, stored: StoredEvent[]): Promise<void> {
    this.calls.push(`leave ${stored.length}`);
    if (stored.length === 0) await tx.query("DELETE FROM claim_test WHERE name = $1", [this.name]);
  }
  settle(bound: boolean): void {
    this.calls.push(`settle ${bound}`);
    this.bound ||= bound;
  }
}

describe("push claims", () => {
  let platform: TestPlatform;
  let instanceId: string;
  before(async () => {
    platform = await startPlatform();
    instanceId = platform.bootstrapResult!.instanceId;
    await platform.db.exec("CREATE TABLE claim_test (name text PRIMARY KEY)");
  });
  after(() => platform.stop());

  const claimRows = async (name: string) =>
    (await platform.db.query("SELECT 1 FROM claim_test WHERE name = $1", [name])).length;
  const event = (aggregateId: string): NewEvent => ({
    aggregateType: "claimed",
    aggregateId,
    resourceOwner: instanceId,
    type: "claimed.added",
  });
  const ctx = () => ({ instanceId, creator: "test" });

  it("the first push that commits events carries the claim, in its transaction; later pushes do not", async () => {
    const claim = new RecordingClaim("bound");
    await withPushClaim(claim, async () => {
      await platform.eventStore.push(ctx(), async () => []);
      assert.equal(await claimRows("bound"), 0, "a push without events undoes the claim");
      await platform.eventStore.push(ctx(), async () => [event(newId())]);
      await platform.eventStore.push(ctx(), async () => [event(newId())]);
    });
    assert.deepEqual(claim.calls, [
      "enter",
      "leave 0",
      "settle false",
      "enter",
      "leave 1",
      "settle true",
      "enter",
    ]);
    assert.equal(await claimRows("bound"), 1);
  });

  it("a failing command rolls the claim back with its events; a failing claim fails the push", async () => {
    const claim = new RecordingClaim("rolled back");
    await withPushClaim(claim, () =>
      assert.rejects(
        platform.eventStore.push(ctx(), async (tx) => {
          await tx.query("SELECT 1");
          throw new Error("command failed");
        }),
        /command failed/,
      ),
    );
    assert.deepEqual(claim.calls, ["enter", "settle false"]);
    assert.equal(await claimRows("rolled back"), 0);

    const aggregateId = newId();
    await withPushClaim(new RecordingClaim("taken", true), () =>
      assert.rejects(
        platform.eventStore.push(ctx(), async () => [event(aggregateId)]),
        /claim taken/,
      ),
    );
    assert.deepEqual(await platform.eventStore.aggregateEvents(instanceId, "claimed", aggregateId), []);
  });

  it("a push whose transaction is run again (serialization failure) claims again", async () => {
    const claim = new RecordingClaim("retried");
    let runs = 0;
    await withPushClaim(claim, () =>
      platform.eventStore.push(ctx(), async () => {
        // as PostgreSQL ends one of two conflicting transactions
        if (++runs === 1) throw Object.assign(new Error("could not serialize access"), { code: "40001" });
        return [event(newId())];
      }),
    );
    assert.equal(runs, 2);
    assert.deepEqual(claim.calls, ["enter", "settle false", "enter", "leave 1", "settle true"]);
    assert.equal(await claimRows("retried"), 1);
  });
});
