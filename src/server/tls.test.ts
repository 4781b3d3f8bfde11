import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import http2 from "node:http2";
import https from "node:https";
import net from "node:net";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import tls from "node:tls";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import {
  addMachineUser,
  startPlatform,
  type TestPlatform,
  tempDir,
  testTime,
  watchSocket,
  within,
} from "../../test/helpers.ts";
import { ConfigError, loadConfig } from "../config.ts";
import { PlatformLanguageSettings } from "../gen/platform/settings/language/v3alpha/language_service_pb.ts";
import { type ConnectionLimits, SecureDualProtocolServer } from "./listener.ts";

/** A self-signed certificate for localhost, made with openssl. */
function selfSigned(): { cert: string; key: string } {
  const dir = tempDir("tls-");
  const cert = path.join(dir, "cert.pem");
  const key = path.join(dir, "key.pem");
  execFileSync(
    "openssl",
    [
      "req",
      "-x509",
      "-newkey",
      "rsa:2048",
      "-nodes",
      "-days",
      "1",
      "-subj",
      "/CN=localhost",
      "-addext",
      "subjectAltName=DNS:localhost",
      "-keyout",
      key,
      "-out",
      cert,
    ],
    { stdio: "ignore" },
  );
  return { cert, key };
}

describe("TLS", () => {
  let platform: TestPlatform;
  let files: { cert: string; key: string };
  before(async () => {
    files = selfSigned();
    platform = await startPlatform({
      listen: true,
      env: { PLATFORM_TLS_CERT_FILE: files.cert, PLATFORM_TLS_KEY_FILE: files.key },
    });
  });
  after(() => platform.stop());

  const origin = () => platform.url.replace("http://", "https://");

  it("serves HTTPS over HTTP/1.1 and HTTP/2 (ALPN) on the one port", async () => {
    const h1 = await new Promise<{ status: number; body: string; alpn: string | false }>(
      (resolve, reject) => {
        const req = https.get(
          `${origin()}/healthz`,
          { rejectUnauthorized: false, ALPNProtocols: ["http/1.1"] } as https.RequestOptions,
          (res) => {
            const alpn = (res.socket as import("node:tls").TLSSocket).alpnProtocol ?? false;
            let body = "";
            res.on("data", (d) => (body += d));
            res.on("end", () => resolve({ status: res.statusCode!, body, alpn }));
          },
        );
        req.on("error", reject);
      },
    );
    assert.equal(h1.status, 200);
    assert.deepEqual(JSON.parse(h1.body), { status: "ok" });
    assert.equal(h1.alpn, "http/1.1");

    const h2 = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const session = http2.connect(origin(), { rejectUnauthorized: false });
      session.on("error", reject);
      const stream = session.request({ ":path": "/ready" });
      let status = 0;
      let body = "";
      stream.on("response", (h) => (status = Number(h[":status"])));
      stream.on("data", (d) => (body += d));
      stream.on("end", () => {
        session.close();
        resolve({ status, body });
      });
    });
    assert.equal(h2.status, 200);
    assert.deepEqual(JSON.parse(h2.body), { status: "ready" });
  });

  it("serves gRPC over TLS, and plaintext gets nothing", async () => {
    const { token } = await addMachineUser(platform, {
      username: "tls-owner",
      membership: { contextType: "instance", roles: ["IAM_OWNER"] },
    });
    const transport = createGrpcTransport({ baseUrl: origin(), nodeOptions: { rejectUnauthorized: false } });
    const client = createClient(PlatformLanguageSettings, transport);
    const resolved = await client.resolveLanguages({}, { headers: { authorization: `Bearer ${token}` } });
    assert.equal(resolved.settings?.defaultLanguage?.value, "en");
    await assert.rejects(fetch(`${platform.url}/healthz`));
  });

  it("needs both files, readable and PEM", () => {
    assert.throws(
      () => loadConfig({ PLATFORM_TLS_CERT_FILE: files.cert }),
      (e) => e instanceof ConfigError && e.variable === "PLATFORM_TLS_KEY_FILE",
    );
    assert.throws(
      () => loadConfig({ PLATFORM_TLS_CERT_FILE: "/nonexistent.pem", PLATFORM_TLS_KEY_FILE: files.key }),
      (e) => e instanceof ConfigError && e.variable === "PLATFORM_TLS_CERT_FILE",
    );
    const config = loadConfig({ PLATFORM_TLS_CERT_FILE: files.cert, PLATFORM_TLS_KEY_FILE: files.key });
    assert.equal(config.externalSecure, true, "serving TLS implies https external URLs");
  });
});

