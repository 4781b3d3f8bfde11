import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import {
  addMachineUser,
  addOrg,
  eventCount,
  type Json,
  jsonOrRaw,
  restClient,
  startPlatform,
  type TestPlatform,
} from "../../../test/helpers.ts";
import { CHALLENGE_PATH, NetworkDomainVerifier } from "./verifier.ts";

const DOMAINS = "/resources/v3alpha/domains";

describe("domains API", () => {
  let platform: TestPlatform;
  let owner: string;
  let orgId: string;
  let challengeServer: http.Server;
  /** What the local challenge server answers, by token. */
  const published = new Map<string, string>();
  /** TXT records of the stub resolver, by name. */
  const txt = new Map<string, string[][]>();

  const rest = restClient(
    () => platform,
    () => owner,
  );
  const addDomain = async (domain: string, org = orgId, token = owner) => {
    const result = await rest("POST", `${DOMAINS}?ctx.org_id=${org}`, { token, json: { domain } });
    assert.equal(result.status, 201, JSON.stringify(result.json));
    return { id: result.json.details.id as string, token: result.json.validation_token as string };
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
      allowPrivateAddresses: true,
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
    const created = await rest("POST", `${DOMAINS}?ctx.org_id=${orgId}`, {
      json: { domain: "Login.Example.COM" },
    });
    assert.equal(created.status, 201);
    const id = created.json.details.id as string;
    const token = created.json.validation_token as string;
    assert.ok(token.length >= 20);
    assert.deepEqual(created.json.details.resource_owner, { type: "OWNER_TYPE_ORG", id: orgId });

    const got = await rest("GET", `${DOMAINS}/${id}`);
    assert.equal(got.status, 200);
    assert.equal(got.json.domain.domain.domain, "login.example.com");
    assert.equal(got.json.domain.is_verified, false);
    assert.equal(got.json.domain.is_primary, false);
    assert.equal(got.json.domain.validation_token, token);

    const dup = await rest("POST", `${DOMAINS}?ctx.org_id=${orgId}`, {
      json: { domain: "login.example.com" },
    });
    assert.equal(dup.status, 409);

    const listed = await rest("POST", `${DOMAINS}/_search?ctx.org_id=${orgId}&query.asc=true`, { json: [] });
    assert.equal(listed.status, 200);
    assert.deepEqual(
      listed.json.result.map((d: Json) => [d.domain.domain, d.is_verified, d.is_primary, d.is_generated]),
      [
        ["domain-org.localhost", true, true, true],
        ["login.example.com", false, false, false],
      ],
    );
    const unverified = await rest("POST", `${DOMAINS}/_search?ctx.org_id=${orgId}`, {
      json: [{ verified: { is_verified: false } }],
    });
    assert.deepEqual(
      unverified.json.result.map((d: Json) => d.details.id),
      [id],
    );

    let before = await eventCount(platform);
    const notYet = await rest("POST", `${DOMAINS}/${id}/_set_as_primary`);
    assert.equal(notYet.status, 400);
    assert.equal(notYet.json.code, 9);
    assert.match(notYet.json.message, /verified/);
    const missing = await rest("POST", `${DOMAINS}/${id}/_validate`, {
      json: { method: "DOMAIN_VALIDATION_TYPE_HTTP" },
    });
    assert.equal(missing.status, 400);
    assert.equal(missing.json.code, 9);
    assert.match(missing.json.message, /domain validation failed: .*answered 404/);
    published.set(token, "something else");
    const wrong = await rest("POST", `${DOMAINS}/${id}/_validate`, {
      json: { method: "DOMAIN_VALIDATION_TYPE_HTTP" },
    });
    assert.equal(wrong.status, 400);
    assert.match(wrong.json.message, /does not contain the validation token/);
    assert.equal(await eventCount(platform), before);

    published.set(token, `${token}\n`);
    const validated = await rest("POST", `${DOMAINS}/${id}/_validate`, {
      json: { method: "DOMAIN_VALIDATION_TYPE_HTTP" },
    });
    assert.equal(validated.status, 200, JSON.stringify(validated.json));
    assert.equal((await rest("GET", `${DOMAINS}/${id}`)).json.domain.is_verified, true);
    before = await eventCount(platform);
    const again = await rest("POST", `${DOMAINS}/${id}/_validate`, {
      json: { method: "DOMAIN_VALIDATION_TYPE_HTTP" },
    });
    assert.equal(again.status, 200);
    assert.equal(again.json.details.sequence, validated.json.details.sequence);
    assert.equal(await eventCount(platform), before, "validating a verified domain stores nothing");

    const primary = await rest("POST", `${DOMAINS}/${id}/_set_as_primary`);
    assert.equal(primary.status, 200);
    const org = await fetch(`${platform.url}/resources/v3alpha/organizations/${orgId}`, {
      headers: { authorization: `Bearer ${owner}` },
    });
    assert.equal(((await org.json()) as Json).organization.primary_domain, "login.example.com");
    // the verified domain selects the organization as context
    const byDomain = await rest("POST", `${DOMAINS}/_search?ctx.org_domain=login.example.com`, { json: [] });
    assert.equal(byDomain.json.result.length, 2);

    const undeletable = await rest("DELETE", `${DOMAINS}/${id}`);
    assert.equal(undeletable.status, 400);
    assert.equal(undeletable.json.code, 9);
    const generated = listed.json.result[0].details.id as string;
    assert.equal((await rest("POST", `${DOMAINS}/${generated}/_set_as_primary`)).status, 200);
    const deleted = await rest("DELETE", `${DOMAINS}/${id}`);
    assert.equal(deleted.status, 200);
    assert.equal((await rest("GET", `${DOMAINS}/${id}`)).status, 404);
    assert.equal((await rest("DELETE", `${DOMAINS}/${id}`)).status, 404);
  });

  it("validates by DNS TXT record; a verified domain belongs to one organization of the instance", async () => {
    const other = await addOrg(platform, "Other Domain Org");
    const mine = await addDomain("shared.example.net");
    const theirs = await addDomain("shared.example.net", other);
    const failed = await rest("POST", `${DOMAINS}/${mine.id}/_validate`, {
      json: {
        method: "DOMAIN_VALIDATION_TYPE_DNS",
      },
    });
    assert.equal(failed.status, 400);
    assert.match(failed.json.message, /no TXT record _platform-challenge\.shared\.example\.net/);
    txt.set("_platform-challenge.shared.example.net", [
      ["v=other"],
      [mine.token.slice(0, 10), mine.token.slice(10)],
      [theirs.token],
    ]);
    const ok = await rest("POST", `${DOMAINS}/${mine.id}/_validate`, {
      json: { method: "DOMAIN_VALIDATION_TYPE_DNS" },
    });
    assert.equal(ok.status, 200, JSON.stringify(ok.json));
    const before = await eventCount(platform);
    const taken = await rest("POST", `${DOMAINS}/${theirs.id}/_validate`, {
      json: {
        method: "DOMAIN_VALIDATION_TYPE_DNS",
      },
    });
    assert.equal(taken.status, 409);
    assert.equal(taken.json.code, 6);
    assert.equal(await eventCount(platform), before);
    // released when removed: the other org can verify it then
    assert.equal((await rest("DELETE", `${DOMAINS}/${mine.id}`)).status, 200);
    assert.equal(
      (
        await rest("POST", `${DOMAINS}/${theirs.id}/_validate`, {
          json: { method: "DOMAIN_VALIDATION_TYPE_DNS" },
        })
      ).status,
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
      const result = await rest(method, `${DOMAINS}${path}`, jsonOrRaw(body));
      assert.equal(result.status, 400, `${path} ${JSON.stringify(body)}: ${JSON.stringify(result.json)}`);
      assert.equal(result.json.code, 3);
      assert.match(result.json.message, message, `${path} ${JSON.stringify(body)}`);
    }
    assert.equal(
      (await rest("POST", `${DOMAINS}?ctx.org_id=4242`, { json: { domain: "a.example.org" } })).status,
      404,
    );
    assert.equal(await eventCount(platform), before);
  });

  it("search: limit 1000 accepted, default page size 100 newest first", async () => {
    const org = await addOrg(platform, "Many Domains");
    for (let i = 0; i < 102; i++) await addDomain(`d${i}.many.example`, org);
    const page = await rest("POST", `${DOMAINS}/_search?ctx.org_id=${org}`, { json: [] });
    assert.equal(page.status, 200);
    assert.equal(page.json.result.length, 100);
    assert.equal(page.json.details.total_result, "103");
    assert.equal(page.json.details.end_of_list, false);
    assert.equal(page.json.result[0].domain.domain, "d101.many.example");
    assert.equal(page.json.result[1].domain.domain, "d100.many.example");
    const all = await rest("POST", `${DOMAINS}/_search?ctx.org_id=${org}&query.limit=1000`, { json: [] });
    assert.equal(all.status, 200);
    assert.equal(all.json.result.length, 103);
    assert.equal(all.json.details.end_of_list, true);
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
    const seen = await rest("POST", `${DOMAINS}/_search`, { token: ownerA, json: [] });
    assert.deepEqual(seen.json.result.map((d: Json) => d.domain.domain).sort(), [
      "a.visible.example",
      "domains-a.localhost",
    ]);
    assert.equal((await rest("GET", `${DOMAINS}/${a.id}`, { token: ownerA })).status, 200);
    const before = await eventCount(platform);
    // A domain of an organization the caller may not read is unknown to it.
    const hidden = await rest("GET", `${DOMAINS}/${b.id}`, { token: ownerA });
    assert.equal(hidden.status, 404);
    assert.deepEqual(hidden.json, { code: 5, message: "domain not found", details: [] });
    assert.equal(
      (await rest("POST", `${DOMAINS}/_search?ctx.org_id=${orgB}`, { token: ownerA, json: [] })).status,
      403,
    );
    assert.equal(
      (
        await rest("POST", `${DOMAINS}?ctx.org_id=${orgB}`, {
          token: ownerA,
          json: { domain: "c.visible.example" },
        })
      ).status,
      403,
    );
    assert.equal((await rest("DELETE", `${DOMAINS}/${b.id}`, { token: ownerA })).status, 404);
    assert.equal(
      (
        await rest("POST", `${DOMAINS}/${b.id}/_validate`, {
          token: ownerA,
          json: { method: "DOMAIN_VALIDATION_TYPE_HTTP" },
        })
      ).status,
      404,
    );
    assert.equal((await rest("POST", `${DOMAINS}/${b.id}/_set_as_primary`, { token: ownerA })).status, 404);
    assert.equal(await eventCount(platform), before);
    // Readable but not writable: 403.
    const { token: viewerB } = await addMachineUser(platform, {
      username: "domains-viewer-b",
      orgId: orgB,
      membership: { contextType: "org", contextId: orgB, roles: ["ORG_OWNER_VIEWER"] },
    });
    const beforeViewer = await eventCount(platform);
    assert.equal((await rest("GET", `${DOMAINS}/${b.id}`, { token: viewerB })).status, 200);
    assert.equal((await rest("DELETE", `${DOMAINS}/${b.id}`, { token: viewerB })).status, 403);
    assert.equal((await rest("POST", `${DOMAINS}/${b.id}/_set_as_primary`, { token: viewerB })).status, 403);
    assert.equal(await eventCount(platform), beforeViewer);
  });
});

