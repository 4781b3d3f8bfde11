import assert from "node:assert/strict";
import http from "node:http";
import http2 from "node:http2";
import net from "node:net";
import { after, before, describe, it } from "node:test";
import {
  addMachineUser,
  rawRequest,
  startPlatform,
  type TestPlatform,
  watchSocket,
} from "../../test/helpers.ts";
import { redactQuery } from "./server.ts";

function h2Get(
  url: string,
  path: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(url);
    session.on("error", reject);
    const stream = session.request({ ":path": path, ...headers });
    let body = "";
    let status = 0;
    stream.on("response", (h) => (status = Number(h[":status"])));
    stream.setEncoding("utf8");
    stream.on("data", (d) => (body += d));
    stream.on("end", () => {
      session.close();
      resolve({ status, body });
    });
    stream.on("error", reject);
  });
}

describe("server", () => {
  let platform: TestPlatform;
  before(async () => {
    platform = await startPlatform({ listen: true });
  });
  after(() => platform.stop());

  it("serves HTTP/1.1 and cleartext HTTP/2 on the same port", async () => {
    const h1 = await rawRequest(`${platform.url}/healthz`);
    assert.equal(h1.status, 200);
    assert.deepEqual(JSON.parse(h1.body), { status: "ok" });
    const h2 = await h2Get(platform.url, "/ready");
    assert.equal(h2.status, 200);
    assert.deepEqual(JSON.parse(h2.body), { status: "ready" });
  });

  it("resolves the instance from Host or :authority; unknown hosts get 404 except on the probes", async () => {
    const unknown = await rawRequest(`${platform.url}/settings/v3alpha/languages`, {
      headers: { host: "unknown.example" },
    });
    assert.equal(unknown.status, 404);
    assert.deepEqual(JSON.parse(unknown.body), { code: 5, message: "instance not found", details: [] });
    const h2Unknown = await h2Get(platform.url, "/settings/v3alpha/languages", {
      ":authority": "unknown.example:1234",
    });
    assert.equal(h2Unknown.status, 404);
    assert.equal(
      (await rawRequest(`${platform.url}/healthz`, { headers: { host: "10.0.0.7:8080" } })).status,
      200,
    );
    assert.equal((await rawRequest(`${platform.url}/ready`, { headers: { host: "pod-name" } })).status, 200);
    // The instance's domain with any port, any case.
    const known = await rawRequest(`${platform.url}/settings/v3alpha/languages`, {
      headers: { host: "LOCALHOST:9999" },
    });
    assert.equal(known.status, 401);
  });

  it("answers unknown routes with the rpcStatus shape, and gRPC calls of unknown methods with UNIMPLEMENTED", async () => {
    const unknown = await rawRequest(`${platform.url}/nothing-here?token=secret`);
    assert.equal(unknown.status, 404);
    assert.match(String(unknown.headers["content-type"]), /^application\/json/);
    assert.deepEqual(JSON.parse(unknown.body), {
      code: 5,
      message: "no such route: GET /nothing-here",
      details: [],
    });
    const post = await rawRequest(`${platform.url}/resources/v3alpha/nothing/_search`, { method: "POST" });
    assert.equal(post.status, 404);
    assert.equal(JSON.parse(post.body).code, 5);
    assert.match(JSON.parse(post.body).message, /POST \/resources\/v3alpha\/nothing\/_search$/);
    const grpc = await rawRequest(`${platform.url}/platform.nothing.v1.Nothing/Call`, {
      method: "POST",
      headers: { "content-type": "application/grpc-web+proto" },
    });
    assert.equal(grpc.status, 200);
    assert.equal(grpc.headers["grpc-status"], "12");
  });

  it("ignores X-Forwarded-Host unless the proxy is trusted", async () => {
    const response = await rawRequest(`${platform.url}/settings/v3alpha/languages`, {
      headers: { host: "unknown.example", "x-forwarded-host": "localhost" },
    });
    assert.equal(response.status, 404);
  });

  it("gives every response a request ID, keeping the caller's", async () => {
    const generated = await rawRequest(`${platform.url}/healthz`);
    assert.match(String(generated.headers["x-request-id"]), /^[0-9a-f-]{36}$/);
    const kept = await rawRequest(`${platform.url}/healthz`, { headers: { "x-request-id": "trace-42" } });
    assert.equal(kept.headers["x-request-id"], "trace-42");
    assert.equal(kept.headers["x-content-type-options"], "nosniff");
  });

  it("sends security headers with HTML", async () => {
    const page = await rawRequest(`${platform.url}/docs`);
    assert.equal(page.status, 200);
    assert.match(String(page.headers["content-type"]), /^text\/html/);
    assert.match(
      String(page.headers["content-security-policy"]),
      /default-src 'self'.*frame-ancestors 'none'/,
    );
    assert.equal(page.headers["x-frame-options"], "DENY");
    assert.equal(page.headers["referrer-policy"], "no-referrer");
    assert.equal(page.headers["x-content-type-options"], "nosniff");
    assert.equal(page.headers["cache-control"], "no-store");
  });

  it("logs URLs without the values of secret query parameters", () => {
    assert.equal(redactQuery("/healthz"), "/healthz");
    assert.equal(
      redactQuery("/resources/v3alpha/sessions/1?session_token=s3cret&x=1&code=abc"),
      "/resources/v3alpha/sessions/1?session_token=[redacted]&x=1&code=[redacted]",
    );
  });

  it("never leaks internals in errors", async () => {
    const response = await rawRequest(
      `${platform.url}/settings/v3alpha/languages?ctx.org_id=${"x".repeat(201)}`,
      {
        headers: { authorization: "Bearer nope" },
      },
    );
    assert.equal(response.status, 401);
    assert.doesNotMatch(response.body, /at |SELECT|\.ts:/);
  });
});

