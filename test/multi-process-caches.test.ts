/**
 * Several processes on one PostgreSQL database, one truth: what process A changes, process B's caches drop
 * at once (its LISTEN connection hears A's notification, src/eventstore/broadcast.ts), not when their
 * entries expire (2 s for tokens and client lookups, 5 s for the rest). Each test first has B cache the old
 * state, then makes the change through A, then asks B again and again until B answers the new state: that
 * must happen before B's entry could have expired. Also: the login UI's rate limits count across
 * processes, and a process whose LISTEN connection was lost clears its caches when it is back.
 *
 * PostgreSQL only (the embedded database serves one process): skipped without DATABASE_URL. Two Platforms in
 * this test process (separate caches, separate LISTEN connections), and two `platform start` processes for
 * the personal access token.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { decodeProtectedHeader } from "jose";
import pg from "pg";
import {
  addMachineUser,
  freshBackend,
  type RestCall,
  restClient,
  startPlatform,
  type TestBackend,
  type TestPlatform,
  tempDir,
  testTime,
} from "./helpers.ts";
import { addHuman, createAuthRequest, formOf, HttpBrowser } from "./login.ts";
import { basic, type MachineClient, machineClient, postForm } from "./oidc.ts";
import { startProcess } from "./process.ts";

const skip = process.env.DATABASE_URL ? false : "needs PostgreSQL (DATABASE_URL)";
/** How long B keeps entries: tokens, clients and PATs 2 s, memberships, settings, providers and keys 5 s. */
const TOKEN_CACHE_MS = 2_000;
const CACHE_MS = 5_000;
const WEB_KEYS = "/resources/v3alpha/web_keys";
const USERS = "/resources/v3alpha/users";
const MANAGEMENT_SCOPE = "openid urn:platform:iam:org:project:id:platform:aud";

/**
 * Asks B (`changed`) again and again, right away, until it answers the new state, and asserts that it did
 * so before the entry B cached at `cachedAt` (performance.now() before the request that cached it) could
 * have expired, `cacheMs` later: so B dropped the entry on A's notification, not on its expiry. How soon
 * B follows is the benchmarks' business; this gives up after a limit scaled for a loaded machine. Returns
 * when the answering request was sent (it cached the new state) and the entry's age then.
 */
async function followedBeforeExpiry(
  what: string,
  cachedAt: number,
  cacheMs: number,
  changed: () => Promise<boolean>,
): Promise<{ asked: number; age: number }> {
  const giveUp = performance.now() + testTime(cacheMs + 5_000);
  for (;;) {
    const asked = performance.now();
    const done = await changed();
    const answered = performance.now();
    const age = answered - cachedAt;
    if (done) {
      assert.ok(
        age < cacheMs,
        `${what}: only ${Math.round(age)} ms after B cached the old state (kept ${cacheMs} ms)`,
      );
      return { asked, age };
    }
    if (answered > giveUp) assert.fail(`${what}: not after ${Math.round(age)} ms`);
  }
}

