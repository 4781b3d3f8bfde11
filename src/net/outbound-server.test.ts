/**
 * The outbound-address policy through the server: action targets (configured by the instance) and
 * identity providers (configured by the instance or by an organization), with the default policy, with
 * PLATFORM_OUTBOUND_ALLOW_PRIVATE=all and with =none. Host names resolve through the platform's resolver
 * seam (`resolve` of createPlatform): `*.test` names answer the addresses below.
 */
import assert from "node:assert/strict";
import type { LookupAddress } from "node:dns";
import http from "node:http";
import net from "node:net";
import { after, before, describe, it } from "node:test";
import { Code } from "@connectrpc/connect";
import {
  addMachineUser,
  assertRpcError,
  eventCount,
  type RestCall,
  restClient,
  startPlatform,
  type TestPlatform,
} from "../../test/helpers.ts";
import { actionsClient } from "../execution/testing.ts";
import type { Resolve } from "./outbound.ts";

const CREATE_USER = "/platform.resources.user.v3alpha.PlatformUsers/CreateUser";

const NAMES: Record<string, string[]> = {
  "metadata.test": ["169.254.169.254"],
  "link-local.test": ["169.254.3.3"],
  "mixed.test": ["93.184.216.34", "fe80::1"],
  "local.test": ["127.0.0.1"],
};
const resolve: Resolve = async (hostname) => {
  const addresses = NAMES[hostname];
  if (!addresses) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: "ENOTFOUND" });
  return addresses.map((address): LookupAddress => ({ address, family: net.isIP(address) }));
};

/** A local HTTP server recording the paths it was asked for. */
interface LocalServer {
  port: number;
  url: string;
  paths: string[];
  close(): Promise<void>;
}

async function localServer(
  handle: (req: http.IncomingMessage, res: http.ServerResponse, url: string) => void,
): Promise<LocalServer> {
  const paths: string[] = [];
  const server = http.createServer((req, res) => {
    paths.push(req.url ?? "");
    req.resume();
    req.on("end", () => handle(req, res, local.url));
  });
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  const port = (server.address() as net.AddressInfo).port;
  const local: LocalServer = {
    port,
    url: `http://127.0.0.1:${port}`,
    paths,
    close: async () => {
      server.closeAllConnections();
      await new Promise((done) => server.close(done));
    },
  };
  return local;
}

/** A provider's discovery document (the sign-in's first request), and redirects for the redirect tests. */
const idpHandler = (req: http.IncomingMessage, res: http.ServerResponse, url: string) => {
  if (req.url === "/.well-known/openid-configuration") {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(
      JSON.stringify({
        issuer: url,
        authorization_endpoint: `${url}/authorize`,
        token_endpoint: `${url}/token`,
        jwks_uri: `${url}/jwks`,
        response_types_supported: ["code"],
        subject_types_supported: ["public"],
        id_token_signing_alg_values_supported: ["RS256"],
      }),
    );
  } else if (req.url === "/moved/.well-known/openid-configuration") {
    res.writeHead(302, { location: `${url}/.well-known/openid-configuration` }).end();
  } else if (req.url === "/to-metadata") {
    res.writeHead(302, { location: "http://169.254.169.254/latest/meta-data/iam/" }).end();
  } else if (req.url === "/to-landing") {
    res.writeHead(307, { location: "/landing" }).end();
  } else {
    res.writeHead(200, { "content-type": "application/json" }).end("{}");
  }
};

/** The API and sign-in calls the tests make, as an IAM_OWNER of `platform`. */
async function callsOf(platform: TestPlatform) {
  const owner = await addMachineUser(platform, {
    username: "outbound-owner",
    membership: { contextType: "instance", roles: ["IAM_OWNER"] },
  });
  const rest: RestCall = restClient(platform, () => owner.token);
  const actions = actionsClient(platform, owner.token);
  const orgId = platform.bootstrapResult!.orgId;
  let n = 0;
  return {
    /** A target called on CreateUser (interrupting); answers the reply of one CreateUser. */
    async callTarget(url: string) {
      const { id } = await actions.target(`outbound-${++n}`, url, { timeout: "2s" });
      await actions.execution({ request: { method: CREATE_USER } }, [id]);
      const before = await eventCount(platform);
      const reply = await rest("POST", "/resources/v3alpha/users", {
        json: {
          username: `outbound-user-${n}`,
          human: {
            profile: { given_name: "A", family_name: "B" },
            email: { address: `outbound-${n}@example.com`, is_verified: true },
          },
        },
      });
      return { id, reply, stored: (await eventCount(platform)) - before };
    },
    /** An identity provider (of the default organization with `org`, else of the instance); its ID. */
    async provider(type: "oidc" | "codehost_b", issuer: string | undefined, org: boolean): Promise<string> {
      const created = await rest(
        "POST",
        `/resources/v3alpha/idps/${type}${org ? `?ctx.org_id=${orgId}` : ""}`,
        {
          json: {
            idp: { name: `Provider ${++n}` },
            config: {
              ...(issuer === undefined ? {} : { issuer }),
              client_id: `client-${n}`,
              client_secret: "secret",
              scopes: ["openid"],
            },
          },
        },
      );
      assert.equal(created.status, 201, created.text);
      return created.json.details.id;
    },
    /** Opens the provider's sign-in: the server fetches its discovery document, then redirects to it. */
    async startSignIn(idpId: string): Promise<{ status: number; location: string | null }> {
      const response = await fetch(`${platform.url}/ui/login/idp/start?idp=${idpId}`, { redirect: "manual" });
      await response.text();
      return { status: response.status, location: response.headers.get("location") };
    },
  };
}

