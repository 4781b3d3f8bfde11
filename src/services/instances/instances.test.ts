import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { exportSPKI, generateKeyPair, SignJWT } from "jose";
import {
  addMachineUser,
  eventCount,
  grpcCall,
  type Json,
  jsonOrRaw,
  restClient,
  startPlatform,
  type TestPlatform,
} from "../../../test/helpers.ts";

import { PlatformInstances } from "../../gen/platform/resources/instance/v3alpha/instance_service_pb.ts";

const INSTANCES = "/resources/v3alpha/instances";

describe("instances API", () => {
  let platform: TestPlatform;
  let port: string;
  let privateKey: CryptoKey;
  let system: string;
  let iamOwner: string;

  /** A system user's self-signed JWT: its audience is the external URL, whichever instance it calls. */
  const systemToken = () =>
    new SignJWT({})
      .setProtectedHeader({ alg: "RS256" })
      .setIssuer("ops-robot")
      .setSubject("ops-robot")
      .setAudience(`http://localhost:${port}`)
      .setIssuedAt()
      .setExpirationTime("5m")
      .sign(privateKey);

  const rest = restClient(
    () => platform,
    () => system,
  );

  const newInstance = (domain: string, extra: Json = {}) => ({
    name: `Tenant ${domain}`,
    domains: [domain],
    first_org_name: "Tenant Org",
    admin: { username: "tenant-admin", password: "Tenant-Password-1!" },
    ...extra,
  });

  before(async () => {
    const keys = await generateKeyPair("RS256");
    privateKey = keys.privateKey as CryptoKey;
    platform = await startPlatform({
      listen: true,
      env: { PLATFORM_SYSTEM_API_USERS: JSON.stringify({ "ops-robot": await exportSPKI(keys.publicKey) }) },
    });
    port = new URL(platform.url).port;
    system = await systemToken();
    ({ token: iamOwner } = await addMachineUser(platform, {
      username: "first-iam-owner",
      membership: { contextType: "instance", roles: ["IAM_OWNER"] },
    }));
  });
  after(() => platform.stop());

  it("creates an instance reachable by its domain at once; its data stays apart from the first instance", async () => {
    const before = await eventCount(platform);
    const created = await rest("POST", INSTANCES, {
      json: newInstance("tenant2.localhost", { domains: ["tenant2.localhost", "Tenant2-alt.localhost"] }),
    });
    assert.equal(created.status, 201, JSON.stringify(created.json));
    const id = created.json.details.id as string;
    assert.ok(created.json.org_id && created.json.admin_user_id);
    assert.deepEqual(created.json.details.resource_owner, { type: "OWNER_TYPE_SYSTEM", id: "system" });
    assert.ok((await eventCount(platform)) > before);

    const got = await rest("GET", `${INSTANCES}/${id}`);
    assert.equal(got.status, 200);
    assert.equal(got.json.instance.name, "Tenant tenant2.localhost");
    assert.deepEqual(got.json.instance.domains, ["tenant2.localhost", "tenant2-alt.localhost"]);
    assert.equal(got.json.instance.primary_domain, "tenant2.localhost");
    assert.equal(got.json.instance.default_org_id, created.json.org_id);
    assert.equal(got.json.instance.blocked, false);
    assert.equal(got.json.instance.state, "INSTANCE_STATE_ACTIVE");

    // Host resolution picks up the new domains immediately.
    const tenantHost = `tenant2.localhost:${port}`;
    const tenantSystem = await systemToken();
    const tenantDefault = await rest("GET", "/resources/v3alpha/organizations/_instance_default", {
      token: tenantSystem,
      host: tenantHost,
    });
    assert.equal(tenantDefault.status, 200, JSON.stringify(tenantDefault.json));
    assert.equal(tenantDefault.json.organization.organization.name, "Tenant Org");
    assert.equal(tenantDefault.json.organization.primary_domain, "tenant-org.tenant2.localhost");
    const alt = await rest("POST", "/resources/v3alpha/organizations/_search", {
      token: await systemToken(),
      host: `tenant2-alt.localhost:${port}`,
      json: [],
    });
    assert.deepEqual(
      alt.json.result.map((o: Json) => o.details.id),
      [created.json.org_id],
    );

    // The first instance does not see the tenant's organizations: neither its IAM_OWNER nor a system user there.
    for (const token of [iamOwner, system]) {
      const orgs = await rest("POST", "/resources/v3alpha/organizations/_search", { token, json: [] });
      assert.equal(orgs.status, 200);
      const names = orgs.json.result.map((o: Json) => o.organization.name);
      assert.ok(names.includes("Platform"));
      assert.ok(!names.includes("Tenant Org"), JSON.stringify(names));
      const get = await rest("GET", `/resources/v3alpha/organizations/${created.json.org_id}`, { token });
      assert.equal(get.status, 404);
    }
    // A system user may name the instance explicitly; the first instance's IAM_OWNER may not.
    const explicit = await rest("POST", `/resources/v3alpha/organizations/_search?ctx.instance_id=${id}`, {
      json: [],
    });
    assert.deepEqual(
      explicit.json.result.map((o: Json) => o.organization.name),
      ["Tenant Org"],
    );
    assert.equal(
      (
        await rest("POST", `/resources/v3alpha/organizations/_search?ctx.instance_id=${id}`, {
          token: iamOwner,
          json: [],
        })
      ).status,
      404,
    );
    // The first instance's PAT means nothing on the tenant's domain.
    assert.equal(
      (
        await rest("POST", "/resources/v3alpha/organizations/_search", {
          token: iamOwner,
          host: tenantHost,
          json: [],
        })
      ).status,
      401,
    );

    // Users stay apart too: the tenant's users are invisible from the first instance and the reverse, and
    // a PAT of a tenant user authenticates only on the tenant's host.
    const tenantOwner = await addMachineUser(platform, {
      username: "tenant-robot",
      instanceId: id,
      orgId: created.json.org_id,
      membership: { contextType: "instance", roles: ["IAM_OWNER"] },
    });
    const users = (token: string, host?: string) =>
      rest("POST", "/resources/v3alpha/users/_search?query.limit=1000", { token, host, json: [] });
    const tenantUsers = await users(tenantOwner.token, tenantHost);
    assert.equal(tenantUsers.status, 200, JSON.stringify(tenantUsers.json));
    assert.deepEqual(tenantUsers.json.result.map((u: Json) => u.username).sort(), [
      "tenant-admin",
      "tenant-robot",
    ]);
    const firstUsers = await users(iamOwner);
    assert.equal(firstUsers.status, 200);
    const firstNames = firstUsers.json.result.map((u: Json) => u.username);
    assert.ok(firstNames.includes("first-iam-owner") && firstNames.includes("admin"), String(firstNames));
    assert.ok(!firstNames.includes("tenant-admin") && !firstNames.includes("tenant-robot"));
    // Same username in both instances: usernames are unique per instance only.
    assert.equal(
      (
        await rest("POST", "/resources/v3alpha/users", {
          token: iamOwner,
          json: { username: "tenant-robot", machine: { name: "first instance's tenant-robot" } },
        })
      ).status,
      201,
    );
    for (const userId of [created.json.admin_user_id, tenantOwner.userId]) {
      const get = await rest("GET", `/resources/v3alpha/users/${userId}`, { token: iamOwner });
      assert.equal(get.status, 404, "a user of another instance is unknown");
      assert.equal(
        (
          await rest("GET", `/resources/v3alpha/users/${userId}`, {
            token: tenantOwner.token,
            host: tenantHost,
          })
        ).status,
        200,
      );
    }
    assert.equal(
      (
        await rest("GET", `/resources/v3alpha/users/${platform.bootstrapResult!.adminUserId}`, {
          token: tenantOwner.token,
          host: tenantHost,
        })
      ).status,
      404,
    );
    // The tenant user's PAT is 401 on the first instance's host, whatever it calls.
    assert.equal((await users(tenantOwner.token)).status, 401);
    assert.equal(
      (await rest("GET", "/settings/v3alpha/languages", { token: tenantOwner.token })).status,
      401,
    );

    // The admin exists in the new instance with IAM_OWNER.
    const admin = await platform.db.query<{ username: string; org_id: string }>(
      "SELECT username, org_id FROM users WHERE instance_id = $1 AND id = $2",
      [id, created.json.admin_user_id],
    );
    assert.deepEqual(admin, [{ username: "tenant-admin", org_id: created.json.org_id }]);
    const roles = await platform.db.query<{ roles: string[] }>(
      "SELECT roles FROM memberships WHERE instance_id = $1 AND user_id = $2",
      [id, created.json.admin_user_id],
    );
    assert.deepEqual(roles[0].roles, ["IAM_OWNER"]);
  });

  it("only system users may use the instances API", async () => {
    const before = await eventCount(platform);
    for (const [method, path, body] of [
      ["POST", "", newInstance("nope.localhost")],
      ["POST", "/_search", []],
      ["GET", `/${platform.bootstrapResult!.instanceId}`, undefined],
      ["POST", `/${platform.bootstrapResult!.instanceId}/_limit`, { block: true }],
    ] as const) {
      const denied = await rest(method, `${INSTANCES}${path}`, { token: iamOwner, ...jsonOrRaw(body) });
      assert.equal(denied.status, 403, `${method} ${path}`);
      assert.equal(denied.json.code, 7);
      assert.equal(
        (await rest(method, `${INSTANCES}${path}`, { token: null, ...jsonOrRaw(body) })).status,
        401,
      );
    }
    assert.equal(await eventCount(platform), before);
  });

  it("rejects bad input naming the field, storing nothing", async () => {
    const before = await eventCount(platform);
    const admin = { username: "a", password: "Long-enough-1!" };
    const base = { name: "Bad", domains: ["bad.localhost"], first_org_name: "Org", admin };
    const cases: Array<[unknown, RegExp]> = [
      ["", /^instance: /],
      [{}, /^instance\.name: /],
      [{ ...base, name: "" }, /^instance\.name: /],
      [{ ...base, name: "  " }, /^instance\.name: must not be blank/],
      [{ ...base, name: "n".repeat(201) }, /^instance\.name: /],
      [{ ...base, name: 7 }, /name/],
      [{ ...base, domains: [] }, /^instance\.domains: /],
      [{ ...base, domains: "bad.localhost" }, /domains/],
      [{ ...base, domains: ["not a domain"] }, /^instance\.domains\[0\]: /],
      [{ ...base, domains: ["ok.localhost", "ok.localhost"] }, /^instance\.domains/],
      [{ ...base, domains: ["ok.localhost", "OK.localhost"] }, /^instance\.domains\[1\]: /],
      [{ ...base, domains: [`${"d".repeat(250)}.com`] }, /^instance\.domains\[0\]: /],
      [{ ...base, first_org_name: "" }, /^instance\.first_org_name: /],
      [{ ...base, admin: undefined }, /^instance\.admin: /],
      [{ ...base, admin: { ...admin, username: "" } }, /^instance\.admin\.username: /],
      [{ ...base, admin: { ...admin, username: "with space" } }, /^instance\.admin\.username: /],
      [{ ...base, admin: { ...admin, password: "" } }, /^instance\.admin\.password: /],
      [
        { ...base, admin: { ...admin, password: "short" } },
        /^instance\.admin\.password: does not meet the password policy: needs at least \d+ characters/,
      ],
      [
        // long enough, but not the complexity every other password must have (users API, SetPassword)
        { ...base, admin: { ...admin, password: "alllowercase" } },
        /^instance\.admin\.password: does not meet the password policy: .*an uppercase letter/,
      ],
      [{ ...base, color: "blue" }, /color/],
    ];
    for (const [body, message] of cases) {
      const result = await rest("POST", INSTANCES, jsonOrRaw(body));
      assert.equal(result.status, 400, `${JSON.stringify(body)}: ${JSON.stringify(result.json)}`);
      assert.equal(result.json.code, 3);
      assert.match(result.json.message, message, JSON.stringify(body));
    }
    const id = platform.bootstrapResult!.instanceId;
    for (const [path, body, message] of [
      [`/${id}/_limit`, { audit_log_retention: "-5s" }, /^limits\.audit_log_retention: /],
      [`/${id}/_limit`, { block: "yes" }, /block/],
      ["/_bulk_limit", { block: true }, /^limits\.instance_ids: /],
      ["/_bulk_limit", { instance_ids: [""], block: true }, /^limits\.instance_ids\[0\]: /],
      ["/_search?query.limit=1001", [], /^query\.limit: /],
      ["/_search", [{ name: { name: "x", method: 99 } }], /^filters\[0\]\.name\.method: /],
    ] as const) {
      const result = await rest("POST", `${INSTANCES}${path}`, jsonOrRaw(body));
      assert.equal(result.status, 400, `${path} ${JSON.stringify(body)}: ${JSON.stringify(result.json)}`);
      assert.match(result.json.message, message);
    }
    // a domain another instance uses is ALREADY_EXISTS, all or nothing
    const taken = await rest("POST", INSTANCES, {
      json: newInstance("fresh.localhost", { domains: ["fresh.localhost", "LOCALHOST"] }),
    });
    assert.equal(taken.status, 409);
    assert.equal(taken.json.code, 6);
    assert.equal(await eventCount(platform), before);
    assert.equal(
      (await rest("GET", "/healthz", { token: null, host: `fresh.localhost:${port}` })).status,
      200,
    );
    assert.equal(
      (
        await rest("POST", "/resources/v3alpha/instances/_search", {
          host: `fresh.localhost:${port}`,
          json: [],
        })
      ).status,
      404,
    );
  });

  it("a patch of the name keeps domains, default organization and limits (REST and gRPC)", async () => {
    const created = await rest("POST", INSTANCES, {
      json: newInstance("presence-a.localhost", {
        domains: ["presence-a.localhost", "presence-b.localhost"],
      }),
    });
    assert.equal(created.status, 201, created.text);
    const id = created.json.details.id as string;
    const limited = await rest("POST", `${INSTANCES}/${id}/_limit`, {
      json: { audit_log_retention: "3600s" },
    });
    assert.equal(limited.status, 200, limited.text);
    const read = async () => ({
      ...(await rest("GET", `${INSTANCES}/${id}`)).json.instance,
      details: undefined,
    });
    const initial = await read();
    assert.equal((await rest("PATCH", `${INSTANCES}/${id}`, { json: { name: "Presence" } })).status, 200);
    assert.deepEqual(await read(), { ...initial, name: "Presence" });
    await grpcCall(platform, system, PlatformInstances, "PatchInstance", {
      id,
      instance: { name: "Presence 2" },
    });
    assert.deepEqual(await read(), { ...initial, name: "Presence 2" });
    await grpcCall(platform, system, PlatformInstances, "PatchInstance", { id, instance: {} });
    assert.deepEqual(await read(), { ...initial, name: "Presence 2" });
  });

  it("patches, searches (limit 1000, default page and order) and deletes instances", async () => {
    const a = (await rest("POST", INSTANCES, { json: newInstance("order-a.localhost") })).json.details
      .id as string;
    const b = (await rest("POST", INSTANCES, { json: newInstance("order-b.localhost") })).json.details
      .id as string;

    const before = await eventCount(platform);
    const current = await rest("GET", `${INSTANCES}/${a}`);
    for (const body of [{}, { name: "Tenant order-a.localhost" }]) {
      const same = await rest("PATCH", `${INSTANCES}/${a}`, jsonOrRaw(body));
      assert.equal(same.status, 200);
      assert.equal(same.json.details.sequence, current.json.instance.details.sequence);
    }
    assert.equal(await eventCount(platform), before, "a patch without changes stores nothing");
    const renamed = await rest("PATCH", `${INSTANCES}/${a}`, { json: { name: "Renamed A" } });
    assert.equal(renamed.status, 200);
    assert.equal((await rest("GET", `${INSTANCES}/${a}`)).json.instance.name, "Renamed A");
    assert.equal((await rest("PATCH", `${INSTANCES}/${a}`, { json: { name: "" } })).status, 400);

    const all = await rest("POST", `${INSTANCES}/_search`, { json: [] });
    assert.equal(all.status, 200);
    assert.equal(all.json.details.applied_limit, 100);
    assert.deepEqual(
      all.json.result.slice(0, 2).map((i: Json) => i.details.id),
      [b, a],
      "newest first",
    );
    assert.equal(all.json.result.at(-1).details.id, platform.bootstrapResult!.instanceId);
    assert.ok(BigInt(all.json.details.processed_sequence) > 0n);
    const max = await rest("POST", `${INSTANCES}/_search?query.limit=1000&query.asc=true`, { json: [] });
    assert.equal(max.status, 200);
    assert.equal(max.json.result[0].details.id, platform.bootstrapResult!.instanceId);
    const byDomain = await rest("POST", `${INSTANCES}/_search`, {
      json: [{ domains: { domains: ["ORDER-B.localhost"] } }],
    });
    assert.deepEqual(
      byDomain.json.result.map((i: Json) => i.details.id),
      [b],
    );
    const byName = await rest("POST", `${INSTANCES}/_search`, {
      json: [
        { name: { name: "renamed", method: "TEXT_FILTER_METHOD_STARTS_WITH_IGNORE_CASE" } },
        { in_ids: { ids: [a, b] } },
      ],
    });
    assert.deepEqual(
      byName.json.result.map((i: Json) => i.details.id),
      [a],
    );

    // A target of instance A: its signing key must not outlive the instance.
    const hostA = `order-a.localhost:${port}`;
    const target = await rest("POST", "/resources/v3alpha/targets", {
      token: await systemToken(),
      host: hostA,
      json: {
        name: "hook",
        rest_webhook: { url: "https://example.com/hook" },
        timeout: "5s",
        is_async: true,
      },
    });
    assert.equal(target.status, 201, target.text);
    const keysOf = async () =>
      (await platform.db.query("SELECT 1 FROM action_target_signing_keys WHERE instance_id = $1", [a]))
        .length;
    assert.equal(await keysOf(), 1);

    const deleted = await rest("DELETE", `${INSTANCES}/${a}`);
    assert.equal(deleted.status, 200);
    assert.equal(await keysOf(), 0, "signing keys are deleted with their instance");
    assert.equal((await rest("GET", `${INSTANCES}/${a}`)).status, 404);
    assert.equal((await rest("DELETE", `${INSTANCES}/${a}`)).status, 404);
    const host = `order-a.localhost:${port}`;
    const gone = await rest("POST", "/resources/v3alpha/organizations/_search", {
      token: await systemToken(),
      host,
      json: [],
    });
    assert.equal(gone.status, 404);
    assert.deepEqual(gone.json, { code: 5, message: "instance not found", details: [] });
    assert.equal(
      (await rest("POST", `/resources/v3alpha/organizations/_search?ctx.instance_id=${a}`, { json: [] }))
        .status,
      404,
    );
    // its domain is free again
    const reused = await rest("POST", INSTANCES, { json: newInstance("order-a.localhost") });
    assert.equal(reused.status, 201, JSON.stringify(reused.json));
  });

  it("a blocked instance answers 429 to API calls and a page to browsers until unblocked", async () => {
    const created = await rest("POST", INSTANCES, { json: newInstance("blocked.localhost") });
    const id = created.json.details.id as string;
    const host = `blocked.localhost:${port}`;
    const token = await systemToken();
    const probe = (accept?: string) =>
      rest("GET", "/resources/v3alpha/organizations/_instance_default", {
        token,
        host,
        headers: accept ? { accept } : {},
        raw: true,
      });
    assert.equal((await probe()).status, 200);

    const limited = await rest("POST", `${INSTANCES}/${id}/_limit`, {
      json: {
        block: true,
        audit_log_retention: "86400s",
      },
    });
    assert.equal(limited.status, 200, JSON.stringify(limited.json));
    const blocked = await probe();
    assert.equal(blocked.status, 429);
    assert.deepEqual(blocked.json, { code: 8, message: "the instance is blocked", details: [] });
    const page = await probe("text/html,application/xhtml+xml");
    assert.equal(page.status, 429);
    assert.match(String(page.headers["content-type"]), /^text\/html/);
    assert.match(page.text, /<h1>This instance is blocked<\/h1>/);
    assert.equal(
      (await rest("GET", "/anything", { token: null, host, headers: { accept: "text/html" }, raw: true }))
        .status,
      429,
    );
    // other instances are unaffected; the instances API stays reachable
    assert.equal(
      (await rest("POST", "/resources/v3alpha/organizations/_search", { token: iamOwner, json: [] })).status,
      200,
    );
    const got = await rest("GET", `${INSTANCES}/${id}`);
    assert.equal(got.json.instance.blocked, true);
    assert.equal(got.json.instance.audit_log_retention, "86400s");

    const before = await eventCount(platform);
    const same = await rest("POST", `${INSTANCES}/${id}/_limit`, { json: { block: true } });
    assert.equal(same.json.details.sequence, limited.json.details.sequence);
    assert.equal((await rest("POST", `${INSTANCES}/${id}/_limit`, { json: {} })).status, 200);
    assert.equal(await eventCount(platform), before, "unchanged limits store nothing");

    const unblocked = await rest("POST", `${INSTANCES}/${id}/_limit`, { json: { block: false } });
    assert.equal(unblocked.status, 200);
    assert.equal((await probe()).status, 200);
    assert.equal((await rest("GET", `${INSTANCES}/${id}`)).json.instance.audit_log_retention, "86400s");

    // bulk: all or nothing
    const other = (await rest("POST", INSTANCES, { json: newInstance("bulk.localhost") })).json.details
      .id as string;
    const beforeBulk = await eventCount(platform);
    const unknown = await rest("POST", `${INSTANCES}/_bulk_limit`, {
      json: {
        instance_ids: [id, "4242"],
        block: true,
      },
    });
    assert.equal(unknown.status, 404);
    assert.equal(await eventCount(platform), beforeBulk);
    const bulk = await rest("POST", `${INSTANCES}/_bulk_limit`, {
      json: {
        instance_ids: [id, other],
        block: true,
        audit_log_retention: "0s",
      },
    });
    assert.equal(bulk.status, 200, JSON.stringify(bulk.json));
    assert.deepEqual(
      bulk.json.details.map((d: Json) => d.id),
      [id, other],
    );
    assert.equal((await probe()).status, 429);
    assert.equal(
      (
        await rest("GET", "/resources/v3alpha/organizations/_instance_default", {
          token: await systemToken(),
          host: `bulk.localhost:${port}`,
        })
      ).status,
      429,
    );
    assert.equal((await rest("GET", `${INSTANCES}/${id}`)).json.instance.audit_log_retention, undefined);
    assert.equal(
      (await rest("POST", `${INSTANCES}/_bulk_limit`, { json: { instance_ids: [id, other], block: false } }))
        .status,
      200,
    );
    assert.equal((await probe()).status, 200);
  });
});
