import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import http2 from "node:http2";
import https from "node:https";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { addMachineUser, startPlatform, type TestPlatform, tempDir } from "../../test/helpers.ts";
import { ConfigError, loadConfig } from "../config.ts";
import { PlatformLanguageSettings } from "../gen/platform/settings/language/v3alpha/language_service_pb.ts";

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
