/**
 * Audience scopes across processes on one PostgreSQL database: which projects a client may name
 * (`urn:platform:iam:org:project:id:<id>:aud`) is cached per process for 2 s (src/oidc/project-audiences.ts).
 * What process A changes — a project granted to another organization, the grant deactivated, the project
 * removed — process B must answer within LAG_MS after A answered (its LISTEN connection hears A's
 * notification), not when its entries expire. Each step first has B cache the old state.
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
} from "./helpers.ts";
import { basic, type MachineClient, machineClient, postForm } from "./oidc.ts";

const skip = process.env.DATABASE_URL ? false : "needs PostgreSQL (DATABASE_URL)";
/** How soon B must answer the new state after A answered the change (the cache expires after 2 s). */
const LAG_MS = 500;
const PROJECTS = "/resources/v3alpha/projects";
const aud = (project: string) => `openid urn:platform:iam:org:project:id:${project}:aud`;

/** Milliseconds until `changed` first answers true, asking again right away; fails after LAG_MS. */
async function lagUntil(what: string, changed: () => Promise<boolean>): Promise<number> {
  const started = performance.now();
  for (;;) {
    const done = await changed();
    const elapsed = performance.now() - started;
    if (done) {
      assert.ok(elapsed <= LAG_MS, `${what}: only after ${Math.round(elapsed)} ms (limit ${LAG_MS} ms)`);
      return elapsed;
    }
    if (elapsed > LAG_MS + 3_000) assert.fail(`${what}: not after ${Math.round(elapsed)} ms`);
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

    assert.equal(await statusAtB(svcB, projectId), 400, "B refuses (and caches the refusal)");
    const grant = await restA("POST", `${PROJECTS}/${projectId}/grants`, {
      json: { granted_org_id: orgB, role_keys: ["reader"] },
    });
    assert.equal(grant.status, 201, grant.text);
    const granted = await lagUntil(
      "B accepts the granted project",
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
    const ungranted = await lagUntil(
      "B refuses after the grant was deactivated",
      async () => (await statusAtB(svcB, projectId)) === 400,
    );

    assert.equal(
      await statusAtB(svcA, projectId),
      200,
      "B accepts the owner organization's client (and caches it)",
    );
    const removed = await restA("DELETE", `${PROJECTS}/${projectId}`);
    assert.equal(removed.status, 200, removed.text);
    const gone = await lagUntil(
      "B refuses the removed project",
      async () => (await statusAtB(svcA, projectId)) === 400,
    );
    t.diagnostic(
      `B followed ${granted.toFixed(1)} / ${ungranted.toFixed(1)} / ${gone.toFixed(1)} ms after A answered`,
    );
  });
});
