/**
 * A database that cannot be reached answers 503 UNAVAILABLE (code 14) with Retry-After on every protocol
 * and route, never 500 and never the driver's message; once it is back, the same process serves again.
 *
 * The outage on PostgreSQL is real: Platform reaches the database through a TCP proxy that the test cuts
 * (closing every connection, refusing new ones) and restores. That test needs DATABASE_URL and is skipped
 * on the embedded database; the closed-database test runs on both.
 */
import assert from "node:assert/strict";
import net from "node:net";
import { after, before, describe, it } from "node:test";
import { Code, ConnectError, createClient, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { PlatformUsers } from "../src/gen/platform/resources/user/v3alpha/user_service_pb.ts";
import {
  addMachineUser,
  freshBackend,
  type RestReply,
  rawRequest,
  restClient,
  startPlatform,
  type TestBackend,
  type TestPlatform,
} from "./helpers.ts";

const GET_USER = "/platform.resources.user.v3alpha.PlatformUsers/GetUser";

/** A TCP proxy to `target` that can be cut (every connection closed, new ones refused) and restored. */
class TcpProxy {
  private readonly server: net.Server;
  private readonly sockets = new Set<net.Socket>();
  port = 0;

  constructor(private readonly target: { host: string; port: number }) {
    this.server = net.createServer((client) => {
      const upstream = net.connect(this.target.port, this.target.host);
      for (const socket of [client, upstream]) {
        this.sockets.add(socket);
        socket.on("error", () => {});
        socket.on("close", () => {
          this.sockets.delete(socket);
          client.destroy();
          upstream.destroy();
        });
      }
      client.pipe(upstream).pipe(client);
    });
  }

  async listen(): Promise<void> {
    await new Promise<void>((resolve) => this.server.listen(this.port, "127.0.0.1", resolve));
    this.port = (this.server.address() as net.AddressInfo).port;
  }

  async cut(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    for (const socket of this.sockets) socket.destroy();
    await closed;
  }
}

/** Calls with the token. */
const bearer =
  (token: () => string): Interceptor =>
  (next) =>
  async (req) => {
    req.header.set("authorization", `Bearer ${token()}`);
    return next(req);
  };

async function connectErrorOf(call: Promise<unknown>): Promise<ConnectError> {
  try {
    await call;
  } catch (error) {
    return ConnectError.from(error);
  }
  assert.fail("the call succeeded");
}

function assertUnavailable(
  reply: RestReply | { status: number; text: string; headers: RestReply["headers"] },
) {
  assert.equal(reply.status, 503, reply.text);
  assert.deepEqual(JSON.parse(reply.text), { code: 14, message: "database unavailable", details: [] });
  assert.equal(reply.headers["retry-after"], "5");
}

describe("database outage", () => {
  it("PostgreSQL cut: 503 code 14 with Retry-After on every protocol; restored: 200 without a restart", {
    skip: process.env.DATABASE_URL ? false : "needs PostgreSQL (DATABASE_URL)",
  }, async () => {
    const backend = await freshBackend();
    const direct = new URL(backend.env.DATABASE_URL);
    const proxy = new TcpProxy({ host: direct.hostname, port: Number(direct.port || 5432) });
    await proxy.listen();
    const proxied = new URL(direct);
    proxied.host = `127.0.0.1:${proxy.port}`;
    const platform = await startPlatform({
      listen: true,
      backend: { env: { DATABASE_URL: proxied.toString() }, cleanup: async () => {} },
    });
    const h2 = new Http2SessionManager(platform.url);
    try {
      const { userId, token } = await addMachineUser(platform, {
        username: "owner",
        membership: { contextType: "instance", roles: ["IAM_OWNER"] },
      });
      const rest = restClient(platform, () => token);
      const connect = createClient(
        PlatformUsers,
        createConnectTransport({
          baseUrl: platform.url,
          httpVersion: "1.1",
          interceptors: [bearer(() => token)],
        }),
      );
      const grpc = createClient(
        PlatformUsers,
        createGrpcTransport({
          baseUrl: platform.url,
          sessionManager: h2,
          interceptors: [bearer(() => token)],
        }),
      );
      // gRPC to an address no instance has: the Host → instance lookup itself needs the database
      const grpcByIp = createClient(
        PlatformUsers,
        createGrpcTransport({
          baseUrl: platform.url.replace("localhost", "127.0.0.1"),
          interceptors: [bearer(() => token)],
        }),
      );
      const user = `/resources/v3alpha/users/${userId}`;
      assert.equal((await rest("GET", user)).status, 200);

      await proxy.cut();

      // REST: the service's query (host and token may be cached) and the Host lookup (unknown host)
      assertUnavailable(await rest("GET", user));
      assertUnavailable(await rest("GET", user, { host: "not-cached.example" }));
      // a plain Fastify route: the Host lookup fails in the onRequest hook
      assertUnavailable(await rest("GET", "/openapi.json", { host: "not-cached.example" }));
      // Connect: HTTP 503 with Retry-After and a Connect error body
      const connectReply = await fetch(`${platform.url}${GET_USER}`, {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: JSON.stringify({ id: userId }),
      });
      assert.equal(connectReply.status, 503);
      assert.equal(connectReply.headers.get("retry-after"), "5");
      assert.deepEqual(await connectReply.json(), { code: "unavailable", message: "database unavailable" });
      for (const [name, call] of [
        ["connect", () => connect.getUser({ id: userId })],
        ["grpc", () => grpc.getUser({ id: userId })],
        ["grpc, unknown host", () => grpcByIp.getUser({ id: userId })],
      ] as const) {
        const error = await connectErrorOf(call());
        assert.equal(error.code, Code.Unavailable, `${name}: ${error.message}`);
        assert.equal(error.rawMessage, "database unavailable", name);
      }
      assert.equal((await rawRequest(`${platform.url}/ready`)).status, 503);

      await proxy.listen(); // restored, same port

      assert.equal((await rest("GET", user)).status, 200);
      assert.equal((await connect.getUser({ id: userId })).user?.username, "owner");
      assert.equal((await grpc.getUser({ id: userId })).user?.username, "owner");
      assert.equal((await rawRequest(`${platform.url}/ready`)).status, 200);
    } finally {
      h2.abort();
      await platform.stop();
      await proxy.cut();
      await backend.cleanup();
    }
  });

  describe("a closed database (shutdown)", () => {
    let backend: TestBackend;
    let platform: TestPlatform;
    let token: string;
    before(async () => {
      backend = await freshBackend();
      platform = await startPlatform({ listen: true, backend });
      ({ token } = await addMachineUser(platform, {
        username: "owner",
        membership: { contextType: "instance", roles: ["IAM_OWNER"] },
      }));
    });
    after(async () => {
      await platform.app.close();
      await backend.cleanup();
    });

    it("answers 503 with Retry-After, REST and Connect, never the driver's message", async () => {
      const rest = restClient(platform, () => token);
      assert.equal((await rest("POST", "/resources/v3alpha/users/_search")).status, 200);
      await platform.db.close();
      assertUnavailable(await rest("POST", "/resources/v3alpha/users/_search"));
      assertUnavailable(await rest("POST", "/resources/v3alpha/users/_search", { host: "other.example" }));
      const error = await connectErrorOf(
        createClient(
          PlatformUsers,
          createConnectTransport({
            baseUrl: platform.url,
            httpVersion: "1.1",
            interceptors: [bearer(() => token)],
          }),
        ).searchUsers({}),
      );
      assert.equal(error.code, Code.Unavailable);
      assert.equal(error.rawMessage, "database unavailable");
    });
  });
});
