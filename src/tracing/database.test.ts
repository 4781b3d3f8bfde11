import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { summarize } from "./database.ts";

describe("database span names", () => {
  it("are the operation and the first table, never values", () => {
    const cases: Array<[string, string]> = [
      ["SELECT id, name FROM users WHERE instance_id = $1", "SELECT users"],
      ["  select * from public.events e JOIN orgs o ON o.id = e.x", "SELECT public.events"],
      ["INSERT INTO oidc_access_tokens (id) SELECT unnest($1::text[])", "INSERT oidc_access_tokens"],
      ['UPDATE "execution_deliveries" SET attempts = attempts + 1', "UPDATE execution_deliveries"],
      ["DELETE FROM idempotency_keys WHERE expires_at < now()", "DELETE idempotency_keys"],
      ["WITH due AS (SELECT id FROM execution_deliveries) UPDATE x SET y = 1", "UPDATE x"],
      [
        "WITH claimed AS (INSERT INTO unique_constraints (a) VALUES ($1) RETURNING a) INSERT INTO events (b) VALUES ((SELECT 1 FROM t)) RETURNING b",
        "INSERT events",
      ],
      ["WITH RECURSIVE r (n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT n FROM r", "SELECT r"],
      ["-- a comment\nSELECT 1", "SELECT"],
      ["SELECT pg_advisory_xact_lock(42)", "SELECT"],
      ["SELECT 'FROM secret' AS x", "SELECT"],
      ["SELECT $x$ FROM secret $x$, $1 /* FROM y */", "SELECT"],
      ["SELECT 'it''s FROM x' FROM t", "SELECT t"],
      ["", "SQL"],
    ];
    for (const [sql, name] of cases) assert.equal(summarize(sql).name, name, sql);
  });
});
