/**
 * A PostgreSQL that stops answering without closing its connections (frozen with SIGSTOP) costs a caller
 * a bounded wait, not the length of the freeze: a statement fails after PLATFORM_DATABASE_STATEMENT_TIMEOUT_MS
 * (+1 s) with 503 and Retry-After, a new connection after the pool's 5 s, `/ready` answers 503 within its own
 * 2 s; and once the server goes on, the same process serves again. The test freezes a server of its own
 * (test/own-postgres.ts); it runs with the PostgreSQL suite (DATABASE_URL set).
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import {
  addMachineUser,
  type RestCall,
  rawRequest,
  restClient,
  startPlatform,
  type TestPlatform,
  testTime,
  within,
} from "./helpers.ts";
import { OwnPostgres, postgresBin } from "./own-postgres.ts";

const skip = !process.env.DATABASE_URL
  ? "runs with the PostgreSQL suite (DATABASE_URL)"
  : !postgresBin()
    ? "PostgreSQL binaries not installed"
    : false;

describe("a frozen database (SIGSTOP)", { skip }, () => {
  let server: OwnPostgres;
  let platform: TestPlatform;
  let rest: RestCall;
  let search: () => ReturnType<RestCall>;
  const STATEMENT_TIMEOUT_MS = 2000;

  before(async () => {
    server = await OwnPostgres.create();
    await server.query("CREATE DATABASE platform");
    platform = await startPlatform({
      listen: true,
      env: { PLATFORM_DATABASE_STATEMENT_TIMEOUT_MS: String(STATEMENT_TIMEOUT_MS) },
      backend: { env: { DATABASE_URL: server.url("platform") }, cleanup: async () => {} },
    });
    const owner = await addMachineUser(platform, {
      username: "owner",
      membership: { contextType: "instance", roles: ["IAM_OWNER"] },
    });
    rest = restClient(platform, () => owner.token);
    // a search is no cache's: it reads the database every time (a GET of the user may be cached)
    search = () => rest("POST", "/resources/v3alpha/users/_search", { json: [] });
  });
  after(async () => {
    server?.thaw();
    await platform?.stop();
    await server?.remove();
  });

  it("answers 503 with Retry-After in bounded time, /ready within its bound, and serves again after", async () => {
    // connections of the pool open and idle, so that the freeze meets them as well as new ones
    await Promise.all(Array.from({ length: 4 }, () => search()));
    assert.equal((await search()).status, 200);

    server.freeze();
    try {
      // several at once: some on open connections (the statement's bound), some waiting for new ones.
      // Bounded by the statement's bound or the pool's 5 s connect timeout, while the freeze lasts until
      // the thaw below: a missing bound fails here instead of hanging (the limit scaled for a loaded machine)
      const calls = await within(
        Promise.all(Array.from({ length: 6 }, () => search())),
        testTime(15_000),
        "searches on the frozen database not answered",
      );
      for (const value of calls) {
        assert.equal(value.status, 503, value.text);
        assert.equal(value.headers["retry-after"], "5");
        assert.deepEqual(value.json, { code: 14, message: "database unavailable", details: [] });
      }
      const ready = await within(rawRequest(`${platform.url}/ready`), testTime(6_000), "/ready not answered");
      assert.equal(ready.status, 503);
      assert.match(ready.body, /database not answering|database unreachable/);
    } finally {
      server.thaw();
    }

    let status = 0;
    for (let i = 0; i < testTime(50) && status !== 200; i++) {
      status = (await search()).status;
      if (status !== 200) await sleep(200);
    }
    assert.equal(status, 200);
    assert.equal((await rawRequest(`${platform.url}/ready`)).status, 200);
  });
});
