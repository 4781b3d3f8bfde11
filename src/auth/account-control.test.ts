import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { decodeJwt } from "jose";
import {
  addMachineUser,
  addOrg,
  assertRejected,
  eventCount,
  type Json,
  type RestReply,
  restClient,
  startPlatform,
  type TestPlatform,
  tempDir,
} from "../../test/helpers.ts";
import { client, discover, type MachineClient, machineClient } from "../../test/oidc.ts";
import { newId } from "../id.ts";

const USERS = "/resources/v3alpha/users";
const MEMBERSHIPS = "/resources/v3alpha/memberships";
const PROJECTS = "/resources/v3alpha/projects";
const ORGS = "/resources/v3alpha/organizations";
const TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange";
const ACCESS_TOKEN = "urn:ietf:params:oauth:token-type:access_token";
const JWT = "urn:ietf:params:oauth:token-type:jwt";
const AUD_PLATFORM = "urn:platform:iam:org:project:id:platform:aud";
const NO_CONTROL = /no control over a more privileged account/;

/** A user an operation is tried on, and what earlier operations left on it. */
interface Target {
  id: string;
  /** A key and a PAT to remove, an organization membership to change and delete. */
  keyId?: string;
  patId?: string;
  membershipId?: string;
}

/** One account-controlling operation: its request on a target, and its status when allowed. */
interface Operation {
  name: string;
  on: "human" | "machine";
  request: (t: Target) => { method: string; path: string; json?: unknown };
  allowed: number;
  /** The error code when `allowed` is an error (default 5, NOT_FOUND). */
  code?: number;
  /** Keeps what a successful call made (for the removals after it). */
  keep?: (t: Target, reply: RestReply) => void;
}

/**
 * No control over a more privileged account (docs/permissions.md): an ORG_OWNER of the first organization
 * cannot take over the instance's administrators of that organization (`admin`, human, and `admin-client`,
 * machine, both IAM_OWNER) by any operation that controls an account, while it can do each of them to a
 * user whose roles it holds.
 */
