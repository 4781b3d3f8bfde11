import assert from "node:assert/strict";
import type { LookupAddress } from "node:dns";
import http from "node:http";
import type { AddressInfo } from "node:net";
import net from "node:net";
import { after, before, describe, it } from "node:test";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import {
  assertRejected,
  type RestReply,
  restClient,
  startPlatform,
  type TestPlatform,
} from "../../../test/helpers.ts";
import { verifySignature } from "../../execution/signing.ts";
import { PlatformNotifications } from "../../gen/platform/resources/notification/v3alpha/notification_service_pb.ts";
import type { Resolve } from "../../net/outbound.ts";
import { addCallers } from "../actions/testing.ts";

const SMS = "/resources/v3alpha/sms_providers";
const LOOPBACK_SECRET = "pat-7f3a9c-host-only";

const NAMES: Record<string, string> = {
  "sms.test": "127.0.0.1",
  "metadata.test": "169.254.169.254",
  "denied.test": "127.0.0.1",
  "internal.test": "10.9.0.1",
};
const resolve: Resolve = async (hostname) => {
  const address = NAMES[hostname];
  if (!address) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: "ENOTFOUND" });
  return [{ address, family: net.isIP(address) } as LookupAddress];
};

interface Delivery {
  path: string;
  signature: string | undefined;
  contentType: string | undefined;
  body: string;
}

