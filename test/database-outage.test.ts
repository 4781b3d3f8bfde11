/**
 * A database that cannot be reached answers 503 UNAVAILABLE (code 14) with Retry-After on every protocol
 * and route, never 500 and never the driver's message; once it is back, the same process serves again.
 *
 * The outage on PostgreSQL is real: Platform reaches the database through a TCP proxy that the test cuts
 * (closing every connection, refusing new ones) and restores. That test needs DATABASE_URL and is skipped
 * on the embedded database; the closed-database test runs on both.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import net from "node:net";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { Code, ConnectError, createClient, type Interceptor } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import pg from "pg";
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
  tempDir,
} from "./helpers.ts";
import { startProcess } from "./process.ts";
import { testTime } from "./time.ts";

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

/**
 * Load against a `platform start` child process while its database's backends are terminated again and
 * again (`pg_terminate_backend`, what a PostgreSQL restart or failover does to every connection): the
 * pool's idle connections, connections checked out for a transaction (idle or running a statement in it),
 * the LISTEN connection of the event deliveries and the process lease of the idempotency keys. The
 * shared PostgreSQL server itself is never restarted: only the test's own database's backends end.
 */
type Reply = { status: number; text: string; retryAfter: string | null };

describe("PostgreSQL ends every connection under load", () => {
  it("the process survives, answers 503 with Retry-After meanwhile and recovers by itself", {
    skip: process.env.DATABASE_URL ? false : "needs PostgreSQL (DATABASE_URL)",
  }, async () => {
    const backend = await freshBackend();
    const dbName = new URL(backend.env.DATABASE_URL).pathname.slice(1);
    const patPath = path.join(tempDir("terminate-"), "admin.pat");
    const server = await startProcess({
      ...backend.env,
      PLATFORM_PORT: "0",
      PLATFORM_FIRSTINSTANCE_PAT_PATH: patPath,
    });
    const admin = new pg.Client({ connectionString: process.env.DATABASE_URL });
    await admin.connect();
    try {
      const pat = readFileSync(patPath, "utf8").trim();
      /** An answer; status 0 when there was none (the connection failed). */
      const send = async (route: string, init: RequestInit): Promise<Reply> => {
        try {
          const response = await fetch(`${server.url}${route}`, {
            ...init,
            signal: AbortSignal.timeout(testTime(30_000)),
          });
          const text = await response.text();
          return { status: response.status, text, retryAfter: response.headers.get("retry-after") };
        } catch (error) {
          return { status: 0, text: String(error), retryAfter: null };
        }
      };
      const call = (method: string, route: string, body?: unknown, headers: Record<string, string> = {}) =>
        send(route, {
          method,
          headers: { authorization: `Bearer ${pat}`, "content-type": "application/json", ...headers },
          body: body === undefined ? undefined : JSON.stringify(body),
        });
      const machine = await call("POST", "/resources/v3alpha/users", {
        username: "terminate-client",
        machine: { name: "terminate client" },
      });
      assert.equal(machine.status, 201, machine.text);
      const userId = JSON.parse(machine.text).details.id as string;
      const secret = await call("POST", `/resources/v3alpha/users/${userId}/_generate_secret`, {});
      assert.equal(secret.status, 200, secret.text);
      const { client_id, client_secret } = JSON.parse(secret.text);
      const token = () =>
        send("/oauth/v2/token", {
          method: "POST",
          headers: {
            "content-type": "application/x-www-form-urlencoded",
            authorization: `Basic ${Buffer.from(`${client_id}:${client_secret}`).toString("base64")}`,
          },
          body: "grant_type=client_credentials",
        });

      const answers: { what: string; reply: Reply }[] = [];
      const created: string[] = [];
      let n = 0;
      const requests: [string, () => Promise<Reply>][] = [
        [
          "create organization",
          async () => {
            const reply = await call(
              "POST",
              "/resources/v3alpha/organizations",
              { name: `Terminated ${n++}` },
              { "idempotency-key": `k${n}` },
            );
            if (reply.status === 201) created.push(JSON.parse(reply.text).details.id);
            return reply;
          },
        ],
        ["search users", () => call("POST", "/resources/v3alpha/users/_search", [])],
        ["get user", () => call("GET", `/resources/v3alpha/users/${userId}`)],
        ["token", token],
        ["ready", () => call("GET", "/ready")],
      ];
      let loading = true;
      const load = Array.from({ length: 8 }, async (_, worker) => {
        for (let i = worker; loading; i++) {
          const [what, request] = requests[i % requests.length];
          answers.push({ what, reply: await request() });
        }
      });

      // terminate every backend of the database until each kind of connection was hit at least once
      const hit = new Set<string>();
      let rounds = 0;
      const started = Date.now();
      const kinds = ["idle", "transaction", "listen", "lease"];
      while (rounds < 10 || (hit.size < kinds.length && Date.now() - started < testTime(60_000))) {
        const { rows } = await admin.query<{ state: string; query: string; in_transaction: boolean }>(
          `SELECT state, query, pg_terminate_backend(pid),
                  state LIKE 'idle in transaction%' OR (state = 'active' AND xact_start < query_start)
                    AS in_transaction
           FROM pg_stat_activity
           WHERE datname = $1 AND pid <> pg_backend_pid() AND backend_type = 'client backend'`,
          [dbName],
        );
        for (const row of rows) {
          if (/^LISTEN /.test(row.query)) hit.add("listen");
          else if (/pg_advisory_lock\(/.test(row.query)) hit.add("lease");
          else if (row.in_transaction) hit.add("transaction");
          else if (row.state === "idle") hit.add("idle");
        }
        rounds++;
        assert.equal(server.child.exitCode, null, `the process exited:\n${server.stderr()}`);
        await sleep(100);
      }
      loading = false;
      await Promise.all(load);
      assert.equal(server.child.exitCode, null, `the process exited:\n${server.stderr()}`);
      assert.doesNotMatch(server.stderr(), /Unhandled|uncaught/i);
      for (const kind of kinds)
        assert.ok(hit.has(kind), `no ${kind} connection was terminated (${[...hit]})`);

      // meanwhile: each answer succeeded or was 503 with Retry-After
      const unexpected = answers.filter(
        ({ what, reply }) =>
          reply.status >= 300 && !(reply.status === 503 && (reply.retryAfter || what === "ready")),
      );
      assert.deepEqual(
        unexpected.slice(0, 5),
        [],
        `${unexpected.length} unexpected answers of ${answers.length}`,
      );
      assert.ok(
        answers.some(({ reply }) => reply.status === 503),
        "some answers were 503",
      );

      // recovered by itself
      let ready: Reply | undefined;
      for (let i = 0; i < testTime(100) && ready?.status !== 200; i++) ready = await call("GET", "/ready");
      assert.equal(ready?.status, 200);
      for (const [what, request] of requests) {
        const reply = await request();
        assert.ok(reply.status === 200 || reply.status === 201, `${what}: ${reply.status} ${reply.text}`);
      }
      for (const id of created) {
        const reply = await call("GET", `/resources/v3alpha/organizations/${id}`);
        assert.equal(reply.status, 200, `acknowledged organization ${id}: ${reply.text}`);
      }
      // the LISTEN connection and the process lease are back
      const back = async (sql: string) => {
        for (let i = 0; i < testTime(100); i++) {
          if ((await admin.query(sql, [dbName])).rowCount === 1) return true;
          await sleep(100);
        }
        return false;
      };
      assert.ok(
        await back("SELECT 1 FROM pg_stat_activity WHERE datname = $1 AND query LIKE 'LISTEN %'"),
        "the LISTEN connection reconnected",
      );
      assert.ok(
        await back(
          `SELECT 1 FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
           WHERE a.datname = $1 AND l.locktype = 'advisory' AND l.granted AND a.query LIKE '%pg_advisory_lock(%'`,
        ),
        "the process lease was taken again",
      );
    } finally {
      await admin.end();
      await server.stop();
      await backend.cleanup();
    }
  });
});
