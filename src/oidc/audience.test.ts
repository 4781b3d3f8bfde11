import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import {
  addMachineUser,
  addOrg,
  assertRpcError,
  restClient,
  startPlatform,
  type TestPlatform,
} from "../../test/helpers.ts";
import {
  assertOAuthError,
  basic,
  client,
  discover,
  type MachineClient,
  machineClient,
  ownerToken,
  postForm,
} from "../../test/oidc.ts";

const aud = (project: string) => `urn:platform:iam:org:project:id:${project}:aud`;

/**
 * Project audiences belong to organizations: a client names its own organization's projects or those granted
 * to it, no username stands for a project or app, and introspection recognizes its callers by identity.
 */
describe("token audiences and organizations", () => {
  let platform: TestPlatform;
  let owner: string;
  let orgB: string;
  let projectA: string; // a project of the first organization (A)
  let api: { clientId: string; clientSecret: string }; // an API app of projectA: its resource server
  let svcA: MachineClient; // a machine user of organization A
  let svcB: MachineClient; // a machine user of organization B
  let token: string;
  let introspect: string;
  const rest = restClient(
    () => platform,
    () => owner,
  );

  /** A machine user of `orgId` with a client secret (the users API, ctx.org_id). */
  const machineOf = async (orgId: string, username: string): Promise<MachineClient> => {
    const created = await rest("POST", `/resources/v3alpha/users?ctx.org_id=${orgId}`, {
      json: { username, machine: { name: username } },
    });
    assert.equal(created.status, 201, created.text);
    const userId = created.json.details.id as string;
    const secret = await rest("POST", `/resources/v3alpha/users/${userId}/_generate_secret`, { json: {} });
    assert.equal(secret.status, 200, secret.text);
    return { userId, clientId: secret.json.client_id, clientSecret: secret.json.client_secret };
  };
  const clientCredentials = (c: MachineClient, scope: string) =>
    postForm(token, { grant_type: "client_credentials", scope }, basic(c.clientId, c.clientSecret));
  const introspectAs = async (caller: { clientId: string; clientSecret: string }, accessToken: string) =>
    (await postForm(introspect, { token: accessToken }, basic(caller.clientId, caller.clientSecret))).json;

  before(async () => {
    platform = await startPlatform({ listen: true });
    owner = await ownerToken(platform);
    token = `${platform.url}/oauth/v2/token`;
    introspect = `${platform.url}/oauth/v2/introspect`;
    orgB = await addOrg(platform, "Org B");
    const project = await rest("POST", "/resources/v3alpha/projects", { json: { name: "Inventory" } });
    assert.equal(project.status, 201, project.text);
    projectA = project.json.details.id;
    const role = await rest("POST", `/resources/v3alpha/projects/${projectA}/roles`, {
      json: { key: "reader", display_name: "Reader" },
    });
    assert.equal(role.status, 201, role.text);
    const app = await rest("POST", `/resources/v3alpha/projects/${projectA}/apps`, {
      json: { name: "Inventory API", api: { auth_method: "API_AUTH_METHOD_TYPE_BASIC" } },
    });
    assert.equal(app.status, 201, app.text);
    api = { clientId: app.json.client_id, clientSecret: app.json.client_secret };
    svcA = await machineClient(platform, owner, "svc-org-a");
    svcB = await machineOf(orgB, "svc-org-b");
  });
  after(() => platform?.stop());

  it("a client names its organization's projects and the projects granted to it, nothing else", async () => {
    const own = await clientCredentials(svcA, `openid ${aud(projectA)}`);
    assert.equal(own.status, 200, own.text);
    assert.equal((await introspectAs(api, own.json.access_token)).active, true, "projectA's API sees it");

    // Organization B's client: projectA is not its organization's, and not granted to it.
    const refused =
      /unknown project \d+ in an audience scope: a client may name its organization's projects and the projects granted to it/;
    assertOAuthError(await clientCredentials(svcB, `openid ${aud(projectA)}`), 400, "invalid_scope", refused);
    // An unknown project gets the same answer: another organization's project IDs cannot be probed.
    assertOAuthError(await clientCredentials(svcB, `openid ${aud("424242")}`), 400, "invalid_scope", refused);
    // The management project is every client's (the management APIs).
    const management = await clientCredentials(svcB, `openid ${aud("platform")}`);
    assert.equal(management.status, 200, management.text);

    // A project grant opens projectA to organization B, while it is active.
    const grant = await rest("POST", `/resources/v3alpha/projects/${projectA}/grants`, {
      json: { granted_org_id: orgB, role_keys: ["reader"] },
    });
    assert.equal(grant.status, 201, grant.text);
    const granted = await clientCredentials(svcB, `openid ${aud(projectA)}`);
    assert.equal(granted.status, 200, granted.text);
    const seen = await introspectAs(api, granted.json.access_token);
    assert.equal(seen.active, true);
    assert.ok(seen.aud.includes(projectA));
    const deactivated = await rest(
      "POST",
      `/resources/v3alpha/projects/${projectA}/grants/${grant.json.details.id}/_deactivate`,
      { json: {} },
    );
    assert.equal(deactivated.status, 200, deactivated.text);
    assertOAuthError(await clientCredentials(svcB, `openid ${aud(projectA)}`), 400, "invalid_scope", refused);
  });

  it("what a token request saw of a project is not kept past a change: removed, granted, ungranted", async () => {
    // Answers are cached per process (src/oidc/project-audiences.ts): each request below follows one that
    // filled the cache with the state before the change, and must see the change at once.
    const created = await rest("POST", "/resources/v3alpha/projects", { json: { name: "Short-lived" } });
    assert.equal(created.status, 201, created.text);
    const project = created.json.details.id as string;
    const role = await rest("POST", `/resources/v3alpha/projects/${project}/roles`, {
      json: { key: "user", display_name: "User" },
    });
    assert.equal(role.status, 201, role.text);
    const refused = /unknown project/;
    for (let i = 0; i < 2; i++) {
      assert.equal((await clientCredentials(svcA, `openid ${aud(project)}`)).status, 200);
      assertOAuthError(
        await clientCredentials(svcB, `openid ${aud(project)}`),
        400,
        "invalid_scope",
        refused,
      );
    }
    const grant = await rest("POST", `/resources/v3alpha/projects/${project}/grants`, {
      json: { granted_org_id: orgB, role_keys: ["user"] },
    });
    assert.equal(grant.status, 201, grant.text);
    assert.equal((await clientCredentials(svcB, `openid ${aud(project)}`)).status, 200, "granted: at once");
    const removedGrant = await rest(
      "DELETE",
      `/resources/v3alpha/projects/${project}/grants/${grant.json.details.id}`,
    );
    assert.equal(removedGrant.status, 200, removedGrant.text);
    assertOAuthError(await clientCredentials(svcB, `openid ${aud(project)}`), 400, "invalid_scope", refused);

    const removed = await rest("DELETE", `/resources/v3alpha/projects/${project}`);
    assert.equal(removed.status, 200, removed.text);
    assertOAuthError(await clientCredentials(svcA, `openid ${aud(project)}`), 400, "invalid_scope", refused);
  });

  it("role claims of an audience-scoped token follow the user grant at once", async () => {
    const scope = `openid ${aud(projectA)} urn:platform:iam:org:projects:roles`;
    const rolesOf = async (accessToken: string) =>
      (await introspectAs(api, accessToken))[`urn:platform:iam:org:project:${projectA}:roles`];
    const userGrant = await rest("POST", "/resources/v3alpha/user_grants", {
      json: { user_id: svcA.userId, project_id: projectA, role_keys: ["reader"] },
    });
    assert.equal(userGrant.status, 201, userGrant.text);
    const issued = await clientCredentials(svcA, scope);
    assert.equal(issued.status, 200, issued.text);
    assert.deepEqual(Object.keys(await rolesOf(issued.json.access_token)), ["reader"]);
    const role = await rest("POST", `/resources/v3alpha/projects/${projectA}/roles`, {
      json: { key: "writer", display_name: "Writer" },
    });
    assert.equal(role.status, 201, role.text);
    const changed = await rest("PATCH", `/resources/v3alpha/user_grants/${userGrant.json.details.id}`, {
      json: { role_keys: ["writer"] },
    });
    assert.equal(changed.status, 200, changed.text);
    assert.deepEqual(Object.keys(await rolesOf(issued.json.access_token)), ["writer"], "introspection");
    const again = await clientCredentials(svcA, scope);
    assert.deepEqual(Object.keys(await rolesOf(again.json.access_token)), ["writer"], "a new token");
    const removed = await rest("DELETE", `/resources/v3alpha/user_grants/${userGrant.json.details.id}`);
    assert.equal(removed.status, 200, removed.text);
    assert.equal(await rolesOf(issued.json.access_token), undefined);
  });

  it("no machine user's username can stand for a project or an app in an audience", async () => {
    // Refused by the users API: digits alone (a project ID), digits and "@" (an app's client ID).
    for (const username of [projectA, api.clientId]) {
      const created = await rest("POST", `/resources/v3alpha/users?ctx.org_id=${orgB}`, {
        json: { username, machine: { name: "impostor" } },
      });
      assertRpcError(created, 400, 3, "user.username");
      const renamed = await rest("PATCH", `/resources/v3alpha/users/${svcB.userId}`, { json: { username } });
      assertRpcError(renamed, 400, 3, "user.username");
    }
    // A person may still have such a username (people are never clients).
    const person = await rest("POST", "/resources/v3alpha/users", {
      json: {
        username: "20240101",
        human: { profile: { given_name: "Num", family_name: "Ber" }, email: { address: "n@example.com" } },
      },
    });
    assert.equal(person.status, 201, person.text);

    // One made before the rule gets no tokens: it would pass projectA's audience check.
    const { userId } = await addMachineUser(platform, { username: projectA, orgId: orgB });
    const secret = await rest("POST", `/resources/v3alpha/users/${userId}/_generate_secret`, { json: {} });
    assert.equal(secret.status, 200, secret.text);
    const impostor = { userId, clientId: secret.json.client_id, clientSecret: secret.json.client_secret };
    assertOAuthError(await clientCredentials(impostor, "openid"), 400, "unauthorized_client", /rename/);
  });

  it("introspection recognizes its caller by identity, not by a name in the audience", async () => {
    // A machine user sees its own tokens; a later holder of its old username does not.
    const first = await machineOf(orgB, "svc-reused-name");
    const config = await discover(platform.url, first.clientId, client.ClientSecretBasic(first.clientSecret));
    const tokens = await client.clientCredentialsGrant(config, { scope: "openid" });
    assert.equal((await client.tokenIntrospection(config, tokens.access_token)).active, true);
    const renamed = await rest("PATCH", `/resources/v3alpha/users/${first.userId}`, {
      json: { username: "svc-renamed" },
    });
    assert.equal(renamed.status, 200, renamed.text);
    const second = await machineOf(orgB, "svc-reused-name");
    assert.deepEqual(await introspectAs(second, tokens.access_token), { active: false });

    // An API app sees the tokens whose audience holds its project, no others.
    const without = await clientCredentials(svcA, "openid");
    assert.deepEqual(await introspectAs(api, without.json.access_token), { active: false });
    const withProject = await clientCredentials(svcA, `openid ${aud(projectA)}`);
    assert.equal((await introspectAs(api, withProject.json.access_token)).active, true);
    // ... and another machine user of the same organization sees neither.
    const other = await machineOf(orgB, "svc-bystander");
    assert.deepEqual(await introspectAs(other, withProject.json.access_token), { active: false });
  });
});