describe("outbound connections with the default policy", () => {
  let platform: TestPlatform;
  let local: LocalServer;
  let calls: Awaited<ReturnType<typeof callsOf>>;

  before(async () => {
    local = await localServer(idpHandler);
    platform = await startPlatform({
      listen: true,
      resolve,
      // the operator's issuer of codehost_b providers: a local one
      env: { PLATFORM_IDP_CODEHOST_B_ISSUER: local.url },
    });
    calls = await callsOf(platform);
  });
  after(async () => {
    await platform.stop();
    await local.close();
  });

  it("a target at a link-local, metadata, unspecified, multicast or broadcast address is refused, in any spelling; nothing is called", async () => {
    const metadata = "169.254.169.254 is a cloud metadata address, closed to every outbound connection";
    for (const [url, message] of [
      ["http://169.254.169.254/latest/meta-data/", metadata],
      ["http://2852039166/latest/meta-data/", metadata],
      ["http://0251.0376.0251.0376/", metadata],
      ["http://0xa9.0xfe.0xa9.0xfe/", metadata],
      ["http://[::ffff:169.254.169.254]/", "::ffff:a9fe:a9fe is a cloud metadata address"],
      ["http://[64:ff9b::169.254.169.254]/", "64:ff9b::a9fe:a9fe is a cloud metadata address"],
      ["http://[fd00:ec2::254]/latest/meta-data/", "fd00:ec2::254 is a cloud metadata address"],
      ["http://100.100.100.200/latest/meta-data/", "100.100.100.200 is a cloud metadata address"],
      ["http://169.254.10.1/", "169.254.10.1 is a link-local address"],
      ["http://[fe80::1]/", "fe80::1 is a link-local address"],
      [`http://0.0.0.0:${local.port}/unspecified`, "0.0.0.0 is an unspecified address"],
      [`http://[::]:${local.port}/unspecified`, ":: is an unspecified address"],
      ["http://224.0.0.1/", "224.0.0.1 is a multicast address"],
      ["http://[ff02::1]/", "ff02::1 is a multicast address"],
      ["http://255.255.255.255/", "255.255.255.255 is a reserved or broadcast address"],
    ]) {
      const { id, reply, stored } = await calls.callTarget(url);
      assertRpcError(reply, 400, Code.FailedPrecondition, `target outbound-`);
      assert.ok(reply.json.message.includes(`(${id}) ${message}`), `${url}: ${reply.json.message}`);
      assert.equal(stored, 0, url);
    }
    assert.deepEqual(local.paths, [], "0.0.0.0 and :: would have reached the local server");
  });

  it("a target whose host name resolves to a link-local or metadata address is refused, also when only one of its addresses is", async () => {
    for (const [host, kind] of [
      ["metadata.test", "a cloud metadata"],
      ["link-local.test", "a link-local"],
      ["mixed.test", "a link-local"],
    ]) {
      const { id, reply, stored } = await calls.callTarget(`http://${host}/latest/meta-data/`);
      assertRpcError(reply, 400, Code.FailedPrecondition);
      assert.ok(
        reply.json.message.endsWith(
          `(${id}) ${host} resolves to ${kind} address, closed to every outbound connection`,
        ),
        reply.json.message,
      );
      assert.equal(stored, 0);
    }
  });

  it("targets of the instance may reach loopback, by address and by name (connecting to the address checked)", async () => {
    const literal = await calls.callTarget(`${local.url}/loopback`);
    assert.equal(literal.reply.status, 201, literal.reply.text);
    // local.test is known only to the platform's resolver: the connection goes to the address it answered
    const named = await calls.callTarget(`http://local.test:${local.port}/named`);
    assert.equal(named.reply.status, 201, named.reply.text);
    assert.deepEqual(local.paths.slice(-2), ["/loopback", "/named"]);
  });

  it("a redirect is an answer, never followed: not to a refused address, not anywhere", async () => {
    for (const path of ["/to-metadata", "/to-landing"]) {
      const { reply } = await calls.callTarget(`${local.url}${path}`);
      assertRpcError(reply, 400, Code.FailedPrecondition, /answered HTTP 30[27]/);
    }
    assert.ok(local.paths.includes("/to-metadata") && local.paths.includes("/to-landing"));
    assert.ok(!local.paths.includes("/landing"), "the redirect's location was not requested");
  });

  it("an organization's identity provider at a loopback address or name is refused; the instance's is reached", async () => {
    const before = local.paths.length;
    for (const issuer of [
      local.url,
      `http://localhost:${local.port}`,
      `http://local.test:${local.port}`,
      `http://[::1]:${local.port}`,
    ]) {
      const refused = await calls.startSignIn(await calls.provider("oidc", issuer, true));
      assert.equal(refused.status, 502, issuer);
      assert.equal(refused.location, null);
    }
    assert.equal(local.paths.length, before, "the provider was not contacted");
    const instanceProvider = await calls.provider("oidc", local.url, false);
    const reached = await calls.startSignIn(instanceProvider);
    assert.equal(reached.status, 302);
    assert.ok(reached.location?.startsWith(`${local.url}/authorize?`), String(reached.location));
    assert.deepEqual(local.paths.slice(before), ["/.well-known/openid-configuration"]);
  });

  it("an organization's codehost_b provider reaches the operator's issuer (PLATFORM_IDP_CODEHOST_B_ISSUER) on loopback", async () => {
    const before = local.paths.length;
    const reached = await calls.startSignIn(await calls.provider("codehost_b", undefined, true));
    assert.equal(reached.status, 302);
    assert.ok(reached.location?.startsWith(`${local.url}/authorize?`), String(reached.location));
    assert.deepEqual(local.paths.slice(before), ["/.well-known/openid-configuration"]);
  });

  it("an identity provider at a metadata, link-local or unspecified address is refused whoever configured it", async () => {
    const before = local.paths.length;
    for (const org of [true, false]) {
      for (const issuer of [
        "http://169.254.169.254/latest",
        "http://metadata.test",
        "http://[fe80::1]",
        // 0.0.0.0 would reach the local provider (Linux connects it to the host itself)
        `http://0.0.0.0:${local.port}`,
      ]) {
        const refused = await calls.startSignIn(await calls.provider("oidc", issuer, org));
        assert.equal(refused.status, 502, `${issuer} (org: ${org})`);
      }
    }
    assert.equal(local.paths.length, before, "the provider was not contacted");
  });

  it("a provider's redirect is not followed either", async () => {
    const before = local.paths.length;
    const moved = await calls.startSignIn(await calls.provider("oidc", `${local.url}/moved`, false));
    assert.equal(moved.status, 502);
    assert.deepEqual(local.paths.slice(before), ["/moved/.well-known/openid-configuration"]);
  });
});

