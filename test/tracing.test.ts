import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { createRequire } from "node:module";
import { after, before, describe, it } from "node:test";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { actionsClient, TestTarget } from "../src/execution/testing.ts";
import { PlatformUsers } from "../src/gen/platform/resources/user/v3alpha/user_service_pb.ts";
import { addMachineUser, type RestCall, startPlatform, type TestPlatform } from "./helpers.ts";
import { machineClient } from "./oidc.ts";
import { OtlpReceiver, type ReceivedSpan, SpanKindNumber } from "./otlp-receiver.ts";

const CREATE_USER = "/platform.resources.user.v3alpha.PlatformUsers/CreateUser";

/** A caller's W3C trace context: `00-<trace id>-<parent id>-<flags>`. */
function callerContext(sampled = true) {
  const traceId = randomBytes(16).toString("hex");
  const spanId = randomBytes(8).toString("hex");
  return { traceId, spanId, traceparent: `00-${traceId}-${spanId}-${sampled ? "01" : "00"}` };
}

const human = (username: string) => ({
  username,
  human: {
    profile: { given_name: "Ada", family_name: "Lovelace" },
    email: { address: `${username}@example.com`, is_verified: true },
  },
});

/** The one span of `spans` that `match` finds. */
function one(spans: ReceivedSpan[], what: string, match: (s: ReceivedSpan) => boolean): ReceivedSpan {
  const found = spans.filter(match);
  assert.equal(found.length, 1, `${what}: ${found.length} spans in ${spans.map((s) => s.name).join(", ")}`);
  return found[0];
}