describe("caches across processes on one PostgreSQL database", { skip }, () => {
  let backend: TestBackend;
  let a: TestPlatform;
  let b: TestPlatform;
  let owner: string;
  let restA: RestCall;
  let restB: RestCall;
  const env = { PLATFORM_LOGIN_ATTEMPTS_PER_NAME: "4", PLATFORM_LOGIN_ATTEMPTS_PER_IP: "0" };

  before(async () => {
    backend = await freshBackend();
    a = await startPlatform({ listen: true, backend, env });
    b = await startPlatform({ listen: true, backend, env });
    ({ token: owner } = await addMachineUser(a, {
      username: "owner",
      membership: { contextType: "instance", roles: ["IAM_OWNER"] },
    }));
    restA = restClient(a, () => owner);
    restB = restClient(b, () => owner);
  });
  after(async () => {
    await b?.stop();
    await a?.stop();
    await backend?.cleanup();
  });

  /** A machine user with IAM_OWNER (its membership ID too) and a client secret. */
  const member = async (username: string) => {
    const created = await machineClient(a, owner, username);
    const added = await restA("POST", "/resources/v3alpha/memberships", {
      json: { user_id: created.userId, roles: ["IAM_OWNER"] },
    });
    assert.equal(added.status, 201, added.text);
    return { ...created, membershipId: added.json.details.id as string };
  };
  const clientCredentials = async (platform: TestPlatform, client: MachineClient, scope?: string) => {
    const reply = await postForm(
      `${platform.url}/oauth/v2/token`,
      { grant_type: "client_credentials", ...(scope ? { scope } : {}) },
      basic(client.clientId, client.clientSecret),
    );
    assert.equal(reply.status, 200, reply.text);
    return reply.json.access_token as string;
  };

  it("a membership removed through A: B's authorizer refuses at once (cached 5 s before)", async (t) => {
    const robot = await member("member-robot");
    const token = await clientCredentials(a, robot, MANAGEMENT_SCOPE);
    const cached = performance.now();
    assert.equal((await restB("GET", WEB_KEYS, { token })).status, 200, "B caches the membership");
    const removed = await restA("DELETE", `/resources/v3alpha/memberships/${robot.membershipId}`);
    assert.equal(removed.status, 200, removed.text);
    const { age } = await followedBeforeExpiry(
      "B refuses the removed role",
      cached,
      CACHE_MS,
      async () => (await restB("GET", WEB_KEYS, { token })).status === 403,
    );
    t.diagnostic(`B refused ${age.toFixed(1)} ms after caching`);
  });

  it("an access token revoked at A: B's management APIs refuse it at once (cached 2 s before)", async (t) => {
    const robot = await member("revoked-robot");
    const token = await clientCredentials(a, robot, MANAGEMENT_SCOPE);
    const cached = performance.now();
    assert.equal((await restB("GET", WEB_KEYS, { token })).status, 200, "B caches the verified token");
    const revoked = await postForm(
      `${a.url}/oauth/v2/revoke`,
      { token, token_type_hint: "access_token" },
      basic(robot.clientId, robot.clientSecret),
    );
    assert.equal(revoked.status, 200, revoked.text);
    const { age } = await followedBeforeExpiry(
      "B refuses the revoked token",
      cached,
      TOKEN_CACHE_MS,
      async () => (await restB("GET", WEB_KEYS, { token })).status === 401,
    );
    t.diagnostic(`B refused ${age.toFixed(1)} ms after caching`);
  });

  it("a provider deactivated through A: B's login page drops it at once (cached 5 s before)", async (t) => {
    const created = await restA("POST", "/resources/v3alpha/idps/oauth", {
      json: {
        idp: { name: "Shared SSO" },
        config: {
          authorization_endpoint: "https://sso.example.com/authorize",
          token_endpoint: "https://sso.example.com/token",
          user_endpoint: "https://sso.example.com/user",
          client_id: "cid",
          client_secret: "secret",
          scopes: ["profile"],
          id_attribute: "id",
        },
      },
    });
    assert.equal(created.status, 201, created.text);
    const idpId = created.json.details.id as string;
    const offersIt = async () => {
      const page = await new HttpBrowser(b.url).follow("/ui/login/loginname");
      assert.equal(page.status, 200);
      return page.text.includes(`idp=${idpId}`);
    };
    const cached = performance.now();
    assert.ok(await offersIt(), "B's login page offers the provider (and caches the list)");
    const patched = await restA("PATCH", `/resources/v3alpha/idps/oauth/${idpId}`, {
      json: { idp: { state_policy: "STATE_POLICY_DEACTIVATE" } },
    });
    assert.equal(patched.status, 200, patched.text);
    const { age } = await followedBeforeExpiry(
      "B's login page drops the provider",
      cached,
      CACHE_MS,
      async () => !(await offersIt()),
    );
    t.diagnostic(`B dropped it ${age.toFixed(1)} ms after caching`);
  });

  it("the default language changed through A: B's login pages speak it at once (settings cached 5 s before)", async (t) => {
    const pageLanguage = async () => {
      const page = await new HttpBrowser(b.url).follow("/ui/login/loginname");
      assert.equal(page.status, 200);
      return /<html lang="([^"]+)"/.exec(page.text)?.[1];
    };
    const cached = performance.now();
    assert.equal(await pageLanguage(), "en", "B's login page speaks the default (and caches the settings)");
    const patched = await restA("PATCH", "/settings/v3alpha/languages", {
      json: { default_language: { key: "de" } },
    });
    assert.equal(patched.status, 200, patched.text);
    const { age } = await followedBeforeExpiry(
      "B's login page speaks German",
      cached,
      CACHE_MS,
      async () => (await pageLanguage()) === "de",
    );
    t.diagnostic(`B switched ${age.toFixed(1)} ms after caching`);
    await restA("PATCH", "/settings/v3alpha/languages", { json: { default_language: { key: "en" } } });
  });

  it("a web key activated through A: B signs with it at once (keys cached 5 s before)", async (t) => {
    const jwtClient = await machineClient(a, owner, "jwt-robot", { accessTokenType: "JWT" });
    const kidAtB = async () => decodeProtectedHeader(await clientCredentials(b, jwtClient)).kid;
    const before = await kidAtB();
    const created = await restA("POST", WEB_KEYS, { json: { ecdsa: { curve: "ECDSA_CURVE_P256" } } });
    assert.equal(created.status, 201, created.text);
    const kid = created.json.details.id as string;
    const cached = performance.now();
    assert.equal(await kidAtB(), before, "B signs with the active key (and caches the keys)");
    const activated = await restA("POST", `${WEB_KEYS}/${kid}/_activate`);
    assert.equal(activated.status, 200, activated.text);
    const { age } = await followedBeforeExpiry(
      "B signs with the activated key",
      cached,
      CACHE_MS,
      async () => (await kidAtB()) === kid,
    );
    t.diagnostic(`B signed with it ${age.toFixed(1)} ms after caching`);
  });

  it("the login UI's rate limit per login name counts the attempts of both processes", async () => {
    await addHuman(a, "shared-limit", "Secret-Passw0rd!");
    const browserA = new HttpBrowser(a.url);
    const authRequest = await createAuthRequest(a);
    const loginPage = await browserA.follow(`/ui/login?authRequest=${authRequest.id}`);
    const passwordPage = await browserA.submit(loginPage, "/ui/login/loginname", {
      loginName: "shared-limit",
    });
    const form = { ...formOf(passwordPage.text, "/ui/login/password"), password: "Wrong-Passw0rd!" };
    // the same browser (its cookie) at B
    const browserB = new HttpBrowser(b.url);
    for (const [name, value] of browserA.cookies) browserB.cookies.set(name, value);
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++)
      statuses.push((await [browserA, browserB][i % 2].post("/ui/login/password", form)).status);
    // PLATFORM_LOGIN_ATTEMPTS_PER_NAME=4: four wrong passwords are answered (two at each process), the fifth is
    // one too many, wherever it arrives
    assert.deepEqual(statuses, [303, 303, 303, 303, 429]);
  });

  it("a process whose LISTEN connection was cut clears its caches once it listens again", async (t) => {
    const robot = await member("reconnect-robot");
    const token = await clientCredentials(a, robot, MANAGEMENT_SCOPE);
    const cached = performance.now();
    assert.equal((await restB("GET", WEB_KEYS, { token })).status, 200, "B caches the membership");
    const dbName = new URL(backend.env.DATABASE_URL).pathname.slice(1);
    const admin = new pg.Client({ connectionString: process.env.DATABASE_URL });
    await admin.connect();
    try {
      const listening = async () =>
        (
          await admin.query(
            "SELECT pid FROM pg_stat_activity WHERE datname = $1 AND application_name = 'platform listen'",
            [dbName],
          )
        ).rows.map((r) => r.pid as number);
      const cut = await listening();
      assert.equal(cut.length, 2, "A and B listen");
      // ended (waiting until they are gone), so B cannot hear the change below
      for (const pid of cut) await admin.query("SELECT pg_terminate_backend($1, 5000)", [pid]);
      const removed = await restA("DELETE", `/resources/v3alpha/memberships/${robot.membershipId}`);
      assert.equal(removed.status, 200, removed.text);
      // B listens again (after a second), and has missed the notification
      for (
        let i = 0;
        i < testTime(100) && (await listening()).filter((pid) => !cut.includes(pid)).length < 2;
        i++
      )
        await sleep(50);
      const { age } = await followedBeforeExpiry(
        "B refuses the removed role after reconnecting",
        cached,
        CACHE_MS,
        async () => (await restB("GET", WEB_KEYS, { token })).status === 403,
      );
      t.diagnostic(`B refused ${Math.round(age)} ms after caching`);
    } finally {
      await admin.end();
    }
  });
});

