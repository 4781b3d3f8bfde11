// `platform admin-token` on an installation whose first start made `admin-client`
// (PLATFORM_FIRSTINSTANCE_PAT_PATH): --user, --out -, and IAM_OWNER given back to an admin-client that lost it.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import path from "node:path";
import { after, describe, it } from "node:test";
import { freshBackend, startPlatform, type TestBackend, type TestPlatform, tempDir } from "./helpers.ts";
import { runPlatform } from "./process.ts";

const onPostgres = Boolean(process.env.DATABASE_URL);

/** The instance's feature flags: only an instance-level role such as IAM_OWNER may read them. */
async function readsFeatures(url: string, token: string): Promise<number> {
  const r = await fetch(`${url}/settings/v3alpha/features`, {
    headers: { authorization: `Bearer ${token}` },
  });
  return r.status;
}

describe("platform admin-token for existing machine users", () => {
  const dir = tempDir("admin-token-");
  const firstPat = path.join(dir, "first.pat");
  let backend: TestBackend;
  let server: TestPlatform | undefined;
  const serving = async () => {
    server ??= await startPlatform({
      listen: true,
      backend,
      env: { PLATFORM_FIRSTINSTANCE_PAT_PATH: firstPat },
    });
    return server;
  };
  after(async () => {
    await server?.stop();
    await backend?.cleanup();
  });

  it("--user adds a token to an existing machine user without changing its roles; without --user admin-client gets IAM_OWNER back", async () => {
    backend = await freshBackend();
    const platform = await serving();
    const instanceId = platform.bootstrapResult!.instanceId;
    const first = readFileSync(firstPat, "utf8").trim();
    // admin-client's membership removed through the API: its token can no longer read the instance's flags.
    const membership = (
      await platform.db.query<{ id: string }>(
        "SELECT m.id FROM memberships m JOIN users u ON u.instance_id = m.instance_id AND u.id = m.user_id WHERE m.instance_id = $1 AND u.username = 'admin-client'",
        [instanceId],
      )
    )[0].id;
    const removed = await fetch(`${platform.url}/resources/v3alpha/memberships/${membership}`, {
      method: "DELETE",
      headers: { authorization: `Bearer ${first}` },
    });
    assert.equal(removed.status, 200);
    assert.equal(await readsFeatures(platform.url, first), 403);
    if (!onPostgres) {
      await platform.stop();
      server = undefined;
    }

    const human = await runPlatform(["admin-token", "--out", "-", "--user", "admin"], backend.env);
    assert.equal(human.code, 1);
    assert.match(human.stderr, /^platform: admin is a human user/);
    const unknown = await runPlatform(["admin-token", "--out", "-", "--user", "nobody"], backend.env);
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, new RegExp(`^platform: no user nobody in instance ${instanceId}`));

    const toStdout = await runPlatform(
      ["admin-token", "--out", "-", "--user", "admin-client", "--instance", instanceId],
      backend.env,
    );
    assert.equal(toStdout.code, 0, toStdout.stderr);
    const withoutRoles = toStdout.stdout.trim();
    assert.match(withoutRoles, /^[A-Za-z0-9_-]{43}$/, "standard output holds the token alone");
    assert.match(toStdout.stderr, /admin-client keeps its roles \(none/);
    assert.match(toStdout.stderr, /written to standard output/);

    const out = path.join(dir, "admin.pat");
    const regained = await runPlatform(["admin-token", "--out", out], backend.env);
    assert.equal(regained.code, 0, regained.stderr);
    assert.match(regained.stdout, /reused machine user admin-client \(\d+\) and gave it IAM_OWNER/);

    const url = (await serving()).url;
    assert.equal(await readsFeatures(url, readFileSync(out, "utf8").trim()), 200);
    assert.equal(await readsFeatures(url, first), 200, "the same user: its role is back");
    assert.equal(await readsFeatures(url, withoutRoles), 200);
  });
});