describe("graceful shutdown", () => {
  it("finishes an in-flight request, then closes", async () => {
    const platform = await startPlatform({ listen: true });
    const { token } = await addMachineUser(platform, {
      username: "owner",
      membership: { contextType: "instance", roles: ["IAM_OWNER"] },
    });
    const url = new URL(`${platform.url}/settings/v3alpha/languages`);
    const body = JSON.stringify({ default_language: { key: "de" } });
    const done = new Promise<{ status: number; connection?: string; body: string }>((resolve, reject) => {
      const request = http.request(
        url,
        {
          method: "PATCH",
          headers: {
            authorization: `Bearer ${token}`,
            "content-type": "application/json",
            "content-length": Buffer.byteLength(body),
          },
        },
        (response) => {
          let text = "";
          response.on("data", (d) => (text += d));
          response.on("end", () =>
            resolve({ status: response.statusCode!, connection: response.headers.connection, body: text }),
          );
        },
      );
      request.on("error", reject);
      request.write(body.slice(0, 10)); // the request is in flight: headers and part of the body sent
      setTimeout(() => {
        const closing = platform.stop();
        setTimeout(() => request.end(body.slice(10)), 200);
        void closing;
      }, 200);
    });
    const result = await done;
    assert.equal(result.status, 200, result.body);
    assert.equal(result.connection, "close");
    await platform.stop();
    await assert.rejects(rawRequest(`${platform.url}/healthz`), /ECONNREFUSED/);
  });
});

describe("slowloris", () => {
  it("closes a connection that never finishes its headers within PLATFORM_HTTP_HEADERS_TIMEOUT_MS, answering others meanwhile", async () => {
    const headersTimeoutMs = 300;
    const platform = await startPlatform({
      listen: true,
      env: { PLATFORM_HTTP_HEADERS_TIMEOUT_MS: String(headersTimeoutMs) },
    });
    try {
      const port = Number(new URL(platform.url).port);
      const slow = watchSocket(net.connect(port, "127.0.0.1"));
      slow.socket.write("GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Slow: ");
      const drip = setInterval(() => slow.socket.write("a"), 50);
      const answers: number[] = [];
      const asking = (async () => {
        for (let i = 0; i < 5; i++) answers.push((await rawRequest(`${platform.url}/healthz`)).status);
      })();
      const keptMs = await slow.closedWithin(headersTimeoutMs + 1000).finally(() => clearInterval(drip));
      await asking;
      assert.ok(keptMs >= headersTimeoutMs - 20, `closed after ${keptMs} ms, before the bound`);
      assert.match(slow.received(), /^HTTP\/1\.1 408 Request Timeout/);
      assert.deepEqual(answers, [200, 200, 200, 200, 200]);
    } finally {
      await platform.stop();
    }
  });
});