describe("two `platform start` processes on one PostgreSQL database", { skip }, () => {
  it("a personal access token removed through A is refused by B at once (cached 2 s before)", async (t) => {
    const backend = await freshBackend();
    const patPath = path.join(tempDir("caches-"), "admin.pat");
    const processA = await startProcess({
      ...backend.env,
      PLATFORM_PORT: "0",
      PLATFORM_FIRSTINSTANCE_PAT_PATH: patPath,
    });
    try {
      const processB = await startProcess({ ...backend.env, PLATFORM_PORT: "0" });
      try {
        const admin = readFileSync(patPath, "utf8").trim();
        const restA = restClient({ url: processA.url }, () => admin);
        const restB = restClient({ url: processB.url }, () => admin);
        const user = await restA("POST", USERS, {
          json: { username: "pat-robot", machine: { name: "PAT robot" } },
        });
        assert.equal(user.status, 201, user.text);
        const userId = user.json.details.id as string;
        const pat = await restA("POST", `${USERS}/${userId}/pats`, { json: {} });
        assert.equal(pat.status, 201, pat.text);
        const token = pat.json.token as string;
        const status = async () => (await restB("GET", "/settings/v3alpha/languages", { token })).status;
        const cached = performance.now();
        assert.equal(await status(), 200, "B accepts the token (and caches it)");
        const removed = await restA("DELETE", `${USERS}/${userId}/pats/${pat.json.pat_id}`);
        assert.equal(removed.status, 200, removed.text);
        const { age } = await followedBeforeExpiry(
          "B refuses the removed token",
          cached,
          TOKEN_CACHE_MS,
          async () => (await status()) === 401,
        );
        t.diagnostic(`B refused ${age.toFixed(1)} ms after caching`);
      } finally {
        await processB.stop();
      }
    } finally {
      await processA.stop();
      await backend.cleanup();
    }
  });
});
