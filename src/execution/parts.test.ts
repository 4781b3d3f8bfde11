import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import { describe, it } from "node:test";
import { loadConfig } from "../config.ts";
import { withoutSecrets } from "../domain/redaction.ts";
import { MAX_RETRY_DELAY_MS, retryDelayMs } from "../outbox/table.ts";
import { eventBody } from "./outbox.ts";
import { signatureHeader, verifySignature } from "./signing.ts";

describe("executions: signatures", () => {
  const body = '{"a":1}';
  const now = 1_700_000_000_000;

  it("is t=<unix seconds>,v1=<hex HMAC-SHA256(key, '<t>.<body>')>", () => {
    const header = signatureHeader({ current: "key" }, body, now);
    const expected = createHmac("sha256", "key").update(`1700000000.${body}`).digest("hex");
    assert.equal(header, `t=1700000000,v1=${expected}`);
    assert.ok(verifySignature(header, body, "key", { now }));
  });

  it("carries one v1 per key during a rotation's grace period, the new key first", () => {
    const header = signatureHeader({ current: "new", previous: "old" }, body, now);
    const [t, first, second] = header.split(",");
    assert.ok(verifySignature(`${t},${first}`, body, "new", { now }));
    assert.ok(verifySignature(`${t},${second}`, body, "old", { now }));
    assert.ok(verifySignature(header, body, "old", { now }));
  });

  it("refuses another key, another body, an old or future timestamp, a malformed header", () => {
    const header = signatureHeader({ current: "key" }, body, now);
    assert.ok(!verifySignature(header, body, "other", { now }));
    assert.ok(!verifySignature(header, '{"a":2}', "key", { now }));
    assert.ok(!verifySignature(header, body, "key", { now: now + 301_000 }));
    assert.ok(!verifySignature(header, body, "key", { now: now - 301_000 }));
    assert.ok(verifySignature(header, body, "key", { now: now + 299_000 }));
    for (const bad of [undefined, "", "v1=abc", "t=x,v1=00", `t=1700000000,v1=${"0".repeat(64)}`])
      assert.ok(!verifySignature(bad, body, "key", { now }), String(bad));
  });
});

describe("executions: settings", () => {
  it("the other execution settings: defaults and bounds", () => {
    assert.deepEqual(loadConfig({}).execution, {
      maxAttempts: 12,
      retryDelayMs: 1000,
      maxResponseBytes: 1048576,
      signingKeyGraceSeconds: 86400,
    });
    assert.throws(
      () => loadConfig({ PLATFORM_EXECUTION_MAX_ATTEMPTS: "0" }),
      /PLATFORM_EXECUTION_MAX_ATTEMPTS: 0 is outside/,
    );
    assert.throws(
      () => loadConfig({ PLATFORM_EXECUTION_MAX_RESPONSE_BYTES: "10" }),
      /PLATFORM_EXECUTION_MAX_RESPONSE_BYTES/,
    );
  });
});

describe("executions: event payloads and retries", () => {
  it("drops hashes and key material at any depth", () => {
    assert.deepEqual(
      withoutSecrets({
        username: "a",
        password_hash: "$argon2id$...",
        token_hash: "x",
        secret_hash: "y",
        user_agent_hash: "z",
        public_key: "-----BEGIN",
        validation_token: "t",
        password_change_required: true,
        access_token_type: 1,
        nested: [{ secret: "s", key: "k", value: "v" }],
      }),
      {
        username: "a",
        password_change_required: true,
        access_token_type: 1,
        nested: [{ key: "k", value: "v" }],
      },
    );
  });

  it("the body of an event delivery has the contract's fields", () => {
    const body = eventBody({
      event_type: "user.human.added",
      aggregate_type: "user",
      aggregate_id: "u1",
      resource_owner: "o1",
      instance_id: "i1",
      sequence: "3",
      created_at: new Date("2026-01-02T03:04:05.678Z"),
      creator: "admin",
      payload: { username: "a", password_hash: "h" },
    });
    assert.deepEqual(body, {
      event_type: "user.human.added",
      aggregate_type: "user",
      aggregate_id: "u1",
      resource_owner: "o1",
      instance_id: "i1",
      sequence: 3,
      created_at: "2026-01-02T03:04:05.678Z",
      user_id: "admin",
      event_payload: { username: "a" },
    });
  });

  it("backs off exponentially with equal jitter, capped", () => {
    assert.equal(retryDelayMs(1, 1000, 0), 500);
    assert.equal(retryDelayMs(1, 1000, 1), 1000);
    assert.equal(retryDelayMs(2, 1000, 0), 1000);
    assert.equal(retryDelayMs(4, 1000, 1), 8000);
    assert.equal(retryDelayMs(40, 1000, 1), MAX_RETRY_DELAY_MS);
    const spread = new Set(Array.from({ length: 20 }, () => retryDelayMs(3, 1000)));
    assert.ok(spread.size > 1, "jittered");
  });
});