describe("domain validation never probes the server's own network", () => {
  it("refuses HTTP challenges on private addresses by default, without fetching", async () => {
    let fetched = false;
    const server = http.createServer((_req, res) => {
      fetched = true;
      res.end("token");
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const port = (server.address() as { port: number }).port;
    try {
      const literal = new NetworkDomainVerifier({ httpOrigins: () => [`http://127.0.0.1:${port}`] });
      await assert.rejects(
        literal.verify("http", "127.0.0.1", "token"),
        /127\.0\.0\.1 is a loopback address/,
      );
      const named = new NetworkDomainVerifier({
        httpOrigins: (domain) => [`http://${domain}:${port}`],
        lookup: async () => ["10.0.0.5"],
      });
      await assert.rejects(
        named.verify("http", "intranet.example", "token"),
        /intranet\.example resolves to a private/,
      );
      assert.equal(fetched, false);
    } finally {
      server.close();
    }
  });

  it("connects to the very address it checked: no second DNS answer between check and connection", async () => {
    const hosts: string[] = [];
    const server = http.createServer((req, res) => {
      hosts.push(String(req.headers.host));
      res.end("the-token");
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const port = (server.address() as { port: number }).port;
    try {
      // challenge.test exists only in this lookup: were it resolved again to connect, the fetch would fail
      const lookups: string[] = [];
      const verifier = new NetworkDomainVerifier({
        httpOrigins: (domain) => [`http://${domain}:${port}`],
        allowPrivateAddresses: true,
        lookup: async (host) => {
          lookups.push(host);
          return ["127.0.0.1"];
        },
      });
      await verifier.verify("http", "challenge.test", "the-token");
      assert.deepEqual(lookups, ["challenge.test"]);
      assert.deepEqual(hosts, [`challenge.test:${port}`], "the URL's host still goes out as Host");
    } finally {
      server.close();
    }
  });
});
