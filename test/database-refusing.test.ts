/**
 * A PostgreSQL that refuses connections to the database (SQLSTATE 55000 "database … is not currently
 * accepting connections", as during `ALTER DATABASE … ALLOW_CONNECTIONS false` or a drop and restore) is an
 * outage like a closed port: 503 code 14 with Retry-After at the APIs, `temporarily_unavailable` (503) at the
 * token endpoint, and service again once it accepts connections, without a restart. PostgreSQL only.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import pg from "pg";
import { addMachineUser, freshBackend, restClient, startPlatform } from "./helpers.ts";

describe("database refusing connections (55000)", () => {
  it("answers 503 with Retry-After at the APIs and temporarily_unavailable at the token endpoint", {
    skip: process.env.DATABASE_URL ? false : "needs PostgreSQL (DATABASE_URL)",
  }, async () => {
    const backend = await freshBackend();
    const database = new URL(backend.env.DATABASE_URL).pathname.slice(1);
    const platform = await startPlatform({ listen: true, backend });
    const admin = new pg.Client({ connectionString: process.env.DATABASE_URL });
    await admin.connect();
    const accept = (allowed: boolean) =>
      admin.query(`ALTER DATABASE ${database} WITH ALLOW_CONNECTIONS ${allowed}`);
    try {
      const { userId, token } = await addMachineUser(platform, {
        username: "owner",
        membership: { contextType: "instance", roles: ["IAM_OWNER"] },
      });
      const rest = restClient(platform, () => token);
      const secret = await rest("POST", `/resources/v3alpha/users/${userId}/_generate_secret`, { json: {} });
      assert.equal(secret.status, 200, secret.text);
      const basic = Buffer.from(`${secret.json.client_id}:${secret.json.client_secret}`).toString("base64");
      const tokenRequest = () =>
        fetch(`${platform.url}/oauth/v2/token`, {
          method: "POST",
          headers: { "content-type": "application/x-www-form-urlencoded", authorization: `Basic ${basic}` },
          body: "grant_type=client_credentials",
        });
      const user = `/resources/v3alpha/users/${userId}`;
      assert.equal((await rest("GET", user)).status, 200);
      assert.equal((await tokenRequest()).status, 200);

      await accept(false);
      // every open connection of the server ends; its reconnects are refused with 55000
      await admin.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", [
        database,
      ]);
      const refused = await new pg.Client({ connectionString: backend.env.DATABASE_URL }).connect().then(
        () => assert.fail("connected"),
        (error) => error,
      );
      assert.equal(refused.code, "55000", String(refused));

      const reply = await rest("GET", user);
      assert.equal(reply.status, 503, reply.text);
      assert.deepEqual(reply.json, { code: 14, message: "database unavailable", details: [] });
      assert.equal(reply.headers["retry-after"], "5");
      const tokenReply = await tokenRequest();
      assert.equal(tokenReply.status, 503);
      assert.equal(tokenReply.headers.get("retry-after"), "5");
      assert.equal(((await tokenReply.json()) as { error: string }).error, "temporarily_unavailable");

      await accept(true);
      assert.equal((await rest("GET", user)).status, 200);
      assert.equal((await tokenRequest()).status, 200);
    } finally {
      await accept(true).catch(() => {});
      await admin.end();
      await platform.stop();
      await backend.cleanup();
    }
  });
});
