import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { InvalidatedCache } from "./invalidated-cache.ts";

const key = InvalidatedCache.key;

describe("InvalidatedCache", () => {
  it("keeps a loaded answer (absent ones too) and loads again after ttlMs", async () => {
    const cache = new InvalidatedCache<string | undefined>({ ttlMs: 40, max: 10 });
    let loads = 0;
    const load = async () => {
      loads++;
      return undefined;
    };
    assert.equal(await cache.through(key("i1", "a"), load), undefined);
    assert.equal(await cache.through(key("i1", "a"), load), undefined);
    assert.equal(loads, 1);
    await new Promise((resolve) => setTimeout(resolve, 60));
    await cache.through(key("i1", "a"), load);
    assert.equal(loads, 2);
  });

  it("an answer read across a drop is returned but not kept", async () => {
    const cache = new InvalidatedCache<number>({ ttlMs: 10_000, max: 10 });
    let release!: () => void;
    const slow = cache.through(key("i1", "a"), async () => {
      await new Promise<void>((resolve) => (release = resolve));
      return 1; // read before the change that the drop announces
    });
    cache.invalidate("i1");
    release();
    assert.equal(await slow, 1);
    assert.equal(cache.get(key("i1", "a")), undefined);
    assert.equal(await cache.through(key("i1", "a"), async () => 2), 2);
    assert.deepEqual(cache.get(key("i1", "a")), { value: 2 });
  });

  it("a scope's drop leaves other scopes (and a scope that merely starts alike) alone; no scope drops all", async () => {
    const cache = new InvalidatedCache<number>({ ttlMs: 10_000, max: 10 });
    for (const scope of ["i1", "i10", "i2"]) cache.set(cache.ticket(), key(scope, "a"), 1);
    cache.invalidate("i1");
    assert.equal(cache.get(key("i1", "a")), undefined);
    assert.deepEqual(cache.get(key("i10", "a")), { value: 1 });
    assert.deepEqual(cache.get(key("i2", "a")), { value: 1 });
    cache.invalidate();
    assert.equal(cache.get(key("i10", "a")), undefined);
    assert.equal(cache.get(key("i2", "a")), undefined);
  });

  it("holds at most max answers, dropping the oldest first", () => {
    const cache = new InvalidatedCache<number>({ ttlMs: 10_000, max: 3 });
    for (let n = 0; n < 5; n++) cache.set(cache.ticket(), key("i1", String(n)), n);
    assert.equal(cache.get(key("i1", "0")), undefined);
    assert.equal(cache.get(key("i1", "1")), undefined);
    assert.deepEqual(
      [2, 3, 4].map((n) => cache.get(key("i1", String(n)))?.value),
      [2, 3, 4],
    );
  });
});
