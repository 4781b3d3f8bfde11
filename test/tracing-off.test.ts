import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { createRequire } from "node:module";
import { after, before, describe, it } from "node:test";
import { actionsClient, TestTarget } from "../src/execution/testing.ts";
import { addMachineUser, startPlatform, type TestPlatform } from "./helpers.ts";
import { OtlpReceiver } from "./otlp-receiver.ts";

// Tracing on is test/tracing.test.ts; each test file runs in a process of its own, so here the SDK is
// never loaded unless this file's platform loads it.
describe("tracing off", () => {
  let receiver: OtlpReceiver;
  let platform: TestPlatform;
  let target: TestTarget;

  before(async () => {
    receiver = await OtlpReceiver.start();
    process.env.OTEL_BSP_SCHEDULE_DELAY = "50";
    platform = await startPlatform({
      listen: true,
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_SDK_DISABLED: "true" },
    });
    target = await TestTarget.start();
  });
  after(async () => {
    await platform?.stop();
    await target?.close();
    await receiver?.close();
  });

  it("OTEL_SDK_DISABLED=true: no SDK loaded, no export, no traceparent sent on, even when a caller sends one", async () => {
    assert.equal(platform.config.tracing, undefined);
    const owner = await addMachineUser(platform, {
      username: "owner",
      membership: { contextType: "instance", roles: ["IAM_OWNER"] },
    });
    const actions = actionsClient(platform, owner.token);
    const { id } = await actions.target("webhook", target.url("/hook"));
    await actions.execution(
      { request: { method: "/platform.resources.user.v3alpha.PlatformUsers/CreateUser" } },
      [id],
    );
    const traceparent = `00-${randomBytes(16).toString("hex")}-${randomBytes(8).toString("hex")}-01`;
    const created = await actions.rest("POST", "/resources/v3alpha/users", {
      json: {
        username: "ada",
        human: { profile: { given_name: "Ada", family_name: "L" }, email: { address: "ada@example.com" } },
      },
      headers: { traceparent },
    });
    assert.equal(created.status, 201, created.text);
    const [call] = target.callsTo("/hook");
    assert.equal(call.headers.traceparent, undefined, "nothing to continue: no trace header is sent");
    assert.equal(call.headers.tracestate, undefined);

    await new Promise((r) => setTimeout(r, 500)); // several batch periods
    assert.deepEqual(receiver.exports, [], "the receiver was never contacted");
    const loaded = Object.keys(createRequire(import.meta.url).cache);
    assert.deepEqual(
      loaded.filter((file) => /@opentelemetry\/(sdk-trace|exporter|context-async-hooks|core\/)/.test(file)),
      [],
      "the SDK is not loaded",
    );
  });
});
