/**
 * What the transport refuses before any service runs, over every protocol: strings with NUL (U+0000),
 * bodies over PLATFORM_MAX_REQUEST_BODY_BYTES (413), bodies that are not JSON on REST (415). Each refusal
 * stores nothing.
 */
import assert from "node:assert/strict";
import net from "node:net";
import { after, before, describe, it } from "node:test";
import { Code, ConnectError, createClient, type Transport } from "@connectrpc/connect";
import {
  createConnectTransport,
  createGrpcTransport,
  createGrpcWebTransport,
  Http2SessionManager,
} from "@connectrpc/connect-node";
import { PlatformUsers } from "../src/gen/platform/resources/user/v3alpha/user_service_pb.ts";
import {
  addMachineUser,
  assertRejected,
  eventCount,
  expectNothingStored,
  rawRequest,
  restClient,
  startPlatform,
  type TestPlatform,
} from "./helpers.ts";

const USERS = "/resources/v3alpha/users";
const CREATE_USER = "/platform.resources.user.v3alpha.PlatformUsers/CreateUser";
const LIMIT = 4096;
const NUL = "must not contain NUL (U+0000)";
const TOO_LARGE = `request body is larger than the limit of ${LIMIT} bytes`;

describe("request hardening", () => {
  let platform: TestPlatform;
  let owner: string;
  let userId: string;
  let h2: Http2SessionManager;
  const rest = restClient(
    () => platform,
    () => owner,
  );
  const machine = (username: string, name = `${username} service`) => ({ username, machine: { name } });
  /** The same user as an init of the generated message (oneofs as case / value). */
  const machineInit = (username: string, name = `${username} service`) => ({
    username,
    type: { case: "machine" as const, value: { name } },
  });

  /** Every connect protocol, all calling with the owner's token. */
  const transports = (): Record<string, Transport> => {
    const interceptors = [
      (next: Parameters<import("@connectrpc/connect").Interceptor>[0]) =>
        async (req: Parameters<typeof next>[0]) => {
          req.header.set("authorization", `Bearer ${owner}`);
          return next(req);
        },
    ];
    return {
      grpc: createGrpcTransport({ baseUrl: platform.url, sessionManager: h2, interceptors }),
      grpcWeb: createGrpcWebTransport({ baseUrl: platform.url, httpVersion: "1.1", interceptors }),
      connect: createConnectTransport({ baseUrl: platform.url, httpVersion: "1.1", interceptors }),
      connectProto: createConnectTransport({
        baseUrl: platform.url,
        httpVersion: "1.1",
        useBinaryFormat: true,
        interceptors,
      }),
    };
  };

  /** The ConnectError a call fails with (fails the test when it succeeds). */
  const errorOf = async (call: Promise<unknown>): Promise<ConnectError> => {
    try {
      await call;
    } catch (error) {
      return ConnectError.from(error);
    }
    assert.fail("the call succeeded");
  };

  before(async () => {
    platform = await startPlatform({
      listen: true,
      env: { PLATFORM_MAX_REQUEST_BODY_BYTES: String(LIMIT) },
    });
    h2 = new Http2SessionManager(platform.url);
    ({ token: owner } = await addMachineUser(platform, {
      username: "owner",
      membership: { contextType: "instance", roles: ["IAM_OWNER"] },
    }));
    const created = await rest("POST", USERS, { json: machine("existing") });
    assert.equal(created.status, 201, created.text);
    userId = created.json.details.id;
  });
  after(async () => {
    h2.abort();
    await platform.stop();
  });

  describe("NUL (U+0000) in a string: 400 INVALID_ARGUMENT naming the field", () => {
    it("REST: a path ID, a body string, a query parameter (the issue's reproductions)", async () => {
      await assertRejected(platform, () => rest("GET", `${USERS}/%00`), 400, 3, `id: ${NUL}`);
      await assertRejected(platform, () => rest("DELETE", `${USERS}/a%00b`), 400, 3, `id: ${NUL}`);
      await assertRejected(
        platform,
        () => rest("POST", USERS, { json: machine("a\u0000b") }),
        400,
        3,
        `user.username: ${NUL}`,
      );
      await assertRejected(
        platform,
        () => rest("POST", `${USERS}/_search?ctx.org_id=%00`),
        400,
        3,
        `ctx.org_id: ${NUL}`,
      );
      await assertRejected(
        platform,
        () => rest("POST", `${USERS}?ctx.org_domain=x%00`, { json: machine("ctxdomain") }),
        400,
        3,
        `ctx.org_domain: ${NUL}`,
      );
    });

    it("REST: a malformed percent-encoding in the path is a 400 rpcStatus too", async () => {
      await assertRejected(
        platform,
        () => rest("GET", `${USERS}/%ED%A0%80`),
        400,
        3,
        "malformed URL: invalid percent-encoding",
      );
    });

    it("REST: in list elements, oneof members, map keys and map values", async () => {
      await assertRejected(
        platform,
        () =>
          rest("POST", `${USERS}/_search`, {
            json: [{ ids: { ids: [userId] } }, { username: { username: "ad\u0000min" } }],
          }),
        400,
        3,
        `filters[1].username.username: ${NUL}`,
      );
      await assertRejected(
        platform,
        () => rest("POST", `${USERS}/_search`, { json: [{ ids: { ids: [userId, "1\u0000"] } }] }),
        400,
        3,
        `filters[0].ids.ids[1]: ${NUL}`,
      );
      await assertRejected(
        platform,
        () =>
          rest("PATCH", `${USERS}/${userId}/metadata`, {
            json: { entries: { "key\u0000": Buffer.from("value").toString("base64") } },
          }),
        400,
        3,
        `metadata.entries: ${NUL}`,
      );
      // Bytes may hold 0x00: they are not text.
      const bytes = await rest("PATCH", `${USERS}/${userId}/metadata`, {
        json: { entries: { binary: Buffer.from([0, 1, 0]).toString("base64") } },
      });
      assert.equal(bytes.status, 200, bytes.text);
    });

    it("REST: authentication comes first (401 without a token)", async () => {
      await assertRejected(platform, () => rest("GET", `${USERS}/%00`, { token: null }), 401, 16);
      await assertRejected(platform, () => rest("GET", `${USERS}/%00`, { token: "not-a-token" }), 401, 16);
    });

    it("gRPC, gRPC-web and Connect: the same check, the same message", async () => {
      for (const [name, transport] of Object.entries(transports())) {
        const client = createClient(PlatformUsers, transport);
        await expectNothingStored(platform, async () => {
          const created = await errorOf(client.createUser({ user: machineInit("a\u0000b") }));
          assert.equal(created.code, Code.InvalidArgument, `${name}: ${created.message}`);
          assert.equal(created.rawMessage, `user.username: ${NUL}`, name);
          const read = await errorOf(client.getUser({ id: "\u0000" }));
          assert.equal(read.code, Code.InvalidArgument, name);
          assert.equal(read.rawMessage, `id: ${NUL}`, name);
          const searched = await errorOf(
            client.searchUsers({ ctx: { context: { case: "orgId", value: "\u0000" } } }),
          );
          assert.equal(searched.rawMessage, `ctx.org_id: ${NUL}`, name);
          const metadata = await errorOf(
            client.setUserMetadata({
              id: userId,
              metadata: { entries: { "k\u0000": new Uint8Array([1]) } },
            }),
          );
          assert.equal(metadata.rawMessage, `metadata.entries: ${NUL}`, name);
        });
      }
    });

    it("a Host header with NUL never reaches the instance lookup", async () => {
      // Node's HTTP/1.1 parser refuses the header itself; either way no 500.
      const answer = await rawSocketRequest(
        platform.url,
        `GET ${USERS} HTTP/1.1\r\nHost: local\u0000host\r\nConnection: close\r\n\r\n`,
      );
      const status = Number(answer.split(" ", 2)[1]);
      assert.ok(status === 400 || status === 404, answer);
    });
  });

  describe("a body over PLATFORM_MAX_REQUEST_BODY_BYTES: 413 naming the limit", () => {
    const oversized = () => machine("big", "x".repeat(LIMIT));

    it("REST: 413 RESOURCE_EXHAUSTED, with or without Content-Length", async () => {
      await assertRejected(platform, () => rest("POST", USERS, { json: oversized() }), 413, 8, TOO_LARGE);
      // chunked: no Content-Length, the limit applies while reading
      await expectNothingStored(platform, async () => {
        const response = await fetch(`${platform.url}${USERS}`, {
          method: "POST",
          headers: { authorization: `Bearer ${owner}`, "content-type": "application/json" },
          body: chunked(JSON.stringify(oversized())),
          duplex: "half",
        } as RequestInit);
        assert.equal(response.status, 413);
        assert.deepEqual(await response.json(), { code: 8, message: TOO_LARGE, details: [] });
      });
      // Just below the limit is read (and then validated: the name is too long).
      const below = await rest("POST", USERS, { json: machine("fits", "x".repeat(LIMIT - 100)) });
      assert.equal(below.status, 400, below.text);
    });

    it("Connect: 413 with a Connect error, with or without Content-Length", async () => {
      for (const body of [
        JSON.stringify({ user: oversized() }),
        chunked(JSON.stringify({ user: oversized() })),
      ]) {
        await expectNothingStored(platform, async () => {
          const response = await fetch(`${platform.url}${CREATE_USER}`, {
            method: "POST",
            headers: { authorization: `Bearer ${owner}`, "content-type": "application/json" },
            body,
            duplex: "half",
          } as RequestInit);
          assert.equal(response.status, 413);
          assert.deepEqual(await response.json(), { code: "resource_exhausted", message: TOO_LARGE });
        });
      }
      for (const name of ["connect", "connectProto"]) {
        const client = createClient(PlatformUsers, transports()[name]);
        const error = await errorOf(client.createUser({ user: machineInit("big", "x".repeat(LIMIT)) }));
        assert.equal(error.code, Code.ResourceExhausted, `${name}: ${error.message}`);
        assert.equal(error.rawMessage, TOO_LARGE, name);
      }
    });

    it("gRPC and gRPC-web: RESOURCE_EXHAUSTED naming the limit", async () => {
      const before = await eventCount(platform);
      for (const name of ["grpc", "grpcWeb"]) {
        const client = createClient(PlatformUsers, transports()[name]);
        const error = await errorOf(client.createUser({ user: machineInit("big", "x".repeat(LIMIT)) }));
        assert.equal(error.code, Code.ResourceExhausted, `${name}: ${error.message}`);
        assert.match(error.rawMessage, new RegExp(`\\b${LIMIT}\\b`), name);
      }
      assert.equal(await eventCount(platform), before);
    });
  });

  describe("Content-Type: REST reads application/json only (415)", () => {
    const body = () => JSON.stringify(machine(`ct${Math.random().toString(36).slice(2, 8)}`));
    const withType = (contentType: string) => () =>
      rest("POST", USERS, { body: body(), headers: { "content-type": contentType } });

    it("refuses other media types, a body without a type, and charsets other than UTF-8", async () => {
      for (const type of [
        "text/plain",
        "application/xml",
        "application/jsonx",
        "application/x-www-form-urlencoded",
        "nonsense",
      ]) {
        await assertRejected(
          platform,
          withType(type),
          415,
          3,
          `Content-Type ${type} is not supported; send application/json`,
        );
      }
      await assertRejected(
        platform,
        withType("application/json; charset=iso-8859-1"),
        415,
        3,
        "charset iso-8859-1 is not supported",
      );
      await expectNothingStored(platform, async () => {
        const untyped = await rawRequest(`${platform.url}${USERS}`, {
          method: "POST",
          headers: { authorization: `Bearer ${owner}` },
          body: body(),
        });
        assert.equal(untyped.status, 415, untyped.body);
        assert.deepEqual(JSON.parse(untyped.body), {
          code: 3,
          message: "a request body needs Content-Type: application/json",
          details: [],
        });
      });
    });

    it("accepts application/json with or without a charset", async () => {
      for (const type of [
        "application/json",
        "application/json; charset=utf-8",
        "Application/JSON;charset=UTF-8",
      ]) {
        const created = await withType(type)();
        assert.equal(created.status, 201, `${type}: ${created.text}`);
      }
    });

    it("accepts an empty body without a type (curl -X POST)", async () => {
      const locked = await rawRequest(`${platform.url}${USERS}/${userId}/_lock`, {
        method: "POST",
        headers: { authorization: `Bearer ${owner}` },
      });
      assert.equal(locked.status, 200, locked.body);
      // curl -d '' labels its empty body as a form
      const unlocked = await rawRequest(`${platform.url}${USERS}/${userId}/_unlock`, {
        method: "POST",
        headers: { authorization: `Bearer ${owner}`, "content-type": "application/x-www-form-urlencoded" },
        body: "",
      });
      assert.equal(unlocked.status, 200, unlocked.body);
    });

    it("Connect refuses text/plain with 415", async () => {
      await expectNothingStored(platform, async () => {
        const response = await fetch(`${platform.url}${CREATE_USER}`, {
          method: "POST",
          headers: { authorization: `Bearer ${owner}`, "content-type": "text/plain" },
          body: JSON.stringify({ user: machine("plain") }),
        });
        assert.equal(response.status, 415);
      });
    });
  });
});

/** A body stream without a known length (sent chunked). */
function chunked(text: string): ReadableStream<Uint8Array> {
  const bytes = new TextEncoder().encode(text);
  return new ReadableStream({
    start(controller) {
      for (let i = 0; i < bytes.length; i += 1000) controller.enqueue(bytes.slice(i, i + 1000));
      controller.close();
    },
  });
}

/** Writes raw bytes to the server and returns everything it answers until it closes. */
function rawSocketRequest(url: string, request: string): Promise<string> {
  const { port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), "127.0.0.1", () => socket.end(request));
    let answer = "";
    socket.setEncoding("latin1");
    socket.on("data", (chunk) => (answer += chunk));
    socket.on("end", () => resolve(answer));
    socket.on("error", reject);
  });
}
