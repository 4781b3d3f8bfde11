import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import {
  addMachineUser,
  addOrg,
  eventCount,
  startPlatform,
  type TestPlatform,
} from "../../../test/helpers.ts";
import { CHALLENGE_PATH, NetworkDomainVerifier } from "./verifier.ts";

// biome-ignore lint/suspicious/noExplicitAny: JSON answers
type Json = Record<string, any>;

describe("domains API", () => {
  let platform: TestPlatform;
  let owner: string;
  let orgId: string;
  let challengeServer: http.Server;
  /** What the local challenge server answers, by token. */
  const published = new Map<string, string>();
  /** TXT records of the stub resolver, by name. */
  const txt = new Map<string, string[][]>();

  const api = async (method: string, path: string, token: string, body?: unknown) => {
    const response = await fetch(`${platform.url}/resources/v3alpha/domains${path}`, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        ...(body !== undefined ? { "content-type": "application/json" } : {}),
      },
      body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
    });
    return { status: response.status, body: (await response.json()) as Json };
  };
  const addDomain = async (domain: string, org = orgId, token = owner) => {
    const result = await api("POST", `?ctx.org_id=${org}`, token, { domain });
    assert.equal(result.status, 201, JSON.stringify(result.body));
    return { id: result.body.details.id as string, token: result.body.validation_token as string };
  };

  before(async () => {
    platform = await startPlatform({ listen: true });
    ({ token: owner } = await addMachineUser(platform, {
      username: "domain-admin",
      membership: { contextType: "instance", roles: ["IAM_OWNER"] },
    }));
    orgId = await addOrg(platform, "Domain Org");
    challengeServer = http.createServer((req, res) => {
      const token = decodeURIComponent(req.url?.slice(CHALLENGE_PATH.length).replace(/\.txt$/, "") ?? "");
      const body = req.url?.startsWith(CHALLENGE_PATH) ? published.get(token) : undefined;
      if (body === undefined) res.writeHead(404).end("not found");
      else res.writeHead(200, { "content-type": "text/plain" }).end(body);
    });
    await new Promise<void>((resolve) => challengeServer.listen(0, "127.0.0.1", resolve));
    const port = (challengeServer.address() as AddressInfo).port;
    // Never the network: HTTP challenges go to the local server, DNS lookups to the stub.
    platform.deps.domainVerifier = new NetworkDomainVerifier({
      httpOrigins: () => [`http://127.0.0.1:${port}`],
      resolveTxt: async (name) => {
        const records = txt.get(name);
        if (!records) throw Object.assign(new Error(`queryTxt ENOTFOUND ${name}`), { code: "ENOTFOUND" });
        return records;
      },
      timeoutMs: 2_000,
    });
  });
  after(async () => {
    await platform.stop();
    await new Promise((resolve) => challengeServer.close(resolve));
  });

  it("adds, reads, searches, validates over HTTP, sets as primary and deletes a domain", async () => {
    const created = await api("POST", `?ctx.org_id=${orgId}`, owner, { domain: "Login.Example.COM" });
    assert.equal(created.status, 201);
    const id = created.body.details.id as string;
    const token = created.body.validation_token as string;
    assert.ok(token.length >= 20);
    assert.deepEqual(created.body.details.resource_owner, { type: "OWNER_TYPE_ORG", id: orgId });

    const got = await api("GET", `/${id}`, owner);
    assert.equal(got.status, 200);
    assert.equal(got.body.domain.domain.domain, "login.example.com");
    assert.equal(got.body.domain.is_verified, false);
    assert.equal(got.body.domain.is_primary, false);
    assert.equal(got.body.domain.validation_token, token);

    const dup = await api("POST", `?ctx.org_id=${orgId}`, owner, { domain: "login.example.com" });
    assert.equal(dup.status, 409);

    const listed = await api("POST", `/_search?ctx.org_id=${orgId}&query.asc=true`, owner, []);
    assert.equal(listed.status, 200);
    assert.deepEqual(
      listed.body.result.map((d: Json) => [d.domain.domain, d.is_verified, d.is_primary, d.is_generated]),
      [
        ["domain-org.localhost", true, true, true],
        ["login.example.com", false, false, false],
      ],
    );
    const unverified = await api("POST", `/_search?ctx.org_id=${orgId}`, owner, [
      { verified: { is_verified: false } },
    ]);
    assert.deepEqual(
      unverified.body.result.map((d: Json) => d.details.id),
      [id],
    );

    let before = await eventCount(platform);
    const notYet = await api("POST", `/${id}/_set_as_primary`, owner);
    assert.equal(notYet.status, 400);
    assert.equal(notYet.body.code, 9);
    assert.match(notYet.body.message, /verified/);
    const missing = await api("POST", `/${id}/_validate`, owner, { method: "DOMAIN_VALIDATION_TYPE_HTTP" });
    assert.equal(missing.status, 400);
    assert.equal(missing.body.code, 9);
    assert.match(missing.body.message, /domain validation failed: .*answered 404/);
    published.set(token, "something else");
    const wrong = await api("POST", `/${id}/_validate`, owner, { method: "DOMAIN_VALIDATION_TYPE_HTTP" });
    assert.equal(wrong.status, 400);
    assert.match(wrong.body.message, /does not contain the validation token/);
    assert.equal(await eventCount(platform), before);

    published.set(token, `${token}\n`);
    const validated = await api("POST", `/${id}/_validate`, owner, { method: "DOMAIN_VALIDATION_TYPE_HTTP" });
    assert.equal(validated.status, 200, JSON.stringify(validated.body));
    assert.equal((await api("GET", `/${id}`, owner)).body.domain.is_verified, true);
    before = await eventCount(platform);
    const again = await api("POST", `/${id}/_validate`, owner, { method: "DOMAIN_VALIDATION_TYPE_HTTP" });
    assert.equal(again.status, 200);
    assert.equal(again.body.details.sequence, validated.body.details.sequence);
    assert.equal(await eventCount(platform), before, "validating a verified domain stores nothing");

    const primary = await api("POST", `/${id}/_set_as_primary`, owner);
    assert.equal(primary.status, 200);
    const org = await fetch(`${platform.url}/resources/v3alpha/organizations/${orgId}`, {
      headers: { authorization: `Bearer ${owner}` },
    });
    assert.equal(((await org.json()) as Json).organization.primary_domain, "login.example.com");
    // the verified domain selects the organization as context
    const byDomain = await api("POST", "/_search?ctx.org_domain=login.example.com", owner, []);
    assert.equal(byDomain.body.result.length, 2);

    const undeletable = await api("DELETE", `/${id}`, owner);
    assert.equal(undeletable.status, 400);
    assert.equal(undeletable.body.code, 9);
    const generated = listed.body.result[0].details.id as string;
    assert.equal((await api("POST", `/${generated}/_set_as_primary`, owner)).status, 200);
    const deleted = await api("DELETE", `/${id}`, owner);
    assert.equal(deleted.status, 200);
    assert.equal((await api("GET", `/${id}`, owner)).status, 404);
    assert.equal((await api("DELETE", `/${id}`, owner)).status, 404);
  });

  it("validates by DNS TXT record; a verified domain belongs to one organization of the instance", async () => {
    const other = await addOrg(platform, "Other Domain Org");
    const mine = await addDomain("shared.example.net");
    const theirs = await addDomain("shared.example.net", other);
    const failed = await api("POST", `/${mine.id}/_validate`, owner, {
      method: "DOMAIN_VALIDATION_TYPE_DNS",
    });
    assert.equal(failed.status, 400);
    assert.match(failed.body.message, /no TXT record _platform-challenge\.shared\.example\.net/);
    txt.set("_platform-challenge.shared.example.net", [
      ["v=other"],
      [mine.token.slice(0, 10), mine.token.slice(10)],
      [theirs.token],
    ]);
    const ok = await api("POST", `/${mine.id}/_validate`, owner, { method: "DOMAIN_VALIDATION_TYPE_DNS" });
    assert.equal(ok.status, 200, JSON.stringify(ok.body));
    const before = await eventCount(platform);
    const taken = await api("POST", `/${theirs.id}/_validate`, owner, {
      method: "DOMAIN_VALIDATION_TYPE_DNS",
    });
    assert.equal(taken.status, 409);
    assert.equal(taken.body.code, 6);
    assert.equal(await eventCount(platform), before);
    // released when removed: the other org can verify it then
    assert.equal((await api("DELETE", `/${mine.id}`, owner)).status, 200);
    assert.equal(
      (await api("POST", `/${theirs.id}/_validate`, owner, { method: "DOMAIN_VALIDATION_TYPE_DNS" })).status,
      200,
    );
  });

  it("rejects bad input naming the field, storing nothing", async () => {
    const { id } = await addDomain("input.example.org");
    const before = await eventCount(platform);
    const cases: Array<[string, string, unknown, RegExp]> = [
      ["POST", `?ctx.org_id=${orgId}`, "", /domain/],
      ["POST", `?ctx.org_id=${orgId}`, {}, /^domain\.domain: /],
      ["POST", `?ctx.org_id=${orgId}`, { domain: "" }, /^domain\.domain: /],
      ["POST", `?ctx.org_id=${orgId}`, { domain: "not a domain" }, /^domain\.domain: must match/],
      ["POST", `?ctx.org_id=${orgId}`, { domain: "nodot" }, /^domain\.domain: must match/],
      ["POST", `?ctx.org_id=${orgId}`, { domain: `${"a".repeat(250)}.com` }, /^domain\.domain: /],
      ["POST", `?ctx.org_id=${orgId}`, { domain: 42 }, /domain/],
      ["POST", `?ctx.org_id=${orgId}`, { domain: "a.example.org", extra: true }, /extra/],
      ["POST", `/${id}/_validate`, {}, /^validation\.method: /],
      ["POST", `/${id}/_validate`, "", /^validation: /],
      ["POST", `/${id}/_validate`, { method: 7 }, /^validation\.method: /],
      [
        "POST",
        `/${id}/_validate`,
        { method: "DOMAIN_VALIDATION_TYPE_CARRIER_PIGEON" },
        /^validation\.method: /,
      ],
      ["POST", "/_search", [{ domain: { domain: "x", method: 42 } }], /^filters\[0\]\.domain\.method: /],
      ["POST", "/_search?query.limit=1001", [], /^query\.limit: /],
    ];
    for (const [method, path, body, message] of cases) {
      const result = await api(method, path, owner, body);
      assert.equal(result.status, 400, `${path} ${JSON.stringify(body)}: ${JSON.stringify(result.body)}`);
      assert.equal(result.body.code, 3);
      assert.match(result.body.message, message, `${path} ${JSON.stringify(body)}`);
    }
    assert.equal((await api("POST", "?ctx.org_id=4242", owner, { domain: "a.example.org" })).status, 404);
    assert.equal(await eventCount(platform), before);
  });

  it("search: limit 1000 accepted, default page size 100 newest first", async () => {
    const org = await addOrg(platform, "Many Domains");
    for (let i = 0; i < 102; i++) await addDomain(`d${i}.many.example`, org);
    const page = await api("POST", `/_search?ctx.org_id=${org}`, owner, []);
    assert.equal(page.status, 200);
    assert.equal(page.body.result.length, 100);
    assert.equal(page.body.details.total_result, "103");
    assert.equal(page.body.details.end_of_list, false);
    assert.equal(page.body.result[0].domain.domain, "d101.many.example");
    assert.equal(page.body.result[1].domain.domain, "d100.many.example");
    const all = await api("POST", `/_search?ctx.org_id=${org}&query.limit=1000`, owner, []);
    assert.equal(all.status, 200);
    assert.equal(all.body.result.length, 103);
    assert.equal(all.body.details.end_of_list, true);
  });

  it("callers see and change only the domains of organizations they may", async () => {
    const orgA = await addOrg(platform, "Domains A");
    const orgB = await addOrg(platform, "Domains B");
    const { token: ownerA } = await addMachineUser(platform, {
      username: "domains-owner-a",
      orgId: orgA,
      membership: { contextType: "org", contextId: orgA, roles: ["ORG_OWNER"] },
    });
    const a = await addDomain("a.visible.example", orgA, ownerA);
    const b = await addDomain("b.visible.example", orgB);
    const seen = await api("POST", "/_search", ownerA, []);
    assert.deepEqual(seen.body.result.map((d: Json) => d.domain.domain).sort(), [
      "a.visible.example",
      "domains-a.localhost",
    ]);
    assert.equal((await api("GET", `/${a.id}`, ownerA)).status, 200);
    const before = await eventCount(platform);
    // A domain of an organization the caller may not read is unknown to it (contract.md §1).
    const hidden = await api("GET", `/${b.id}`, ownerA);
    assert.equal(hidden.status, 404);
    assert.deepEqual(hidden.body, { code: 5, message: "domain not found", details: [] });
    assert.equal((await api("POST", `/_search?ctx.org_id=${orgB}`, ownerA, [])).status, 403);
    assert.equal(
      (await api("POST", `?ctx.org_id=${orgB}`, ownerA, { domain: "c.visible.example" })).status,
      403,
    );
    assert.equal((await api("DELETE", `/${b.id}`, ownerA)).status, 404);
    assert.equal(
      (await api("POST", `/${b.id}/_validate`, ownerA, { method: "DOMAIN_VALIDATION_TYPE_HTTP" })).status,
      404,
    );
    assert.equal((await api("POST", `/${b.id}/_set_as_primary`, ownerA)).status, 404);
    assert.equal(await eventCount(platform), before);
    // Readable but not writable: 403.
    const { token: viewerB } = await addMachineUser(platform, {
      username: "domains-viewer-b",
      orgId: orgB,
      membership: { contextType: "org", contextId: orgB, roles: ["ORG_OWNER_VIEWER"] },
    });
    const beforeViewer = await eventCount(platform);
    assert.equal((await api("GET", `/${b.id}`, viewerB)).status, 200);
    assert.equal((await api("DELETE", `/${b.id}`, viewerB)).status, 403);
    assert.equal((await api("POST", `/${b.id}/_set_as_primary`, viewerB)).status, 403);
    assert.equal(await eventCount(platform), beforeViewer);
  });
});
