/**
 * Audience scopes across processes on one PostgreSQL database: which projects a client may name
 * (`urn:platform:iam:org:project:id:<id>:aud`) is cached per process for 2 s (src/oidc/project-audiences.ts).
 * What process A changes — a project granted to another organization, the grant deactivated, the project
 * removed — process B must answer before the entry it cached could have expired (its LISTEN connection
 * hears A's notification), not when it expires. Each step first has B cache the old state.
 *
 * PostgreSQL only (the embedded database serves one process): skipped without DATABASE_URL. Two Platforms in
 * this test process, each with its own caches and LISTEN connection.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import {
  addMachineUser,
  addOrg,
  freshBackend,
  type RestCall,
  restClient,
  startPlatform,
  type TestBackend,
  type TestPlatform,
  testTime,
} from "./helpers.ts";
import { basic, type MachineClient, machineClient, postForm } from "./oidc.ts";

const skip = process.env.DATABASE_URL ? false : "needs PostgreSQL (DATABASE_URL)";
/** How long B keeps an entry (AUDIENCE_CACHE_MS): B must answer the new state before it could have expired. */
const CACHE_MS = 2_000;
const PROJECTS = "/resources/v3alpha/projects";
const aud = (project: string) => `openid urn:platform:iam:org:project:id:${project}:aud`;

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

describe("audience scopes across processes on one PostgreSQL database", { skip }, () => {
  let backend: TestBackend;
  let a: TestPlatform;
  let b: TestPlatform;
  let restA: RestCall;
  let owner: string;
  let orgB: string;
  let svcA: MachineClient; // of the projects' organization
  let svcB: MachineClient; // of organization B

  before(async () => {
    backend = await freshBackend();
    a = await startPlatform({ listen: true, backend });
    b = await startPlatform({ listen: true, backend });
    ({ token: owner } = await addMachineUser(a, {
      username: "owner",
      membership: { contextType: "instance", roles: ["IAM_OWNER"] },
    }));
    restA = restClient(a, () => owner);
    orgB = await addOrg(a, "Org B");
    svcA = await machineClient(a, owner, "svc-a");
    const created = await restA("POST", `/resources/v3alpha/users?ctx.org_id=${orgB}`, {
      json: { username: "svc-b", machine: { name: "svc-b" } },
    });
    assert.equal(created.status, 201, created.text);
    const userId = created.json.details.id as string;
    const secret = await restA("POST", `/resources/v3alpha/users/${userId}/_generate_secret`, { json: {} });
    assert.equal(secret.status, 200, secret.text);
    svcB = { userId, clientId: secret.json.client_id, clientSecret: secret.json.client_secret };
  });
  after(async () => {
    await b?.stop();
    await a?.stop();
    await backend?.cleanup();
  });

  /** B's answer to a client_credentials request for the project's audience: 200 or 400 (invalid_scope). */
  const statusAtB = async (client: MachineClient, project: string) => {
    const reply = await postForm(
      `${b.url}/oauth/v2/token`,
      { grant_type: "client_credentials", scope: aud(project) },
      basic(client.clientId, client.clientSecret),
    );
    if (reply.status !== 200) assert.equal(reply.json.error, "invalid_scope", reply.text);
    return reply.status;
  };

  it("a project granted, ungranted and removed through A: B follows at once (cached 2 s before)", async (t) => {
    const project = await restA("POST", PROJECTS, { json: { name: "Shared API" } });
    assert.equal(project.status, 201, project.text);
    const projectId = project.json.details.id as string;
    const role = await restA("POST", `${PROJECTS}/${projectId}/roles`, {
      json: { key: "reader", display_name: "Reader" },
    });
    assert.equal(role.status, 201, role.text);

    const refusalCached = performance.now();
    assert.equal(await statusAtB(svcB, projectId), 400, "B refuses (and caches the refusal)");
    const grant = await restA("POST", `${PROJECTS}/${projectId}/grants`, {
      json: { granted_org_id: orgB, role_keys: ["reader"] },
    });
    assert.equal(grant.status, 201, grant.text);
    const granted = await followedBeforeExpiry(
      "B accepts the granted project",
      refusalCached,
      CACHE_MS,
      async () => (await statusAtB(svcB, projectId)) === 200,
    );

    const deactivated = await restA(
      "POST",
      `${PROJECTS}/${projectId}/grants/${grant.json.details.id}/_deactivate`,
      {
        json: {},
      },
    );
    assert.equal(deactivated.status, 200, deactivated.text);
    const ungranted = await followedBeforeExpiry(
      "B refuses after the grant was deactivated",
      granted.asked,
      CACHE_MS,
      async () => (await statusAtB(svcB, projectId)) === 400,
    );

    const ownerCached = performance.now();
    assert.equal(
      await statusAtB(svcA, projectId),
      200,
      "B accepts the owner organization's client (and caches it)",
    );
    const removed = await restA("DELETE", `${PROJECTS}/${projectId}`);
    assert.equal(removed.status, 200, removed.text);
    const gone = await followedBeforeExpiry(
      "B refuses the removed project",
      ownerCached,
      CACHE_MS,
      async () => (await statusAtB(svcA, projectId)) === 400,
    );
    t.diagnostic(
      `B followed ${granted.age.toFixed(1)} / ${ungranted.age.toFixed(1)} / ${gone.age.toFixed(1)} ms after caching`,
    );
  });
});