describe("connection bounds under TLS", () => {
  const limits: ConnectionLimits = {
    headersTimeoutMs: 300,
    requestTimeoutMs: 600,
    idleTimeoutMs: 400,
    maxConnections: 100,
  };
  /** How much later than its bound a connection may be closed: 1 s, scaled for a loaded machine. */
  const slackMs = testTime(1000);
  let pem: { cert: Buffer; key: Buffer };
  before(() => {
    const files = selfSigned();
    pem = { cert: readFileSync(files.cert), key: readFileSync(files.key) };
  });

  async function start(overrides: Partial<ConnectionLimits> = {}) {
    const warnings: string[] = [];
    const server = new SecureDualProtocolServer(
      (_req, res) => (res as import("node:http").ServerResponse).end("ok"),
      { tls: pem, limits: { ...limits, ...overrides }, warn: (message) => warnings.push(message) },
    );
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const port = (server.address() as net.AddressInfo).port;
    return { port, warnings, close: () => new Promise((resolve) => server.close(resolve)) };
  }

  function connectTls(port: number, alpn: string) {
    return watchSocket(
      tls.connect({ port, host: "127.0.0.1", rejectUnauthorized: false, ALPNProtocols: [alpn] }),
    );
  }

  function httpsGet(port: number): Promise<number> {
    return new Promise((resolve, reject) => {
      https
        .get({ port, host: "127.0.0.1", path: "/", rejectUnauthorized: false, agent: false }, (res) => {
          res.resume();
          res.on("end", () => resolve(res.statusCode!));
        })
        .on("error", reject);
    });
  }

  it("closes a connection that never starts its handshake within the headers timeout", async () => {
    const server = await start();
    try {
      const silent = watchSocket(net.connect(server.port, "127.0.0.1"));
      const ms = await silent.closedWithin(limits.headersTimeoutMs + slackMs);
      assert.ok(ms >= limits.headersTimeoutMs - 20, `closed after ${ms} ms, before the bound`);
    } finally {
      await server.close();
    }
  });

  it("answers 408 and closes a slowloris after the handshake while serving others", async () => {
    const server = await start();
    try {
      const slow = connectTls(server.port, "http/1.1");
      await new Promise((resolve) => slow.socket.once("secureConnect", resolve));
      slow.socket.write("GET / HTTP/1.1\r\nHost: localhost\r\n");
      const drip = setInterval(() => slow.socket.write("x"), 100);
      const others = [await httpsGet(server.port), await httpsGet(server.port)];
      const ms = await slow
        .closedWithin(limits.headersTimeoutMs + slackMs)
        .finally(() => clearInterval(drip));
      assert.ok(ms >= limits.headersTimeoutMs - 20, `closed after ${ms} ms, before the bound`);
      assert.match(slow.received(), /^HTTP\/1\.1 408 Request Timeout/);
      assert.deepEqual(others, [200, 200]);
    } finally {
      await server.close();
    }
  });

  it("sends GOAWAY to an idle HTTP/2 session", async () => {
    const server = await start();
    try {
      const session = http2.connect(`https://localhost:${server.port}`, { rejectUnauthorized: false });
      session.on("error", () => {});
      const goaway = new Promise<number>((resolve) => session.once("goaway", (code) => resolve(code)));
      const closed = new Promise<void>((resolve) => session.once("close", resolve));
      assert.equal(await within(goaway, limits.idleTimeoutMs + slackMs, "no GOAWAY"), 0);
      await within(closed, slackMs, "still open");
    } finally {
      await server.close();
    }
  });

  it("closes connections beyond the maximum at once and keeps serving the open one", async () => {
    const server = await start({ maxConnections: 1, idleTimeoutMs: 5000 });
    try {
      const open = connectTls(server.port, "http/1.1");
      await new Promise((resolve) => open.socket.once("secureConnect", resolve));
      const extra = connectTls(server.port, "http/1.1");
      await extra.closedWithin(slackMs);
      assert.equal(extra.received(), "");
      open.socket.write("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n");
      await within(
        new Promise((resolve) => open.socket.on("data", () => open.received().endsWith("ok") && resolve(0))),
        slackMs,
        "no answer",
      );
      assert.match(open.received(), /^HTTP\/1\.1 200 OK/);
      assert.equal(server.warnings.length, 1);
      open.socket.destroy();
    } finally {
      await server.close();
    }
  });
});