describe("tracing (OpenTelemetry, OTLP/HTTP)", () => {
  let receiver: OtlpReceiver;
  let platform: TestPlatform;
  let target: TestTarget;
  let owner: { userId: string; token: string };
  let rest: RestCall;
  let actions: ReturnType<typeof actionsClient>;

  before(async () => {
    receiver = await OtlpReceiver.start();
    // read by the SDK's batch processor from the environment (docs/operations.md "Tracing")
    process.env.OTEL_BSP_SCHEDULE_DELAY = "50";
    platform = await startPlatform({
      listen: true,
      env: {
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
        OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
        OTEL_EXPORTER_OTLP_HEADERS: "x-api-key=s%3Dcret",
        OTEL_SERVICE_NAME: "platform-under-test",
      },
    });
    target = await TestTarget.start();
    owner = await addMachineUser(platform, {
      username: "owner",
      membership: { contextType: "instance", roles: ["IAM_OWNER"] },
    });
    actions = actionsClient(platform, owner.token);
    rest = actions.rest;
  });
  after(async () => {
    await platform?.stop();
    await target?.close();
    await receiver?.close();
  });

  it("continues the caller's trace: request span, RPC span, database spans, and the traceparent to a target", async () => {
    const { id } = await actions.target("traced-webhook", target.url("/created"));
    await actions.execution({ request: { method: CREATE_USER } }, [id]);

    const caller = callerContext();
    const created = await rest("POST", "/resources/v3alpha/users", {
      json: human("ada"),
      headers: { traceparent: caller.traceparent },
    });
    assert.equal(created.status, 201, created.text);

    // the target got the same trace, with the span of the call to it as parent
    const [call] = target.callsTo("/created");
    const sent = /^00-([0-9a-f]{32})-([0-9a-f]{16})-01$/.exec(String(call.headers.traceparent));
    assert.ok(sent, `traceparent sent to the target: ${call.headers.traceparent}`);
    assert.equal(sent[1], caller.traceId);

    const spans = await receiver.waitFor(
      (all) =>
        all.some((s) => s.traceId === caller.traceId && s.kind === SpanKindNumber.server) &&
        all.some((s) => s.spanId === sent[2]),
    );
    const traced = spans.filter((s) => s.traceId === caller.traceId);

    const request = one(traced, "request span", (s) => s.kind === SpanKindNumber.server);
    assert.equal(request.name, "POST /resources/v3alpha/users", "named by the route template");
    assert.equal(request.parentSpanId, caller.spanId, "a child of the caller's span");
    assert.equal(request.attributes["http.request.method"], "POST");
    assert.equal(request.attributes["http.route"], "/resources/v3alpha/users");
    assert.equal(request.attributes["http.response.status_code"], 201);
    assert.equal(request.attributes["platform.instance_id"], platform.bootstrapResult!.instanceId);
    assert.equal(request.attributes["platform.request_id"], created.headers["x-request-id"]);
    assert.equal(request.resource["service.name"], "platform-under-test");

    const rpc = one(traced, "RPC span", (s) => s.name === CREATE_USER.slice(1));
    assert.equal(rpc.parentSpanId, request.spanId, "the RPC span is the request span's child");
    assert.equal(rpc.kind, SpanKindNumber.internal);
    assert.equal(rpc.attributes["rpc.service"], "platform.resources.user.v3alpha.PlatformUsers");
    assert.equal(rpc.attributes["rpc.method"], "CreateUser");
    assert.equal(rpc.attributes["platform.api.protocol"], "rest");

    // database statements of the call: children of the RPC span, or of its transaction span
    const database = traced.filter((s) => s.attributes["db.system"] === "postgresql");
    const direct = database.filter((s) => s.parentSpanId === rpc.spanId);
    assert.ok(direct.length > 0, `database spans under the RPC: ${database.map((s) => s.name).join(", ")}`);
    for (const span of database) {
      assert.equal(span.kind, SpanKindNumber.client);
      assert.equal(span.attributes["db.system.name"], "postgresql");
      assert.match(span.name, /^(transaction|[A-Z]+( \w+(\.\w+)?)?)$/, "operation and table, nothing else");
    }
    const transaction = one(database, "the append's transaction", (s) => s.name === "transaction");
    const appended = database.find(
      (s) => s.parentSpanId === transaction.spanId && s.name === "INSERT events",
    );
    assert.ok(appended, "the event INSERT is a child of its transaction");
    // no parameter ever reaches an attribute: the username, the e-mail address
    assert.doesNotMatch(JSON.stringify(traced), /ada@example\.com|"ada"/);

    const outbound = one(traced, "the call to the target", (s) => s.spanId === sent[2]);
    assert.equal(outbound.kind, SpanKindNumber.client);
    assert.equal(outbound.name, "POST");
    assert.ok(
      traced.some((s) => s.spanId === outbound.parentSpanId),
      "the target call's parent is a span of the request",
    );
    assert.equal(outbound.attributes["url.full"], target.url("/created"));
    assert.equal(outbound.attributes["http.response.status_code"], 200);

    // the exporter sends the configured headers (percent-decoded)
    assert.equal(receiver.exports.at(-1)!.headers["x-api-key"], "s=cret");
  });

  it("traces gRPC calls (HTTP/2) the same way", async () => {
    const caller = callerContext();
    const client = createClient(
      PlatformUsers,
      createGrpcTransport({
        baseUrl: platform.url,
        interceptors: [
          (next) => (req) => {
            req.header.set("authorization", `Bearer ${owner.token}`);
            req.header.set("traceparent", caller.traceparent);
            return next(req);
          },
        ],
      }),
    );
    await client.createUser({
      user: {
        username: "grace",
        type: {
          case: "human",
          value: {
            profile: { givenName: "Grace", familyName: "Hopper" },
            email: { address: "grace@example.com", isVerified: true },
          },
        },
      },
    } as never);
    const spans = await receiver.waitFor((all) =>
      all.some((s) => s.traceId === caller.traceId && s.kind === SpanKindNumber.server),
    );
    const traced = spans.filter((s) => s.traceId === caller.traceId);
    const request = one(traced, "request span", (s) => s.kind === SpanKindNumber.server);
    assert.equal(request.name, `POST ${CREATE_USER}`);
    assert.equal(request.parentSpanId, caller.spanId);
    assert.equal(request.attributes["network.protocol.version"], "2.0");
    const rpc = one(traced, "RPC span", (s) => s.name === CREATE_USER.slice(1));
    assert.equal(rpc.parentSpanId, request.spanId);
    assert.equal(rpc.attributes["platform.api.protocol"], "grpc");
    await receiver.waitFor(() =>
      receiver.trace(caller.traceId).some((s) => s.parentSpanId === rpc.spanId && s.attributes["db.system"]),
    );
  });

  it("traces the token endpoint: a request span with the client's lookup and the token's insert", async () => {
    const machine = await machineClient(platform, owner.token, "svc");
    const caller = callerContext();
    const response = await fetch(`${platform.url}/oauth/v2/token`, {
      method: "POST",
      headers: {
        authorization: `Basic ${Buffer.from(`${machine.clientId}:${machine.clientSecret}`).toString("base64")}`,
        "content-type": "application/x-www-form-urlencoded",
        traceparent: caller.traceparent,
      },
      body: "grant_type=client_credentials",
    });
    assert.equal(response.status, 200, await response.clone().text());
    const { access_token } = (await response.json()) as { access_token: string };
    await receiver.waitFor(() =>
      receiver.trace(caller.traceId).some((s) => s.attributes["db.operation.name"] === "INSERT"),
    );
    const traced = receiver.trace(caller.traceId);
    const request = one(traced, "request span", (s) => s.kind === SpanKindNumber.server);
    assert.equal(request.name, "POST /oauth/v2/token");
    assert.equal(request.attributes["http.response.status_code"], 200);
    assert.ok(traced.some((s) => s.parentSpanId === request.spanId && s.attributes["db.system"]));
    const everything = JSON.stringify(receiver.spans);
    assert.ok(!everything.includes(access_token), "no token in any span");
    assert.ok(!everything.includes(machine.clientSecret), "no secret in any span");
  });

  it("starts a trace for a request without traceparent; a caller's unsampled trace stays unrecorded but propagates", async () => {
    const fresh = await rest("GET", "/resources/v3alpha/users/does-not-exist");
    assert.equal(fresh.status, 404);
    await receiver.waitFor((all) =>
      all.some((s) => s.attributes["platform.request_id"] === fresh.headers["x-request-id"]),
    );
    const root = one(
      receiver.spans,
      "new trace",
      (s) => s.attributes["platform.request_id"] === fresh.headers["x-request-id"],
    );
    assert.equal(root.parentSpanId, "", "a root span");
    assert.equal(root.name, "GET /resources/v3alpha/users/{id}", "the template, not the ID");

    const { id } = await actions.target("unsampled-webhook", target.url("/unsampled"));
    await actions.execution({ request: { method: CREATE_USER } }, [id]);
    const caller = callerContext(false);
    const created = await rest("POST", "/resources/v3alpha/users", {
      json: human("unsampled"),
      headers: { traceparent: caller.traceparent },
    });
    assert.equal(created.status, 201, created.text);
    const [call] = target.callsTo("/unsampled");
    assert.match(String(call.headers.traceparent), new RegExp(`^00-${caller.traceId}-[0-9a-f]{16}-00$`));
    // a later sampled request's spans arrive; none of the unsampled one's ever do
    const later = callerContext();
    await rest("GET", "/resources/v3alpha/users/does-not-exist", {
      headers: { traceparent: later.traceparent },
    });
    await receiver.waitFor(() => receiver.trace(later.traceId).length > 0);
    assert.deepEqual(receiver.trace(caller.traceId), []);
  });

  it("gives each event delivery a trace of its own, sent to the target", async () => {
    const { id } = await actions.target("event-webhook", target.url("/event"));
    await actions.execution({ event: { event: "user.human.added" } }, [id]);
    const created = await rest("POST", "/resources/v3alpha/users", { json: human("linus") });
    assert.equal(created.status, 201, created.text);
    const [call] = await target.waitFor("/event", 1);
    const sent = /^00-([0-9a-f]{32})-([0-9a-f]{16})-01$/.exec(String(call.headers.traceparent));
    assert.ok(sent, `traceparent of the delivery: ${call.headers.traceparent}`);
    await receiver.waitFor(() =>
      receiver.trace(sent[1]).some((s) => s.attributes["db.operation.name"] === "UPDATE"),
    );
    const traced = receiver.trace(sent[1]);
    const delivery = one(traced, "delivery span", (s) => s.name === "event delivery");
    assert.equal(delivery.parentSpanId, "");
    assert.equal(delivery.attributes["platform.event.type"], "user.human.added");
    const outbound = one(traced, "the POST", (s) => s.spanId === sent[2]);
    assert.equal(outbound.parentSpanId, delivery.spanId);
    assert.ok(traced.some((s) => s.parentSpanId === delivery.spanId && s.attributes["db.system"]));
  });

  it("sends the trace to identity providers (a sign-in's discovery request)", async () => {
    const created = await rest("POST", "/resources/v3alpha/idps/oidc", {
      json: {
        idp: { name: "Traced SSO" },
        config: {
          issuer: target.url("/sso"),
          client_id: "platform",
          client_secret: "s3cret",
          scopes: ["openid"],
        },
      },
    });
    assert.equal(created.status, 201, created.text);
    const caller = callerContext();
    const start = await rest("GET", `/ui/login/idp/start?idp=${created.json.details.id}`, {
      raw: true,
      headers: { traceparent: caller.traceparent, accept: "text/html" },
    });
    // the stand-in provider answers no discovery document: the sign-in ends there, after the request
    assert.equal(start.status, 502);
    const [discovery] = target.callsTo("/sso/.well-known/openid-configuration");
    const sent = /^00-([0-9a-f]{32})-([0-9a-f]{16})-01$/.exec(String(discovery.headers.traceparent));
    assert.ok(sent, `traceparent sent to the provider: ${discovery.headers.traceparent}`);
    assert.equal(sent[1], caller.traceId);
    await receiver.waitFor(() => receiver.trace(caller.traceId).some((s) => s.spanId === sent[2]));
    const outbound = one(
      receiver.trace(caller.traceId),
      "the discovery request",
      (s) => s.spanId === sent[2],
    );
    assert.equal(outbound.name, "GET");
    assert.equal(outbound.attributes["url.full"], target.url("/sso/.well-known/openid-configuration"));
  });

  it("loads the SDK (the check the tracing-off test relies on)", () => {
    const loaded = Object.keys(createRequire(import.meta.url).cache);
    assert.ok(loaded.some((file) => file.includes("@opentelemetry/sdk-trace-base")));
  });
});