describe("outbound connections with PLATFORM_OUTBOUND_ALLOW_PRIVATE=all", () => {
  let platform: TestPlatform;
  let local: LocalServer;
  let calls: Awaited<ReturnType<typeof callsOf>>;

  before(async () => {
    local = await localServer(idpHandler);
    platform = await startPlatform({
      listen: true,
      resolve,
      env: { PLATFORM_OUTBOUND_ALLOW_PRIVATE: "all" },
    });
    calls = await callsOf(platform);
  });
  after(async () => {
    await platform.stop();
    await local.close();
  });

  it("an organization's identity provider may reach loopback; metadata, link-local and unspecified stay closed", async () => {
    const reached = await calls.startSignIn(await calls.provider("oidc", local.url, true));
    assert.equal(reached.status, 302);
    assert.ok(reached.location?.startsWith(`${local.url}/authorize?`), String(reached.location));
    assert.deepEqual(local.paths, ["/.well-known/openid-configuration"]);
    for (const issuer of [
      "http://169.254.169.254",
      "http://metadata.test",
      "http://link-local.test",
      `http://0.0.0.0:${local.port}`,
    ]) {
      assert.equal((await calls.startSignIn(await calls.provider("oidc", issuer, true))).status, 502, issuer);
    }
    assert.deepEqual(
      local.paths,
      ["/.well-known/openid-configuration"],
      "contacted once: by the allowed one",
    );
  });
});

describe("outbound connections with PLATFORM_OUTBOUND_ALLOW_PRIVATE=none", () => {
  let platform: TestPlatform;
  let local: LocalServer;
  let calls: Awaited<ReturnType<typeof callsOf>>;

  before(async () => {
    local = await localServer(idpHandler);
    platform = await startPlatform({
      listen: true,
      resolve,
      env: { PLATFORM_OUTBOUND_ALLOW_PRIVATE: "none", PLATFORM_IDP_CODEHOST_B_ISSUER: local.url },
    });
    calls = await callsOf(platform);
  });
  after(async () => {
    await platform.stop();
    await local.close();
  });

  it("the instance's targets and identity providers may not reach loopback either", async () => {
    const { reply, stored } = await calls.callTarget(`${local.url}/closed`);
    assertRpcError(reply, 400, Code.FailedPrecondition);
    assert.ok(
      reply.json.message.endsWith(
        "127.0.0.1 is a loopback address, closed by PLATFORM_OUTBOUND_ALLOW_PRIVATE=none",
      ),
      reply.json.message,
    );
    assert.equal(stored, 0);
    assert.equal((await calls.startSignIn(await calls.provider("oidc", local.url, false))).status, 502);
    assert.equal((await calls.startSignIn(await calls.provider("codehost_b", undefined, true))).status, 502);
    assert.deepEqual(local.paths, []);
  });
});