describe("notification providers: SMS", () => {
  let platform: TestPlatform;
  let callers: Awaited<ReturnType<typeof addCallers>>;
  let rest: ReturnType<typeof restClient>;
  let gateway: http.Server;
  let base: string;
  const deliveries: Delivery[] = [];
  const rejects = (call: () => Promise<RestReply>, status: number, code: number, message?: RegExp | string) =>
    assertRejected(platform, call, status, code, message);
  const create = async (body: unknown) => {
    const r = await rest("POST", SMS, { json: body });
    assert.equal(r.status, 201, r.text);
    return { id: r.json.details.id as string, signingKey: r.json.signing_key as string };
  };

  before(async () => {
    // An SMS gateway: /ok answers 202, /fail 503 with a reason
    gateway = http.createServer((req, res) => {
      let body = "";
      req.on("data", (d) => (body += d));
      req.on("end", () => {
        deliveries.push({
          path: req.url ?? "",
          signature: req.headers["platform-signature"] as string | undefined,
          contentType: req.headers["content-type"],
          body,
        });
        if (req.url === "/fail") {
          // as another service on the host could answer: nothing of it may reach the API caller
          res
            .writeHead(503, { "content-type": "application/json" })
            .end(`{"api_token":"${LOOPBACK_SECRET}"}`);
        } else res.writeHead(202).end();
      });
    });
    await new Promise<void>((r) => gateway.listen(0, "127.0.0.1", r));
    base = `http://sms.test:${(gateway.address() as AddressInfo).port}`;
    platform = await startPlatform({
      listen: true,
      resolve,
      env: { PLATFORM_EXECUTION_DENY_LIST: "denied.test,10.9.0.0/16" },
    });
    callers = await addCallers(platform);
    rest = restClient(platform, () => callers.owner);
  });
  after(async () => {
    await platform.stop();
    await new Promise((r) => gateway.close(r));
  });

  it("creates a provider with a signing key (answered on create and get, sealed at rest, never in events)", async () => {
    const { id, signingKey } = await create({ description: "gateway", http: { endpoint: `${base}/ok` } });
    assert.ok(signingKey.length >= 32);
    const got = await rest("GET", `${SMS}/${id}`);
    assert.equal(got.status, 200, got.text);
    assert.equal(got.json.provider.state, "PROVIDER_STATE_INACTIVE");
    assert.deepEqual(got.json.provider.provider, {
      description: "gateway",
      http: { endpoint: `${base}/ok` },
      signing_key: signingKey,
    });
    const events = await platform.db.query("SELECT payload FROM events WHERE aggregate_id = $1", [id]);
    assert.ok(!JSON.stringify(events).includes(signingKey));
    const secrets = await platform.db.query<{ secret: string }>(
      "SELECT secret FROM notification_provider_secrets WHERE provider_id = $1",
      [id],
    );
    assert.ok(!secrets[0].secret.includes(signingKey));
    // signing_key is output only
    const chosen = await create({ description: "x", http: { endpoint: `${base}/ok` }, signing_key: "mine" });
    assert.notEqual(chosen.signingKey, "mine");
  });

  it("_test POSTs the signed JSON message to the endpoint", async () => {
    const { id, signingKey } = await create({ description: "signed", http: { endpoint: `${base}/ok` } });
    const r = await rest("POST", `${SMS}/${id}/_test`, { json: { receiver_number: "+41 79 123 45 67" } });
    assert.equal(r.status, 200, r.text);
    const last = deliveries.at(-1)!;
    assert.equal(last.path, "/ok");
    assert.equal(last.contentType, "application/json");
    assert.ok(verifySignature(last.signature, last.body, signingKey), String(last.signature));
    assert.ok(!verifySignature(last.signature, last.body, "another key"));
    assert.deepEqual(JSON.parse(last.body), {
      recipient: "+41 79 123 45 67",
      text: 'This is a test message of the SMS provider "signed".',
      message_type: "TEST",
      user_id: "",
      instance_id: platform.bootstrapResult!.instanceId,
    });
  });

  it("_test maps a failing endpoint to FAILED_PRECONDITION naming its status, not a loopback endpoint's body", async () => {
    const { id } = await create({ description: "failing", http: { endpoint: `${base}/fail` } });
    const r = await rest("POST", `${SMS}/${id}/_test`, { json: { receiver_number: "+1 555 0100" } });
    assert.equal(r.status, 400, r.text);
    assert.equal(r.json.code, 9);
    assert.equal(
      r.json.message,
      "the message could not be sent: the endpoint answered 503 (answer body withheld: the provider's address is private)",
    );
    assert.ok(!r.text.includes(LOOPBACK_SECRET));
    // nor does the record of a message sent through it show the body
    assert.equal((await rest("POST", `${SMS}/${id}/_activate`)).status, 200);
    await assert.rejects(
      platform.deps.notifications.sendSms({
        recipient: "+1",
        text: "t",
        message_type: "otp",
        user_id: "",
        instance_id: platform.bootstrapResult!.instanceId,
      }),
      (e: Error) =>
        /answered 503 \(answer body withheld/.test(e.message) && !e.message.includes(LOOPBACK_SECRET),
    );
    assert.equal((await rest("POST", `${SMS}/${id}/_deactivate`)).status, 200);
  });

  it("refuses link-local and metadata endpoints: literals on create, names at connect time", async () => {
    for (const [endpoint, message] of [
      [
        "http://169.254.169.254/latest",
        "provider.http.endpoint: 169.254.169.254 is a cloud metadata address",
      ],
      ["http://[fe80::1]/x", "provider.http.endpoint: fe80::1 is a link-local address"],
      ["http://2852039166/", "provider.http.endpoint: 169.254.169.254 is a cloud metadata address"],
      ["ftp://sms.test/x", "provider.http.endpoint: must be an http or https URI"],
      ["not a uri", "provider.http.endpoint: must be a URI"],
    ]) {
      await rejects(
        () => rest("POST", SMS, { json: { description: "bad", http: { endpoint } } }),
        400,
        3,
        message,
      ).catch((e) => {
        throw new Error(`${endpoint}: ${e.message}`);
      });
    }
    const { id } = await create({
      description: "resolves badly",
      http: { endpoint: "http://metadata.test/x" },
    });
    const r = await rest("POST", `${SMS}/${id}/_test`, { json: { receiver_number: "+1 555 0100" } });
    assert.equal(r.status, 400, r.text);
    assert.equal(r.json.code, 9);
    assert.match(r.json.message, /metadata\.test resolves to a cloud metadata address/);
    await rejects(
      () => rest("PATCH", `${SMS}/${id}`, { json: { http: { endpoint: "http://169.254.169.254/" } } }),
      400,
      3,
      "provider.http.endpoint: 169.254.169.254 is a cloud metadata address",
    );
  });

  it("PLATFORM_EXECUTION_DENY_LIST applies: names on create, addresses at connect time", async () => {
    await rejects(
      () =>
        rest("POST", SMS, { json: { description: "denied", http: { endpoint: "http://denied.test/x" } } }),
      400,
      3,
      "provider.http.endpoint: host denied.test is denied by PLATFORM_EXECUTION_DENY_LIST",
    );
    const { id } = await create({ description: "internal", http: { endpoint: "http://internal.test/x" } });
    const r = await rest("POST", `${SMS}/${id}/_test`, { json: { receiver_number: "+1 555 0100" } });
    assert.equal(r.status, 400, r.text);
    assert.equal(r.json.code, 9);
    assert.match(
      r.json.message,
      /internal\.test resolves to an address denied by PLATFORM_EXECUTION_DENY_LIST/,
    );
  });

  it("rejects bad input naming the field and stores nothing", async () => {
    for (const [body, message] of [
      [{ http: { endpoint: `${base}/ok` } }, "provider.description: is required"],
      [
        { description: "d".repeat(201), http: { endpoint: `${base}/ok` } },
        "provider.description: must be at most 200",
      ],
      [{ description: "no type" }, "provider.type: one of"],
      [{ description: "x", http: {} }, "provider.http.endpoint: is required"],
    ] as const) {
      await rejects(() => rest("POST", SMS, { json: body }), 400, 3, message);
    }
    const { id } = await create({ description: "valid", http: { endpoint: `${base}/ok` } });
    await rejects(
      () => rest("POST", `${SMS}/${id}/_test`, { json: { receiver_number: "call me" } }),
      400,
      3,
      "receiver_number: must match",
    );
    await rejects(
      () => rest("PATCH", `${SMS}/${id}`, { json: { description: "" } }),
      400,
      3,
      "provider.description",
    );
    await rejects(() => rest("GET", `${SMS}/404404`), 404, 5, "SMS provider 404404 not found");
    await rejects(() => rest("POST", `${SMS}/404404/_test`, { json: { receiver_number: "+1 555" } }), 404, 5);
  });

  it("activation is exclusive per kind, and the sender uses the active provider", async () => {
    const a = await create({ description: "sms a", http: { endpoint: `${base}/ok` } });
    const b = await create({ description: "sms b", http: { endpoint: `${base}/ok` } });
    assert.equal((await rest("POST", `${SMS}/${a.id}/_activate`)).status, 200);
    assert.equal((await rest("POST", `${SMS}/${b.id}/_activate`)).status, 200);
    const active = await rest("POST", `${SMS}/_search`, {
      json: [{ state: { state: "PROVIDER_STATE_ACTIVE" } }],
    });
    assert.deepEqual(
      active.json.result.map((r: { details: { id: string } }) => r.details.id),
      [b.id],
    );
    await platform.deps.notifications.sendSms({
      recipient: "+1 555 0199",
      text: "your code is 123456",
      message_type: "otp",
      user_id: "42",
      instance_id: platform.bootstrapResult!.instanceId,
    });
    const last = deliveries.at(-1)!;
    assert.ok(verifySignature(last.signature, last.body, b.signingKey));
    assert.equal(JSON.parse(last.body).message_type, "otp");
    // patching the endpoint keeps the key
    const patched = await rest("PATCH", `${SMS}/${b.id}`, { json: { http: { endpoint: `${base}/fail` } } });
    assert.equal(patched.status, 200, patched.text);
    const got = await rest("GET", `${SMS}/${b.id}`);
    assert.equal(got.json.provider.provider.signing_key, b.signingKey);
    assert.equal(got.json.provider.provider.http.endpoint, `${base}/fail`);
    assert.equal((await rest("POST", `${SMS}/${b.id}/_deactivate`)).status, 200);
    await assert.rejects(
      platform.deps.notifications.sendSms({
        recipient: "+1",
        text: "t",
        message_type: "otp",
        user_id: "",
        instance_id: platform.bootstrapResult!.instanceId,
      }),
      /no SMS provider is active/,
    );
    // an SMS provider is not an SMTP provider: the other kind's paths do not find it
    assert.equal((await rest("GET", `/resources/v3alpha/smtp_providers/${a.id}`)).status, 404);
  });

  it("signing keys only for writers: IAM_OWNER_VIEWER gets providers without them (REST, gRPC, Connect)", async () => {
    const { id, signingKey } = await create({ description: "keyed", http: { endpoint: `${base}/ok` } });
    const byId = [{ id: { id } }];
    const asViewer = restClient(platform, () => callers.viewer);
    const got = await asViewer("GET", `${SMS}/${id}`);
    assert.equal(got.status, 200);
    assert.equal(got.json.provider.provider.description, "keyed");
    assert.equal(got.json.provider.provider.signing_key ?? "", "");
    const found = await asViewer("POST", `${SMS}/_search`, { json: byId });
    assert.deepEqual(
      found.json.result.map((r: { provider: { signing_key?: string } }) => r.provider.signing_key ?? ""),
      [""],
    );
    assert.ok(!got.text.includes(signingKey) && !found.text.includes(signingKey));
    for (const transport of [
      createGrpcTransport({ baseUrl: platform.url }),
      createConnectTransport({ baseUrl: platform.url, httpVersion: "1.1" }),
    ]) {
      const client = createClient(PlatformNotifications, transport);
      const as = (token: string) => ({ headers: { authorization: `Bearer ${token}` } });
      const search = { filters: [{ filter: { case: "id" as const, value: { id } } }] };
      assert.equal(
        (await client.getSMSProvider({ id }, as(callers.viewer))).provider!.provider!.signingKey,
        "",
      );
      const viewerFound = await client.searchSMSProviders(search, as(callers.viewer));
      assert.deepEqual(
        viewerFound.result.map((r) => r.provider!.signingKey),
        [""],
      );
      // the owner, who may write providers, still reads the key
      const ownerGot = await client.getSMSProvider({ id }, as(callers.owner));
      assert.equal(ownerGot.provider!.provider!.signingKey, signingKey);
      const ownerFound = await client.searchSMSProviders(search, as(callers.owner));
      assert.deepEqual(
        ownerFound.result.map((r) => r.provider!.signingKey),
        [signingKey],
      );
    }
    assert.equal((await rest("GET", `${SMS}/${id}`)).json.provider.provider.signing_key, signingKey);
    const ownerFound = await rest("POST", `${SMS}/_search`, { json: byId });
    assert.equal(ownerFound.json.result[0].provider.signing_key, signingKey);
  });

  it("permissions and Connect", async () => {
    const { id } = await create({ description: "perm", http: { endpoint: `${base}/ok` } });
    const asViewer = restClient(platform, () => callers.viewer);
    assert.equal((await asViewer("GET", `${SMS}/${id}`)).status, 200);
    await rejects(() => asViewer("POST", `${SMS}/${id}/_activate`), 403, 7);
    await rejects(() => asViewer("PATCH", `${SMS}/${id}`, { json: { description: "x" } }), 403, 7);
    const asOrgOwner = restClient(platform, () => callers.orgOwner);
    await rejects(() => asOrgOwner("GET", `${SMS}/${id}`), 403, 7);

    const client = createClient(
      PlatformNotifications,
      createConnectTransport({ baseUrl: platform.url, httpVersion: "1.1" }),
    );
    const headers = { authorization: `Bearer ${callers.owner}` };
    const got = await client.getSMSProvider({ id }, { headers });
    assert.equal(got.provider!.provider!.description, "perm");
    assert.ok(got.provider!.provider!.signingKey.length >= 32);
    const failed = await client.testSMSProvider({ id: "404404", receiverNumber: "+1 555" }, { headers }).then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
    assert.equal(failed?.code, Code.NotFound);
    const denied = await client
      .getSMSProvider({ id }, { headers: { authorization: `Bearer ${callers.orgOwner}` } })
      .then(
        () => undefined,
        (e: unknown) => ConnectError.from(e),
      );
    assert.equal(denied?.code, Code.PermissionDenied);
  });
});
