/**
 * ListMyPermissions (`GET /resources/v3alpha/memberships/me/permissions`): what the caller may do in a
 * context, as the permission checks of every other RPC decide it, for every kind of caller (a machine
 * user's PAT, a human's OIDC access token, a system user's JWT), over REST, gRPC and Connect.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { exportSPKI, generateKeyPair, SignJWT } from "jose";
import { authorizePath, responseParams, signInThroughUi } from "../../../test/authorize.ts";
import {
  addMachineUser,
  addOrg,
  grpcCall,
  type Json,
  restClient,
  startPlatform,
  type TestPlatform,
} from "../../../test/helpers.ts";
import { HttpBrowser } from "../../../test/login.ts";
import { client, discover } from "../../../test/oidc.ts";
import { rolePermissions } from "../../auth/permissions.ts";
import { PlatformMemberships } from "../../gen/platform/resources/membership/v3alpha/membership_service_pb.ts";
import { newId } from "../../id.ts";

const MINE = "/resources/v3alpha/memberships/me/permissions";
const CALLBACK = "https://console.example/callback";
const API_SCOPE = "openid urn:platform:iam:org:project:id:platform:aud";
const PASSWORD = "Correct-Horse-1!";
const sorted = (list: readonly string[]) => [...list].sort();

describe("memberships: ListMyPermissions", () => {
  let platform: TestPlatform;
  let owner: string; // IAM_OWNER PAT
  let ownerId: string;
  let instanceId: string;
  let orgA: string;
  let orgB: string;
  let projectA: string; // a project of org A
  let config: client.Configuration;
  let privateKey: CryptoKey;
  const rest = restClient(
    () => platform,
    () => owner,
  );

  before(async () => {
    const keys = await generateKeyPair("RS256");
    privateKey = keys.privateKey as CryptoKey;
    platform = await startPlatform({
      listen: true,
      env: { PLATFORM_SYSTEM_API_USERS: JSON.stringify({ "ops-robot": await exportSPKI(keys.publicKey) }) },
    });
    instanceId = platform.bootstrapResult!.instanceId;
    ({ token: owner, userId: ownerId } = await addMachineUser(platform, {
      username: "owner",
      membership: { contextType: "instance", roles: ["IAM_OWNER"] },
    }));
    orgA = await addOrg(platform, "Mine A");
    orgB = await addOrg(platform, "Mine B");
    const project = await rest("POST", `/resources/v3alpha/projects?ctx.org_id=${orgA}`, {
      json: { name: "mine" },
    });
    assert.equal(project.status, 201, project.text);
    projectA = project.json.details.id;
    const app = await rest("POST", `/resources/v3alpha/projects/${projectA}/apps`, {
      json: {
        name: "console",
        oidc: {
          redirect_uris: [CALLBACK],
          response_types: ["OIDC_RESPONSE_TYPE_CODE"],
          grant_types: ["OIDC_GRANT_TYPE_AUTHORIZATION_CODE"],
          app_type: "OIDC_APP_TYPE_WEB",
          auth_method: "OIDC_AUTH_METHOD_TYPE_BASIC",
        },
      },
    });
    assert.equal(app.status, 201, app.text);
    config = await discover(
      platform.url,
      app.json.client_id,
      client.ClientSecretBasic(app.json.client_secret),
    );
  });
  after(() => platform?.stop());

  /** A human of `orgId` made through the users API, signed in through the login UI: its access token. */
  async function human(username: string, orgId: string) {
    const created = await rest("POST", `/resources/v3alpha/users?ctx.org_id=${orgId}`, {
      json: {
        username,
        human: {
          profile: { given_name: "Org", family_name: "Owner" },
          email: { address: `${username}@example.com`, is_verified: true },
          password: { password: PASSWORD, change_required: false },
        },
      },
    });
    assert.equal(created.status, 201, created.text);
    const verifier = client.randomPKCECodeVerifier();
    const state = client.randomState();
    const path = authorizePath({
      client_id: config.clientMetadata().client_id,
      redirect_uri: CALLBACK,
      response_type: "code",
      scope: API_SCOPE,
      state,
      code_challenge: await client.calculatePKCECodeChallenge(verifier),
      code_challenge_method: "S256",
    });
    const answer = await signInThroughUi(new HttpBrowser(platform.url), path, username, PASSWORD);
    const tokens = await client.authorizationCodeGrant(config, responseParams(answer).url, {
      pkceCodeVerifier: verifier,
      expectedState: state,
    });
    return { userId: created.json.details.id as string, token: tokens.access_token };
  }

  /** A membership made through the API by the IAM_OWNER. */
  async function addMembership(userId: string, query: string, roles: string[], projectId?: string) {
    const created = await rest("POST", `/resources/v3alpha/memberships${query}`, {
      json: { user_id: userId, roles, ...(projectId ? { project_id: projectId } : {}) },
    });
    assert.equal(created.status, 201, created.text);
  }

  /** The answer for `token` with these query parameters (200 asserted). */
  async function mine(token: string, query = ""): Promise<Json> {
    const reply = await rest("GET", `${MINE}${query}`, { token });
    assert.equal(reply.status, 200, reply.text);
    return reply.json;
  }

  /** A JWT of the system user ops-robot (PLATFORM_SYSTEM_API_USERS). */
  async function systemToken(): Promise<string> {
    const now = Math.floor(Date.now() / 1000);
    return new SignJWT({ iss: "ops-robot", sub: "ops-robot", aud: platform.url })
      .setProtectedHeader({ alg: "RS256" })
      .setIssuedAt(now)
      .setExpirationTime(now + 300)
      .sign(privateKey);
  }

  const instanceContext = () => ({ type: "MEMBERSHIP_CONTEXT_TYPE_INSTANCE", id: instanceId });
  const orgContext = (id: string) => ({ type: "MEMBERSHIP_CONTEXT_TYPE_ORG", id });
  const projectContext = (id: string) => ({ type: "MEMBERSHIP_CONTEXT_TYPE_PROJECT", id });

  it("an IAM_OWNER holds the IAM_OWNER permissions in the instance and in every organization", async () => {
    const expected = sorted(rolePermissions.IAM_OWNER);
    assert.ok(expected.includes("org.write") && expected.includes("instance.write"));
    for (const query of [
      "",
      `?ctx.instance_id=${instanceId}`,
      `?ctx.org_id=${orgA}`,
      `?ctx.org_id=${orgB}`,
    ]) {
      const answer = await mine(owner, query);
      assert.deepEqual(answer.permissions, expected, query);
      assert.deepEqual(answer.roles, [{ role: "IAM_OWNER", context: instanceContext() }], query);
      assert.deepEqual(answer.memberships, [{ context: instanceContext(), roles: ["IAM_OWNER"] }]);
      assert.equal(answer.system_user, false);
      assert.equal(answer.user_id, ownerId);
      assert.equal(answer.org_id, platform.bootstrapResult!.orgId);
    }
    const inProject = await mine(owner, `?project_id=${projectA}`);
    assert.deepEqual(inProject.permissions, expected);
    // Not granted by owning the instance (docs/permissions.md).
    assert.ok(!inProject.permissions.includes("user.impersonate"));
  });

  it("an ORG_OWNER of A (a human with an access token) holds its permissions in A and none in B, as the API decides", async () => {
    const { userId, token } = await human("org-owner-a", orgA);
    await addMembership(userId, `?ctx.org_id=${orgA}`, ["ORG_OWNER"]);
    const inA = await mine(token, `?ctx.org_id=${orgA}`);
    assert.deepEqual(inA.permissions, sorted(rolePermissions.ORG_OWNER));
    assert.ok(inA.permissions.includes("org.write") && inA.permissions.includes("user.write"));
    assert.ok(!inA.permissions.includes("org.create") && !inA.permissions.includes("instance.read"));
    assert.deepEqual(inA.roles, [{ role: "ORG_OWNER", context: orgContext(orgA) }]);
    assert.deepEqual(inA.memberships, [{ context: orgContext(orgA), roles: ["ORG_OWNER"] }]);
    assert.equal(inA.user_id, userId);
    assert.equal(inA.org_id, orgA);
    // Its organization's projects inherit the organization's roles.
    assert.deepEqual((await mine(token, `?project_id=${projectA}`)).permissions, inA.permissions);

    for (const query of [`?ctx.org_id=${orgB}`, ""]) {
      const elsewhere = await mine(token, query);
      assert.deepEqual([elsewhere.permissions, elsewhere.roles], [[], []], query);
      assert.deepEqual(elsewhere.memberships, inA.memberships, "every membership, wherever asked");
    }
    // The answer is what the other RPCs decide: A is readable and writable, B is unknown to it.
    const caller = restClient(platform, () => token);
    assert.equal((await caller("GET", `/resources/v3alpha/organizations/${orgA}`)).status, 200);
    assert.equal((await caller("GET", `/resources/v3alpha/organizations/${orgB}`)).status, 404);
    const listed = await caller("POST", "/resources/v3alpha/organizations/_search");
    assert.equal(listed.status, 200, listed.text);
    assert.deepEqual(
      listed.json.result.map((o: Json) => o.details.id),
      [orgA],
      "the organization switcher's list: only the organizations it may read",
    );
  });

  it("a user without a membership holds nothing; its own organization grants nothing by itself", async () => {
    const { userId, token } = await addMachineUser(platform, { username: "nobody", orgId: orgA });
    for (const query of ["", `?ctx.org_id=${orgA}`, `?project_id=${projectA}`]) {
      const answer = await mine(token, query);
      assert.deepEqual(
        answer,
        { permissions: [], roles: [], system_user: false, memberships: [], user_id: userId, org_id: orgA },
        query,
      );
    }
  });

  it("a project membership shows the project's permissions in that project only", async () => {
    const { userId, token } = await addMachineUser(platform, { username: "project-owner", orgId: orgB });
    await addMembership(userId, "", ["PROJECT_OWNER"], projectA);
    const inProject = await mine(token, `?ctx.org_id=${orgA}&project_id=${projectA}`);
    assert.deepEqual(inProject.permissions, sorted(rolePermissions.PROJECT_OWNER));
    assert.ok(inProject.permissions.includes("project.app.write"));
    assert.deepEqual(inProject.roles, [{ role: "PROJECT_OWNER", context: projectContext(projectA) }]);
    assert.deepEqual(inProject.memberships, [
      { context: projectContext(projectA), roles: ["PROJECT_OWNER"] },
    ]);
    assert.deepEqual(await mine(token, `?project_id=${projectA}`), inProject, "ctx defaults to the instance");
    // Not in the project's organization, nor elsewhere.
    assert.deepEqual((await mine(token, `?ctx.org_id=${orgA}`)).permissions, []);
    assert.deepEqual((await mine(token)).permissions, []);
  });

  it("roles of several memberships add up, listed instance first, each with where it sits", async () => {
    const { userId, token } = await addMachineUser(platform, { username: "layered", orgId: orgA });
    await addMembership(userId, "", ["IAM_OWNER_VIEWER"]);
    await addMembership(userId, `?ctx.org_id=${orgA}`, ["ORG_USER_MANAGER", "ORG_PROJECT_CREATOR"]);
    await addMembership(userId, `?ctx.org_id=${orgB}`, ["ORG_OWNER_VIEWER"]);
    await addMembership(userId, "", ["PROJECT_OWNER_VIEWER"], projectA);
    const inProject = await mine(token, `?project_id=${projectA}`);
    const expected = new Set(
      ["IAM_OWNER_VIEWER", "ORG_USER_MANAGER", "ORG_PROJECT_CREATOR", "PROJECT_OWNER_VIEWER"].flatMap(
        (role) => rolePermissions[role],
      ),
    );
    assert.deepEqual(inProject.permissions, sorted([...expected]));
    assert.deepEqual(inProject.roles, [
      { role: "IAM_OWNER_VIEWER", context: instanceContext() },
      { role: "ORG_PROJECT_CREATOR", context: orgContext(orgA) },
      { role: "ORG_USER_MANAGER", context: orgContext(orgA) },
      { role: "PROJECT_OWNER_VIEWER", context: projectContext(projectA) },
    ]);
    const [first, second] = sorted([orgA, orgB]);
    const orgRoles: Record<string, string[]> = {
      [orgA]: ["ORG_PROJECT_CREATOR", "ORG_USER_MANAGER"],
      [orgB]: ["ORG_OWNER_VIEWER"],
    };
    assert.deepEqual(inProject.memberships, [
      { context: instanceContext(), roles: ["IAM_OWNER_VIEWER"] },
      { context: orgContext(first), roles: orgRoles[first] },
      { context: orgContext(second), roles: orgRoles[second] },
      { context: projectContext(projectA), roles: ["PROJECT_OWNER_VIEWER"] },
    ]);
    const inB = await mine(token, `?ctx.org_id=${orgB}`);
    assert.deepEqual(
      inB.roles.map((r: Json) => r.role),
      ["IAM_OWNER_VIEWER", "ORG_OWNER_VIEWER"],
    );
    assert.ok(!inB.permissions.includes("user.write"), "in B it only reads");
    assert.ok((await mine(token, `?ctx.org_id=${orgA}`)).permissions.includes("user.write"));
  });

  it("a system user holds the IAM_OWNER permissions everywhere, the system context included", async () => {
    const token = await systemToken();
    for (const query of ["", "?ctx.system=true", `?ctx.org_id=${orgB}`, `?project_id=${projectA}`]) {
      assert.deepEqual(
        await mine(token, query),
        {
          permissions: sorted(rolePermissions.IAM_OWNER),
          roles: [],
          system_user: true,
          memberships: [],
          user_id: "ops-robot",
          org_id: "",
        },
        query,
      );
    }
    // Other callers are refused the system context, as by every RPC.
    const refused = await rest("GET", `${MINE}?ctx.system=true`);
    assert.equal(refused.status, 403, refused.text);
  });

  it("bad input is 400 naming the field; unknown organizations and projects are 404", async () => {
    const cases: Array<[string, RegExp]> = [
      ["?project_id=", /^project_id: must not be empty$/],
      ["?ctx.org_id=", /^ctx\.org_id: must not be empty$/],
      ["?ctx.system=false", /^ctx\.system: /],
      [`?project_id=${"x".repeat(201)}`, /^project_id: /],
      ["?ctx.nope=1", /unknown query parameter "ctx\.nope"/],
      ["?ctx.system=true&project_id=p", /^ctx: /],
    ];
    const { token: nobody } = await addMachineUser(platform, { username: "bad-input" });
    const system = await systemToken();
    for (const [query, message] of cases) {
      const token = query.includes("system=true") ? system : nobody;
      const reply = await rest("GET", `${MINE}${query}`, { token });
      assert.equal(reply.status, 400, `${query} → ${reply.text}`);
      assert.match(reply.json.message, message, query);
      assert.equal(reply.json.code, 3);
    }
    for (const query of [
      `?ctx.org_id=${newId()}`,
      "?ctx.org_domain=nowhere.example",
      `?project_id=${newId()}`,
      `?ctx.org_id=${orgB}&project_id=${projectA}`,
    ]) {
      for (const token of [owner, nobody]) {
        const reply = await rest("GET", `${MINE}${query}`, { token });
        assert.equal(reply.status, 404, `${query} → ${reply.text}`);
      }
    }
  });

  it("needs authentication: 401 without a token or with a bad one, over REST, gRPC and Connect", async () => {
    for (const token of [null, "not-a-token"]) {
      const reply = await rest("GET", MINE, { token });
      assert.equal(reply.status, 401, reply.text);
      assert.equal(reply.json.code, 16);
    }
    for (const transport of [
      createGrpcTransport({ baseUrl: platform.url }),
      createConnectTransport({ baseUrl: platform.url, httpVersion: "1.1" }),
    ]) {
      const memberships = createClient(PlatformMemberships, transport);
      await assert.rejects(
        memberships.listMyPermissions({}),
        (e) => e instanceof ConnectError && e.code === Code.Unauthenticated,
      );
      // With a token the answer is the REST one.
      const answer = await memberships.listMyPermissions(
        { ctx: { context: { case: "orgId", value: orgA } } },
        { headers: { authorization: `Bearer ${owner}` } },
      );
      assert.deepEqual(sorted(answer.permissions), answer.permissions);
      assert.deepEqual(answer.permissions, sorted(rolePermissions.IAM_OWNER));
      assert.equal(answer.roles[0]?.role, "IAM_OWNER");
      assert.equal(answer.systemUser, false);
    }
    const overGrpc = await grpcCall(platform, owner, PlatformMemberships, "ListMyPermissions", {
      ctx: { org_id: orgA },
    });
    // proto3 JSON without the fields at their defaults (REST answers them all).
    const { system_user, ...overRest } = await mine(owner, `?ctx.org_id=${orgA}`);
    assert.equal(system_user, false);
    assert.deepEqual(overGrpc, overRest);
  });
});
