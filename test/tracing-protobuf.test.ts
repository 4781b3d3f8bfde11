import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { freshBackend, startPlatform, type TestPlatform, testTime } from "./helpers.ts";
import { OtlpReceiver } from "./otlp-receiver.ts";
import { freePort, startProcess } from "./process.ts";

// A process of its own (the SDK is process-wide): the default protocol, http/protobuf.
describe("tracing: OTLP/HTTP with protobuf (the default protocol)", () => {
  let receiver: OtlpReceiver;
  let platform: TestPlatform;

  before(async () => {
    receiver = await OtlpReceiver.start();
    process.env.OTEL_BSP_SCHEDULE_DELAY = "50";
    platform = await startPlatform({
      listen: true,
      env: { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${receiver.url}/v1/traces` },
    });
  });
  after(async () => {
    await platform?.stop();
    await receiver?.close();
  });

  it("exports protobuf to the traces endpoint, carrying the caller's trace ID", async () => {
    const traceId = randomBytes(16);
    const response = await fetch(`${platform.url}/.well-known/openid-configuration`, {
      headers: { traceparent: `00-${traceId.toString("hex")}-${randomBytes(8).toString("hex")}-01` },
    });
    assert.equal(response.status, 200);
    // The request's span ends last: it may come in a later batch than its children.
    const name = Buffer.from("GET /.well-known/openid-configuration");
    const deadline = Date.now() + testTime(10_000);
    const withSpan = () => receiver.exports.find((e) => e.body.includes(traceId) && e.body.includes(name));
    while (!withSpan()) {
      assert.ok(Date.now() < deadline, `no export of the request span: ${receiver.exports.length} exports`);
      await new Promise((r) => setTimeout(r, 25));
    }
    const exported = withSpan()!;
    assert.equal(exported.path, "/v1/traces");
    assert.equal(exported.headers["content-type"], "application/x-protobuf");
  });

  it("a receiver that refuses exports costs no request, and the log one warning line", async () => {
    const refusing = await OtlpReceiver.start(400);
    const backend = await freshBackend();
    const server = await startProcess({
      ...backend.env,
      PLATFORM_PORT: String(await freePort()),
      PLATFORM_LOG_FORMAT: "json",
      OTEL_EXPORTER_OTLP_ENDPOINT: refusing.url,
      OTEL_BSP_SCHEDULE_DELAY: "20",
    });
    try {
      for (let i = 0; i < 3; i++) {
        assert.equal((await fetch(`${server.url}/healthz`)).status, 200);
        // each request in an export of its own
        const exports = refusing.exports.length;
        const deadline = Date.now() + testTime(10_000);
        while (refusing.exports.length === exports) {
          assert.ok(Date.now() < deadline, "no export");
          await new Promise((r) => setTimeout(r, 20));
        }
      }
      const deadline = Date.now() + testTime(10_000);
      while (!server.stdout().includes("tracing: export failed")) {
        assert.ok(Date.now() < deadline, `no warning in ${server.stdout()}`);
        await new Promise((r) => setTimeout(r, 20));
      }
      const warnings = server
        .stdout()
        .split("\n")
        .filter((line) => line.includes("tracing: "));
      assert.equal(warnings.length, 1, warnings.join("\n"));
      const warning = JSON.parse(warnings[0]);
      assert.equal(warning.level, 40);
      assert.doesNotMatch(warning.msg, /\n|stack/, "one line, no stack");
    } finally {
      await server.stop();
      await refusing.close();
      await backend.cleanup();
    }
  });
});
