import assert from "node:assert/strict";
import { existsSync, statSync } from "node:fs";
import { after, before, describe, it } from "node:test";
import { createLocalJWKSet, decodeProtectedHeader, type JSONWebKeySet, jwtVerify } from "jose";
import {
  freshBackend,
  startPlatform,
  type TestBackend,
  type TestPlatform,
  testTime,
  testTimeScale,
} from "../../test/helpers.ts";
import { basic, type MachineClient, machineClient, ownerToken, postForm } from "../../test/oidc.ts";
import { runPlatform } from "../../test/process.ts";
import { ConfigError, loadConfig, resolveMasterKey } from "../config.ts";
import { masterKeyFile, unseal } from "../crypto/masterkey.ts";
import { EventStore } from "../eventstore/eventstore.ts";
import { createPlatform } from "../platform.ts";
import { projections } from "../query/projections/index.ts";
import { SigningKeys } from "./keys.ts";

describe("OIDC signing keys", () => {
  let backend: TestBackend;
  let platform: TestPlatform | undefined;
  let owner: string;
  let jwtClient: MachineClient;
  let instanceId: string;

  const jwks = async (): Promise<JSONWebKeySet> => {
    const r = await fetch(`${platform!.url}/oauth/v2/keys`);
    assert.equal(r.status, 200);
    return (await r.json()) as JSONWebKeySet;
  };
  const jwtAccessToken = async () => {
    const r = await postForm(
      `${platform!.url}/oauth/v2/token`,
      { grant_type: "client_credentials", scope: "openid" },
      basic(jwtClient.clientId, jwtClient.clientSecret),
    );
    assert.equal(r.status, 200, r.text);
    return r.json.access_token as string;
  };
  const verifies = async (token: string) =>
    (await jwtVerify(token, createLocalJWKSet(await jwks()), { issuer: platform!.url })).protectedHeader.kid;

  before(async () => {
    backend = await freshBackend();
    platform = await startPlatform({ listen: true, backend });
    owner = await ownerToken(platform);
    jwtClient = await machineClient(platform, owner, "svc-jwt", { accessTokenType: "JWT" });
    instanceId = platform.bootstrapResult!.instanceId;
  });
  after(async () => {
    await platform?.stop();
    await backend?.cleanup();
  });

  it("the JWKS publishes kid, use, alg and the public parts only, cacheable for a few minutes", async () => {
    const r = await fetch(`${platform!.url}/oauth/v2/keys`);
    assert.match(r.headers.get("cache-control") ?? "", /^public, max-age=300$/);
    const set = (await r.json()) as JSONWebKeySet;
    assert.equal(set.keys.length, 1);
    assert.deepEqual(Object.keys(set.keys[0]).sort(), ["alg", "e", "kid", "kty", "n", "use"]);
    assert.equal(set.keys[0].use, "sig");
    assert.equal(set.keys[0].alg, "RS256");
  });

  it("private keys are sealed with the master key at rest (AES-256-GCM), bound to their row", async () => {
    const rows = await platform!.db.query<{ id: string; private_key: string }>(
      "SELECT id, private_key FROM oidc_signing_key_secrets WHERE instance_id = $1",
      [instanceId],
    );
    assert.ok(rows.length >= 1);
    const masterKey = resolveMasterKey(platform!.config);
    for (const row of rows) {
      assert.ok(row.private_key.startsWith("v1."));
      assert.doesNotMatch(row.private_key, /"d"|"kty"/, "no JWK in the clear");
      const jwk = JSON.parse(unseal(masterKey, row.private_key, `oidc_signing_keys/${instanceId}/${row.id}`));
      assert.equal(jwk.kid, row.id);
      assert.ok(jwk.d, "the private part is inside");
      assert.throws(() =>
        unseal(Buffer.alloc(32, 7), row.private_key, `oidc_signing_keys/${instanceId}/${row.id}`),
      );
      assert.throws(() => unseal(masterKey, row.private_key, `oidc_signing_keys/other/${row.id}`));
    }
  });

  it("rotation on demand: tokens signed before still verify against the JWKS; new tokens use the new kid", async () => {
    const before = await jwtAccessToken();
    const oldKid = decodeProtectedHeader(before).kid;
    const rotated = await platform!.oidc.keys.rotate(instanceId);
    assert.notEqual(rotated.kid, oldKid);
    const afterRotation = await jwtAccessToken();
    assert.equal(decodeProtectedHeader(afterRotation).kid, rotated.kid);
    assert.equal(await verifies(before), oldKid, "the old key is still published");
    assert.equal(await verifies(afterRotation), rotated.kid);
    const kids = (await jwks()).keys.map((k) => k.kid);
    assert.deepEqual(kids, [rotated.kid, oldKid], "newest first");
    // Both tokens are still active.
    for (const token of [before, afterRotation]) {
      const r = await postForm(
        `${platform!.url}/oauth/v2/introspect`,
        { token },
        basic(jwtClient.clientId, jwtClient.clientSecret),
      );
      assert.equal(r.json.active, true);
    }
  });

  it("automatic rotation: the next key is published before it signs, and processes sharing the database agree", async () => {
    const masterKey = resolveMasterKey(platform!.config);
    // Windows of a few seconds (scaled for a loaded machine): generating an RSA key takes up to a second
    // on a busy machine.
    const k = testTimeScale();
    const ms = (n: number) => Math.round(n * k);
    const policy = {
      signForMs: ms(6000),
      publishAfterMs: ms(20_000),
      prepublishMs: ms(3000),
      cacheMs: 100,
    };
    const margin = ms(2500);
    // Two key stores on one database stand for two processes.
    const a = new SigningKeys(platform!.db, masterKey, new EventStore(platform!.db, projections), policy);
    const b = new SigningKeys(platform!.db, masterKey, new EventStore(platform!.db, projections), policy);
    const instance = `rotation-test-${Date.now()}`;
    const [ka, kb] = await Promise.all([a.active(instance), b.active(instance)]);
    assert.equal(ka.kid, kb.kid, "both use the one key the database holds");
    const count = async () =>
      Number(
        (
          await platform!.db.query<{ n: number }>(
            "SELECT count(*)::int AS n FROM oidc_signing_keys WHERE instance_id = $1",
            [instance],
          )
        )[0].n,
      );
    assert.equal(await count(), 1, "created once");

    // Within the last seconds of its window the successor is created and published, but not used yet.
    await sleep(ka.activeUntil!.getTime() - Date.now() - margin);
    const published = JSON.parse((await a.jwks(instance)).toString()).keys.map((k: { kid: string }) => k.kid);
    assert.equal(published.length, 2);
    assert.equal((await a.active(instance)).kid, ka.kid);
    assert.equal((await b.active(instance)).kid, ka.kid);
    const next = published.find((kid: string) => kid !== ka.kid);
    assert.equal(await count(), 2);

    // Once the first key's window ends, both sign with the successor; the first stays published.
    await sleep(ka.activeUntil!.getTime() - Date.now() + 50);
    assert.equal((await a.active(instance)).kid, next);
    assert.equal((await b.active(instance)).kid, next);
    assert.ok(
      JSON.parse((await b.jwks(instance)).toString()).keys.some((k: { kid: string }) => k.kid === ka.kid),
    );
    for (const table of ["oidc_signing_keys", "oidc_signing_key_secrets"])
      await platform!.db.query(`DELETE FROM ${table} WHERE instance_id = $1`, [instance]);
  });

  it("automatic successors keep the configuration of the key an administrator activated", async () => {
    const masterKey = resolveMasterKey(platform!.config);
    // Windows of seconds, with margins for a busy machine (scaled for a loaded one).
    const k = testTimeScale();
    const ms = (n: number) => Math.round(n * k);
    const policy = {
      signForMs: ms(10_000),
      publishAfterMs: ms(30_000),
      prepublishMs: ms(8000),
      cacheMs: 100,
    };
    const keys = new SigningKeys(platform!.db, masterKey, new EventStore(platform!.db, projections), policy);
    const instance = `successor-test-${Date.now()}`;
    const first = await keys.active(instance);
    assert.equal(first.alg, "RS256", "an instance starts with RS256");
    const { id } = await keys.create(instance, { ecdsa: { curve: "P256" } }, "test");
    await keys.activate(instance, id, "test");
    const activated = await keys.active(instance);
    assert.equal(activated.kid, id);
    // In the last seconds of its window its successor is published, of the same configuration.
    await sleep(activated.activeUntil!.getTime() - Date.now() - ms(5000));
    await keys.active(instance);
    const listed = await keys.list(instance);
    const successor = listed.find((l) => l.key.activeFrom?.getTime() === activated.activeUntil!.getTime());
    assert.ok(successor, JSON.stringify(listed.map((l) => [l.key.kid, l.state])));
    assert.equal(successor.key.alg, "ES256");
    assert.deepEqual(successor.key.config, { ecdsa: { curve: "P256" } });
    assert.equal(successor.state, 1, "INITIAL until its window starts");
    await sleep(activated.activeUntil!.getTime() - Date.now() + 50);
    assert.equal((await keys.active(instance)).kid, successor.key.kid);
    // Once a key's publication ends the sweep erases its private key and its row (not the newest one's).
    await platform!.db.query(
      "UPDATE oidc_signing_keys SET publish_until = now() - interval '1 second' WHERE instance_id = $1 AND id IN ($2, $3)",
      [instance, first.kid, successor.key.kid],
    );
    await platform!.oidc.tokens.sweep();
    const ids = async (table: string) =>
      (await platform!.db.query<{ id: string }>(`SELECT id FROM ${table} WHERE instance_id = $1`, [instance]))
        .map((r) => r.id)
        .sort();
    assert.deepEqual(await ids("oidc_signing_key_secrets"), [id].sort());
    assert.deepEqual(await ids("oidc_signing_keys"), [id, successor.key.kid].sort());
    for (const table of ["oidc_signing_keys", "oidc_signing_key_secrets"])
      await platform!.db.query(`DELETE FROM ${table} WHERE instance_id = $1`, [instance]);
  });

  it("the master key: generated into the data directory (0600) when embedded; a different key refuses to start", async () => {
    const dataDir = backend.env.PLATFORM_DATA_DIR;
    if (dataDir) {
      const file = masterKeyFile(dataDir);
      assert.ok(existsSync(file));
      assert.equal(statSync(file).mode & 0o777, 0o600);
    }
    await platform!.stop();
    platform = undefined;
    await assert.rejects(
      startPlatform({ backend, env: { PLATFORM_MASTERKEY: "f".repeat(64) } }),
      /^Error: PLATFORM_MASTERKEY: does not decrypt the stored OIDC signing keys/,
    );
  });

  it("platform keys rotate while the embedded server runs: one line pointing to the web keys API", {
    skip: Boolean(process.env.DATABASE_URL) && "embedded database only",
  }, async () => {
    platform = await startPlatform({ listen: true, backend });
    const refused = await runPlatform(["keys", "rotate"], backend.env);
    assert.equal(refused.code, 1);
    assert.match(
      refused.stderr,
      /^platform: the embedded database in .* is in use by a running server \(pid \d+\): rotate through its web keys API instead \(POST \/resources\/v3alpha\/web_keys, then POST \/resources\/v3alpha\/web_keys\/\{id\}\/_activate; docs\/oidc\.md\), or stop it first\n$/,
    );
    await platform.stop();
    platform = undefined;
  });

  it("platform keys rotate [--instance ID] rotates from the command line (on PostgreSQL while the server runs)", async () => {
    const onPostgres = Boolean(process.env.DATABASE_URL);
    platform = await startPlatform({ listen: true, backend });
    const kidsBefore = (await jwks()).keys.map((k) => k.kid);
    if (!onPostgres) {
      await platform.stop();
      platform = undefined;
    }
    const unknown = await runPlatform(["keys", "rotate", "--instance", "424242"], backend.env);
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /no instance 424242/);
    const rotated = await runPlatform(["keys", "rotate", "--instance", instanceId], backend.env);
    assert.equal(rotated.code, 0, rotated.stderr);
    const kid = new RegExp(`^instance ${instanceId}: signing with key (\\d+)$`, "m").exec(
      rotated.stdout,
    )?.[1];
    assert.ok(kid, rotated.stdout);

    platform ??= await startPlatform({ listen: true, backend });
    // A running server sees the new key within its cache's 5 s (the bound scaled for a loaded machine).
    const started = Date.now();
    const bound = testTime(5_500);
    while (decodeProtectedHeader(await jwtAccessToken()).kid !== kid) {
      assert.ok(Date.now() - started < bound, "the running server signs with the rotated key within 5 s");
      await sleep(200);
    }
    const kids = (await jwks()).keys.map((k) => k.kid);
    assert.deepEqual(kids, [kid, ...kidsBefore]);
  });

  it("PostgreSQL without PLATFORM_MASTERKEY: one start-up error naming the variable", async () => {
    const config = loadConfig({
      DATABASE_URL: "postgres://127.0.0.1:1/unused",
      PLATFORM_LOG_LEVEL: "silent",
    });
    await assert.rejects(
      createPlatform(config),
      (error) =>
        error instanceof ConfigError &&
        error.variable === "PLATFORM_MASTERKEY" &&
        /required with DATABASE_URL/.test(error.message),
    );
    const cli = await runPlatform(["start"], {
      DATABASE_URL: "postgres://127.0.0.1:1/unused",
      PLATFORM_MASTERKEY: "",
    });
    assert.equal(cli.code, 1);
    assert.match(cli.stderr, /^platform: PLATFORM_MASTERKEY: is required with DATABASE_URL/);
    assert.equal(cli.stderr.trim().split("\n").length, 1);
  });
});

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));
}