describe("no control over a more privileged account", () => {
  let platform: TestPlatform;
  let owner: string; // IAM_OWNER PAT (a test machine user)
  let orgId: string; // the first organization
  let projectId: string; // a project of the first organization
  let orgOwner: MachineClient & { pat: string; membershipId: string }; // ORG_OWNER of the first organization
  const admin: Target = { id: "" };
  const adminClient: Target = { id: "" };
  const plainHuman: Target = { id: "" };
  const plainMachine: Target = { id: "" };

  const rest = restClient(
    () => platform,
    () => owner,
  );
  const created = async (p: string, json: unknown, token?: string): Promise<Json> => {
    const r = await rest("POST", p, { json, token });
    assert.equal(r.status, 201, r.text);
    return r.json;
  };
  const human = async (username: string) =>
    (
      await created(USERS, {
        username,
        human: {
          profile: { given_name: "Plain", family_name: "User" },
          email: { address: `${username}@example.com`, is_verified: true },
          password: { password: "Plain-Passw0rd!", change_required: false },
        },
      })
    ).details.id as string;
  const machine = async (username: string) =>
    (
      await created(USERS, {
        username,
        machine: { name: username, access_token_type: "ACCESS_TOKEN_TYPE_BEARER" },
      })
    ).details.id as string;

  const operations: Operation[] = [
    {
      name: "change the e-mail",
      on: "human",
      request: (t) => ({
        method: "PATCH",
        path: `${USERS}/${t.id}`,
        json: { human: { email: { address: "taken-over@example.com", is_verified: true } } },
      }),
      allowed: 200,
    },
    {
      name: "change the phone",
      on: "human",
      request: (t) => ({
        method: "PATCH",
        path: `${USERS}/${t.id}`,
        json: { human: { phone: { number: "+41 44 000 00 00", is_verified: true } } },
      }),
      allowed: 200,
    },
    {
      name: "change the username",
      on: "human",
      request: (t) => ({ method: "PATCH", path: `${USERS}/${t.id}`, json: { username: `renamed-${t.id}` } }),
      allowed: 200,
    },
    {
      name: "set the password",
      on: "human",
      request: (t) => ({
        method: "POST",
        path: `${USERS}/${t.id}/_set_password`,
        json: { password: "Taken-Passw0rd!", change_required: false },
      }),
      allowed: 200,
    },
    // Passes the rule and finds no open code: 400, nothing stored.
    {
      name: "verify the e-mail",
      on: "human",
      request: (t) => ({
        method: "POST",
        path: `${USERS}/${t.id}/email/_verify`,
        json: { verification_code: "WRONG234" },
      }),
      allowed: 400,
      code: 3,
    },
    {
      name: "send an e-mail code",
      on: "human",
      request: (t) => ({
        method: "POST",
        path: `${USERS}/${t.id}/email/_send_code`,
        json: { return_code: true },
      }),
      allowed: 200,
    },
    {
      name: "request a password reset",
      on: "human",
      request: (t) => ({
        method: "POST",
        path: `${USERS}/${t.id}/password/_request_reset`,
        json: { return_code: true },
      }),
      allowed: 200,
    },
    // Passes the rule and finds a password: 400 FAILED_PRECONDITION, nothing stored.
    {
      name: "invite",
      on: "human",
      request: (t) => ({ method: "POST", path: `${USERS}/${t.id}/_invite`, json: { return_code: true } }),
      allowed: 400,
      code: 9,
    },
    // Passes the rule and finds no link: 404 (a link is an account's credential too).
    {
      name: "remove an identity-provider link",
      on: "human",
      request: (t) => ({ method: "DELETE", path: `${USERS}/${t.id}/links/${newId()}` }),
      allowed: 404,
    },
    // Second factors (docs/factors.md): registering a TOTP, enabling e-mail codes, making recovery codes
    // take over the account's second factor as surely as a password does; removing one weakens it.
    {
      name: "register a TOTP authenticator",
      on: "human",
      request: (t) => ({ method: "POST", path: `${USERS}/${t.id}/totp` }),
      allowed: 200,
    },
    // Passes the rule and finds a pending registration: a wrong code is 400, nothing stored.
    {
      name: "verify a TOTP registration",
      on: "human",
      request: (t) => ({ method: "POST", path: `${USERS}/${t.id}/totp/_verify`, json: { code: "000000" } }),
      allowed: 400,
      code: 3,
    },
    {
      name: "remove the TOTP authenticator",
      on: "human",
      request: (t) => ({ method: "DELETE", path: `${USERS}/${t.id}/totp` }),
      allowed: 200,
    },
    {
      name: "enable e-mail codes",
      on: "human",
      request: (t) => ({ method: "POST", path: `${USERS}/${t.id}/otp_email` }),
      allowed: 200,
    },
    {
      name: "disable e-mail codes",
      on: "human",
      request: (t) => ({ method: "DELETE", path: `${USERS}/${t.id}/otp_email` }),
      allowed: 200,
    },
    // the phone number was set verified by "change the phone"
    {
      name: "enable SMS codes",
      on: "human",
      request: (t) => ({ method: "POST", path: `${USERS}/${t.id}/otp_sms` }),
      allowed: 200,
    },
    {
      name: "disable SMS codes",
      on: "human",
      request: (t) => ({ method: "DELETE", path: `${USERS}/${t.id}/otp_sms` }),
      allowed: 200,
    },
    {
      name: "generate recovery codes",
      on: "human",
      request: (t) => ({ method: "POST", path: `${USERS}/${t.id}/recovery_codes` }),
      allowed: 200,
    },
    {
      name: "remove recovery codes",
      on: "human",
      request: (t) => ({ method: "DELETE", path: `${USERS}/${t.id}/recovery_codes` }),
      allowed: 200,
    },
    // A passkey registration is an account's credential too: starting one, verifying and removing one.
    {
      name: "start a passkey registration",
      on: "human",
      request: (t) => ({ method: "POST", path: `${USERS}/${t.id}/passkeys`, json: {} }),
      allowed: 201,
    },
    // Passes the rule and finds no such passkey: 404.
    {
      name: "verify a passkey",
      on: "human",
      request: (t) => ({
        method: "POST",
        path: `${USERS}/${t.id}/passkeys/${newId()}/_verify`,
        json: { public_key_credential: { id: "x" }, name: "Key" },
      }),
      allowed: 404,
    },
    {
      name: "remove a passkey",
      on: "human",
      request: (t) => ({ method: "DELETE", path: `${USERS}/${t.id}/passkeys/${newId()}` }),
      allowed: 404,
    },
    {
      name: "generate a client secret",
      on: "machine",
      request: (t) => ({ method: "POST", path: `${USERS}/${t.id}/_generate_secret`, json: {} }),
      allowed: 200,
    },
    {
      name: "add a key",
      on: "machine",
      request: (t) => ({ method: "POST", path: `${USERS}/${t.id}/keys`, json: {} }),
      allowed: 201,
      keep: (t, r) => {
        t.keyId = r.json.key_id;
      },
    },
    {
      name: "remove a key",
      on: "machine",
      request: (t) => ({ method: "DELETE", path: `${USERS}/${t.id}/keys/${t.keyId}` }),
      allowed: 200,
    },
    {
      name: "create a personal access token",
      on: "machine",
      request: (t) => ({ method: "POST", path: `${USERS}/${t.id}/pats`, json: {} }),
      allowed: 201,
      keep: (t, r) => {
        t.patId = r.json.pat_id;
      },
    },
    {
      name: "remove a personal access token",
      on: "machine",
      request: (t) => ({ method: "DELETE", path: `${USERS}/${t.id}/pats/${t.patId}` }),
      allowed: 200,
    },
    ...(["human", "machine"] as const).flatMap((on): Operation[] => [
      {
        name: `set metadata (${on})`,
        on,
        request: (t) => ({
          method: "PATCH",
          path: `${USERS}/${t.id}/metadata`,
          json: { entries: { role: Buffer.from("admin").toString("base64") } },
        }),
        allowed: 200,
      },
      ...["lock", "unlock", "deactivate", "reactivate"].map((action) => ({
        name: `${action} (${on})`,
        on,
        request: (t: Target) => ({ method: "POST", path: `${USERS}/${t.id}/_${action}` }),
        allowed: 200,
      })),
      {
        name: `add a membership (${on})`,
        on,
        request: (t) => ({
          method: "POST",
          path: MEMBERSHIPS,
          json: { user_id: t.id, roles: ["PROJECT_OWNER_VIEWER"], project_id: projectId },
        }),
        allowed: 201,
      },
      {
        name: `change a membership (${on})`,
        on,
        request: (t) => ({
          method: "PATCH",
          path: `${MEMBERSHIPS}/${t.membershipId}`,
          json: { roles: ["ORG_USER_MANAGER"] },
        }),
        allowed: 200,
      },
      {
        name: `delete a membership (${on})`,
        on,
        request: (t) => ({ method: "DELETE", path: `${MEMBERSHIPS}/${t.membershipId}` }),
        allowed: 200,
      },
      {
        name: `delete the user (${on})`,
        on,
        request: (t) => ({ method: "DELETE", path: `${USERS}/${t.id}` }),
        allowed: 200,
      },
    ]),
  ];

  /** Runs every operation on the human and machine target as the ORG_OWNER: [name, status, code]. */
  const runAll = async (humanTarget: Target, machineTarget: Target) => {
    const results: Array<[string, number, number | undefined]> = [];
    for (const op of operations) {
      const target = op.on === "human" ? humanTarget : machineTarget;
      const { method, path: p, json } = op.request(target);
      const before = await eventCount(platform);
      const r = await rest(method, p, { json, token: orgOwner.pat });
      if (r.status < 300) op.keep?.(target, r);
      else assert.equal(await eventCount(platform), before, `${op.name}: nothing stored`);
      results.push([op.name, r.status, r.status < 300 ? undefined : r.json.code]);
      if (r.status === 403) assert.match(r.json.message, NO_CONTROL, op.name);
    }
    return results;
  };

  before(async () => {
    const patPath = path.join(tempDir("pat-"), "admin-client.pat");
    platform = await startPlatform({ listen: true, env: { PLATFORM_FIRSTINSTANCE_PAT_PATH: patPath } });
    orgId = platform.bootstrapResult!.orgId;
    admin.id = platform.bootstrapResult!.adminUserId;
    ({ token: owner } = await addMachineUser(platform, {
      username: "owner",
      membership: { contextType: "instance", roles: ["IAM_OWNER"] },
    }));
    const adminClientPat = readFileSync(patPath, "utf8").trim();
    const found = await rest("POST", `${USERS}/_search`, {
      json: [{ username: { username: "admin-client" } }],
      token: adminClientPat,
    });
    assert.equal(found.json.result.length, 1, found.text);
    adminClient.id = found.json.result[0].details.id;
    projectId = (await created(`${PROJECTS}?ctx.org_id=${orgId}`, { name: "Shop" })).details.id;

    const ownerClient = await machineClient(platform, owner, "org-owner");
    const membership = await created(`${MEMBERSHIPS}?ctx.org_id=${orgId}`, {
      user_id: ownerClient.userId,
      roles: ["ORG_OWNER"],
    });
    const pat = await created(`${USERS}/${ownerClient.userId}/pats`, {});
    orgOwner = { ...ownerClient, pat: pat.token, membershipId: membership.details.id };

    plainHuman.id = await human("plain-human");
    plainMachine.id = await machine("plain-machine");
    // Something to remove on the administrators, and an organization membership of each target (the plain
    // targets' roles are ones the ORG_OWNER holds).
    adminClient.keyId = (await created(`${USERS}/${adminClient.id}/keys`, {})).key_id;
    adminClient.patId = (await created(`${USERS}/${adminClient.id}/pats`, {})).pat_id;
    for (const t of [admin, adminClient, plainHuman, plainMachine]) {
      t.membershipId = (
        await created(`${MEMBERSHIPS}?ctx.org_id=${orgId}`, { user_id: t.id, roles: ["ORG_OWNER_VIEWER"] })
      ).details.id;
    }
  });
  after(() => platform?.stop());

  it("an ORG_OWNER gets PERMISSION_DENIED for every account-controlling operation on admin and admin-client, nothing stored", async () => {
    const results = await runAll(admin, adminClient);
    assert.deepEqual(
      results,
      operations.map((op) => [op.name, 403, 7]),
    );
    // Reads stay open: the ORG_OWNER still sees the administrators of its organization.
    for (const t of [admin, adminClient]) {
      const got = await rest("GET", `${USERS}/${t.id}`, { token: orgOwner.pat });
      assert.equal(got.status, 200, got.text);
      assert.equal(got.json.user.state, "USER_STATE_ACTIVE");
    }
    const admins = await rest("GET", `${USERS}/${admin.id}`);
    assert.equal(admins.json.user.username, "admin");
    assert.notEqual(admins.json.user.human.email.address, "taken-over@example.com");
  });

  it("the same ORG_OWNER does each of them to users whose roles it holds", async () => {
    const results = await runAll(plainHuman, plainMachine);
    assert.deepEqual(
      results,
      operations.map((op) => [op.name, op.allowed, op.allowed < 300 ? undefined : (op.code ?? 5)]),
    );
  });

  it("roles elsewhere count, the caller's own account is its own, and nobody gives roles it does not hold", async () => {
    // A plain user of the first organization who is ORG_OWNER of another organization.
    const other = await addOrg(platform, "Other");
    const elsewhere = await machine("owner-elsewhere");
    await created(`${MEMBERSHIPS}?ctx.org_id=${other}`, { user_id: elsewhere, roles: ["ORG_OWNER"] });
    await assertRejected(
      platform,
      () => rest("POST", `${USERS}/${elsewhere}/pats`, { json: {}, token: orgOwner.pat }),
      403,
      7,
      NO_CONTROL,
    );
    // ... or PROJECT_OWNER of another organization's project.
    const foreignProject = (await created(`${PROJECTS}?ctx.org_id=${other}`, { name: "Foreign" })).details.id;
    const projectOwner = await machine("project-owner-elsewhere");
    await created(MEMBERSHIPS, {
      user_id: projectOwner,
      roles: ["PROJECT_OWNER"],
      project_id: foreignProject,
    });
    await assertRejected(
      platform,
      () => rest("POST", `${USERS}/${projectOwner}/_generate_secret`, { json: {}, token: orgOwner.pat }),
      403,
      7,
      NO_CONTROL,
    );
    // A fellow ORG_OWNER of the same organization is not above it.
    const fellow = await machine("fellow-owner");
    await created(`${MEMBERSHIPS}?ctx.org_id=${orgId}`, { user_id: fellow, roles: ["ORG_OWNER"] });
    assert.equal(
      (await rest("POST", `${USERS}/${fellow}/pats`, { json: {}, token: orgOwner.pat })).status,
      201,
    );
    // An ORG_USER_MANAGER does not control an ORG_OWNER.
    const userManager = await addMachineUser(platform, {
      username: "user-manager",
      membership: { contextType: "org", contextId: orgId, roles: ["ORG_USER_MANAGER"] },
    });
    await assertRejected(
      platform,
      () => rest("POST", `${USERS}/${fellow}/_lock`, { token: userManager.token }),
      403,
      7,
      NO_CONTROL,
    );
    // Its own account: a PAT for itself.
    assert.equal(
      (await rest("POST", `${USERS}/${orgOwner.userId}/pats`, { json: {}, token: orgOwner.pat })).status,
      201,
    );

    // An IAM_ORG_MANAGER (membership.write in the instance) gives neither itself nor anyone IAM_OWNER ...
    const manager = await addMachineUser(platform, {
      username: "org-manager",
      membership: { contextType: "instance", roles: ["IAM_ORG_MANAGER"] },
    });
    const someone = await machine("someone");
    for (const userId of [manager.userId, someone]) {
      await assertRejected(
        platform,
        () =>
          rest("POST", MEMBERSHIPS, {
            json: { user_id: userId, roles: ["IAM_OWNER"] },
            token: manager.token,
          }),
        403,
        7,
        /may give only roles whose permissions it holds/,
      );
    }
    // ... nor ORG_OWNER (user.write it does not hold), but ORG_PROJECT_CREATOR.
    await assertRejected(
      platform,
      () =>
        rest("POST", `${MEMBERSHIPS}?ctx.org_id=${other}`, {
          json: { user_id: someone, roles: ["ORG_OWNER"] },
          token: manager.token,
        }),
      403,
      7,
      NO_CONTROL,
    );
    const creator = await rest("POST", `${MEMBERSHIPS}?ctx.org_id=${other}`, {
      json: { user_id: someone, roles: ["ORG_PROJECT_CREATOR"] },
      token: manager.token,
    });
    assert.equal(creator.status, 201, creator.text);
    // An ORG_OWNER may give itself ORG_END_USER_IMPERSONATOR (it could anyway): allowed.
    const self = await rest("PATCH", `${MEMBERSHIPS}/${orgOwner.membershipId}`, {
      json: { roles: ["ORG_OWNER", "ORG_END_USER_IMPERSONATOR"] },
      token: orgOwner.pat,
    });
    assert.equal(self.status, 200, self.text);
  });

  it("deleting an organization needs control over each of its users", async () => {
    const doomed = await addOrg(platform, "Doomed");
    const doomedOwner = await addMachineUser(platform, {
      username: "doomed-owner",
      orgId: doomed,
      membership: { contextType: "org", contextId: doomed, roles: ["ORG_OWNER"] },
    });
    const { userId: iamOwnerThere } = await addMachineUser(platform, {
      username: "iam-owner-in-doomed",
      orgId: doomed,
      membership: { contextType: "instance", roles: ["IAM_OWNER"] },
    });
    await assertRejected(
      platform,
      () => rest("DELETE", `${ORGS}/${doomed}`, { token: doomedOwner.token }),
      403,
      7,
      NO_CONTROL,
    );
    assert.equal((await rest("DELETE", `${USERS}/${iamOwnerThere}`)).status, 200);
    const deleted = await rest("DELETE", `${ORGS}/${doomed}`, { token: doomedOwner.token });
    assert.equal(deleted.status, 200, deleted.text);
  });

  it("impersonation: an ORG_END_USER_IMPERSONATOR impersonates the organization's users, not its IAM_OWNERs", async () => {
    const flag = await rest("PATCH", "/settings/v3alpha/features", {
      json: { token_exchange: { set: true } },
    });
    assert.equal(flag.status, 200, flag.text);
    const app = await created(`${PROJECTS}/${projectId}/apps`, {
      name: "exchanger",
      oidc: {
        redirect_uris: [],
        response_types: [],
        grant_types: ["OIDC_GRANT_TYPE_TOKEN_EXCHANGE"],
        app_type: "OIDC_APP_TYPE_WEB",
        auth_method: "OIDC_AUTH_METHOD_TYPE_BASIC",
      },
    });
    const exchanger = await discover(
      platform.url,
      app.client_id,
      client.ClientSecretBasic(app.client_secret),
    );
    // The actor: an ORG_OWNER of the first organization that gave itself ORG_END_USER_IMPERSONATOR.
    const actor = await machineClient(platform, owner, "support-owner");
    const membership = await rest("POST", `${MEMBERSHIPS}?ctx.org_id=${orgId}`, {
      json: { user_id: actor.userId, roles: ["ORG_OWNER"] },
    });
    assert.equal(membership.status, 201, membership.text);
    const actorPat = (await created(`${USERS}/${actor.userId}/pats`, {})).token;
    const selfGiven = await rest("PATCH", `${MEMBERSHIPS}/${membership.json.details.id}`, {
      json: { roles: ["ORG_OWNER", "ORG_END_USER_IMPERSONATOR"] },
      token: actorPat,
    });
    assert.equal(selfGiven.status, 200, selfGiven.text);
    const actorConfig = await discover(
      platform.url,
      actor.clientId,
      client.ClientSecretBasic(actor.clientSecret),
    );
    // The actor token names the exchanging client's project: a client exchanges only tokens meant for it.
    const actorToken = (
      await client.clientCredentialsGrant(actorConfig, {
        scope: `openid ${AUD_PLATFORM} urn:platform:iam:org:project:id:${projectId}:aud`,
      })
    ).access_token;
    const impersonate = (subjectToken: string) =>
      client.genericGrantRequest(exchanger, TOKEN_EXCHANGE, {
        subject_token: subjectToken,
        subject_token_type: ACCESS_TOKEN,
        actor_token: actorToken,
        actor_token_type: ACCESS_TOKEN,
        requested_token_type: JWT,
      });
    const tokenRows = async () =>
      (await platform.db.query<{ n: number }>("SELECT count(*)::int AS n FROM oidc_access_tokens"))[0].n;

    // admin-client (IAM_OWNER of the first organization): refused, nothing stored.
    const adminClientPat = (await created(`${USERS}/${adminClient.id}/pats`, {})).token;
    const [events, tokens] = [await eventCount(platform), await tokenRows()];
    await assert.rejects(impersonate(adminClientPat), (e: client.ResponseBodyError) => {
      assert.equal(e.error, "invalid_request", e.error_description ?? "");
      assert.match(e.error_description ?? "", NO_CONTROL);
      return true;
    });
    assert.equal(await eventCount(platform), events, "no user.impersonated event");
    assert.equal(await tokenRows(), tokens, "no token");

    // A plain user of the organization: impersonated.
    const plain = await machine("impersonated");
    const plainPat = (await created(`${USERS}/${plain}/pats`, {})).token;
    const before = await eventCount(platform);
    const issued = decodeJwt((await impersonate(plainPat)).access_token);
    assert.equal(issued.sub, plain);
    assert.deepEqual(issued.act, { sub: actor.userId });
    assert.equal(await eventCount(platform), before + 1, "user.impersonated");
  });
});
