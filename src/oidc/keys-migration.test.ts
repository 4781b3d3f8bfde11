import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { after, describe, it } from "node:test";
import { exportJWK, generateKeyPair } from "jose";
import {
  freshBackend,
  startPlatform,
  TEST_MASTER_KEY,
  type TestBackend,
  type TestPlatform,
  tempDir,
} from "../../test/helpers.ts";
import { loadConfig, resolveMasterKey } from "../config.ts";
import { seal } from "../crypto/masterkey.ts";
import { listMigrations } from "../storage/migrate.ts";
import { openDatabase } from "../storage/open.ts";

/** Keys stored before web keys (migration 0095) keep signing, and become events. */
describe("signing keys of an earlier release", () => {
  let backend: TestBackend;
  let platform: TestPlatform | undefined;
  after(async () => {
    await platform?.stop();
    await backend?.cleanup();
  });

  it("move to the event store with their private keys and keep signing", async () => {
    // an empty database (not the test template, which is migrated already)
    if (process.env.DATABASE_URL) backend = await freshBackend();
    else {
      const dir = tempDir("pglite-");
      backend = {
        env: { PLATFORM_DATA_DIR: dir },
        cleanup: async () => rmSync(dir, { recursive: true, force: true }),
      };
    }
    const config = loadConfig({
      PLATFORM_LOG_LEVEL: "silent",
      ...(backend.env.DATABASE_URL ? { PLATFORM_MASTERKEY: TEST_MASTER_KEY } : {}),
      ...backend.env,
    });
    const instanceId = "100000000000000001";
    const kid = "100000000000000002";
    const expiredKid = "100000000000000003";
    // The database as the release before web keys left it, with a key signing now and an expired one.
    const db = await openDatabase(config);
    const masterKey = resolveMasterKey(config);
    try {
      await db.transaction(async (tx) => {
        await tx.query(
          "CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())",
        );
        for (const m of listMigrations().filter((m) => m.version < 95)) {
          await tx.exec(m.sql);
          await tx.query("INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", [
            m.version,
            m.name,
          ]);
        }
      });
      const { publicKey, privateKey } = await generateKeyPair("RS256", { extractable: true });
      const publicJwk = { ...(await exportJWK(publicKey)), kid, use: "sig", alg: "RS256" };
      const privateJwk = { ...(await exportJWK(privateKey)), kid, alg: "RS256" };
      const now = Date.now();
      for (const [id, from] of [
        [kid, now - 3600_000],
        [expiredKid, now - 40 * 3600_000],
      ] as const) {
        await db.query(
          `INSERT INTO oidc_signing_keys (instance_id, id, alg, public_jwk, private_key, created_at, active_from, active_until, publish_until)
           VALUES ($1, $2, 'RS256', $3, $4, $5, $5, $6, $7)`,
          [
            instanceId,
            id,
            JSON.stringify({ ...publicJwk, kid: id }),
            seal(
              masterKey,
              JSON.stringify({ ...privateJwk, kid: id }),
              `oidc_signing_keys/${instanceId}/${id}`,
            ),
            new Date(from),
            new Date(from + 6 * 3600_000),
            new Date(from + 30 * 3600_000),
          ],
        );
      }
    } finally {
      await db.close();
    }

    platform = await startPlatform({ backend });
    const key = await platform.oidc.keys.active(instanceId);
    assert.equal(key.kid, kid, "the stored key still signs");
    assert.ok(key.privateKey);
    assert.equal(key.alg, "RS256");
    const events = await platform.db.query<{
      aggregate_id: string;
      event_type: string;
      payload: Record<string, unknown>;
    }>(
      "SELECT aggregate_id, event_type, payload FROM events WHERE aggregate_type = 'web_key' AND instance_id = $1",
      [instanceId],
    );
    assert.deepEqual(
      events.map((e) => [e.aggregate_id, e.event_type]),
      [[kid, "web_key.added"]],
      "an event for the published key, none for the expired one",
    );
    assert.doesNotMatch(JSON.stringify(events[0].payload), /"d"/);
    assert.deepEqual(events[0].payload.config, { rsa: { bits: 2048, hasher: "SHA256" } });
    // A rebuild of the read model gives the same key back; its private key stays where it is.
    await platform.eventStore.rebuild("web_keys");
    platform.oidc.keys.invalidate();
    const rebuilt = await platform.oidc.keys.active(instanceId);
    assert.equal(rebuilt.kid, kid);
    assert.equal(rebuilt.activeUntil?.getTime(), key.activeUntil?.getTime());
    assert.ok(rebuilt.privateKey);
    const listed = await platform.oidc.keys.list(instanceId);
    assert.deepEqual(
      listed.map((l) => [l.key.kid, l.state]),
      [[kid, 2]],
    );
  });
});
