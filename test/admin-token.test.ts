// `platform admin-token`: an administrator's personal access token for an installation that already runs,
// through the command line (child processes, as an operator runs it).
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import path from "node:path";
import { after, describe, it } from "node:test";
import {
  eventCount,
  freshBackend,
  startPlatform,
  type TestBackend,
  type TestPlatform,
  tempDir,
} from "./helpers.ts";
import { runPlatform } from "./process.ts";

const onPostgres = Boolean(process.env.DATABASE_URL);

/** The instance's feature flags: only an instance-level role such as IAM_OWNER may read them. */
async function readsFeatures(url: string, token: string): Promise<number> {
  const r = await fetch(`${url}/settings/v3alpha/features`, {
    headers: { authorization: `Bearer ${token}` },
  });
  return r.status;
}

describe("platform admin-token", () => {
  let backend: TestBackend;
  let dir: string;
  let file: string;
  let server: TestPlatform | undefined;
  let instanceId: string;
  /** The server (in this process, as the holder of the embedded database), started when not running. */
  const serving = async () => {
    server ??= await startPlatform({ listen: true, backend });
    return server;
  };
  /** Embedded: the command opens the database itself once the server has stopped. */
  const stopIfEmbedded = async () => {
    if (!onPostgres && server) {
      await server.stop();
      server = undefined;
    }
  };
  after(async () => {
    await server?.stop();
    await backend?.cleanup();
  });

  it("refuses before the first start, and on the embedded database while a server runs without its admin socket", async () => {
    backend = await freshBackend();
    dir = tempDir("admin-token-");
    file = path.join(dir, "admin.pat");
    const empty = await runPlatform(["admin-token", "--out", file], backend.env);
    assert.equal(empty.code, 1);
    assert.match(empty.stderr, /^platform: the database has no instance yet: run `platform start` once/);
    assert.equal(existsSync(file), false);

    // The Quick start: a first start without PLATFORM_FIRSTINSTANCE_PAT_PATH.
    instanceId = (await serving()).bootstrapResult!.instanceId;
    if (!onPostgres) {
      // A running server normally issues the token over <dataDir>/admin.sock
      // (test/admin-token-running.test.ts). Without that socket (a server of an older version) the
      // embedded database belongs to the server alone: one line says what to do, nothing changes.
      const socket = path.join(backend.env.PLATFORM_DATA_DIR, "admin.sock");
      assert.ok(existsSync(socket));
      rmSync(socket);
      const refused = await runPlatform(["admin-token", "--out", file], backend.env);
      assert.equal(refused.code, 1);
      assert.match(
        refused.stderr,
        /^platform: the embedded database in .* is in use by a running server \(pid \d+\): stop it, run this command again, then start it \(it listens on no .*admin\.sock/,
      );
      assert.equal(refused.stderr.trim().split("\n").length, 1);
      assert.equal(existsSync(file), false);
      assert.deepEqual(readdirSync(dir), [], "no draft left behind");
    }
  });

  it("creates admin-client with IAM_OWNER and writes its token to a 0600 file, never replacing one without --force", async () => {
    const eventsBefore = await eventCount(await serving());
    await stopIfEmbedded();
    const made = await runPlatform(["admin-token", "--out", file], backend.env);
    assert.equal(made.code, 0, made.stderr);
    assert.match(
      made.stdout,
      new RegExp(
        `^instance ${instanceId}: created machine user admin-client \\(\\d+\\) with IAM_OWNER$`,
        "m",
      ),
    );
    assert.match(
      made.stdout,
      /^personal access token \d+ of admin-client written to .*admin\.pat \(mode 0600\)$/m,
    );
    assert.equal(statSync(file).mode & 0o777, 0o600);
    const token = readFileSync(file, "utf8").trim();
    assert.match(token, /^[A-Za-z0-9_-]{43}$/);
    assert.doesNotMatch(made.stdout + made.stderr, new RegExp(token), "the token is only in the file");
    assert.deepEqual(readdirSync(dir), ["admin.pat"], "no draft left behind");

    const again = await runPlatform(["admin-token", "--out", file], backend.env);
    assert.equal(again.code, 1);
    assert.match(again.stderr, /^platform: .*admin\.pat exists; choose another file or pass --force/);
    assert.equal(readFileSync(file, "utf8").trim(), token);

    const forced = await runPlatform(["admin-token", "--out", file, "--force"], backend.env);
    assert.equal(forced.code, 0, forced.stderr);
    assert.match(
      forced.stdout,
      /^instance \d+: reused machine user admin-client \(\d+\), which holds IAM_OWNER$/m,
    );
    const second = readFileSync(file, "utf8").trim();
    assert.notEqual(second, token);
    assert.equal(statSync(file).mode & 0o777, 0o600);

    const platform = await serving();
    assert.equal(
      await eventCount(platform),
      eventsBefore + 4,
      "the user, its membership and two tokens are events",
    );
    for (const t of [token, second])
      assert.equal(await readsFeatures(platform.url, t), 200, "an IAM_OWNER's");
  });

  it("without --out it explains what is missing", async () => {
    const result = await runPlatform(["admin-token"], {});
    assert.equal(result.code, 1);
    assert.match(result.stderr, /^platform: admin-token: --out FILE is required/);
  });
});
