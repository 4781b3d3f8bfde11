import assert from "node:assert/strict";
import type { LookupAddress } from "node:dns";
import net from "node:net";
import { after, before, describe, it } from "node:test";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import {
  assertRejected,
  type RestReply,
  restClient,
  startPlatform,
  type TestPlatform,
} from "../../../test/helpers.ts";
import { type SmtpReceiver, selfSignedCertificate, startSmtpReceiver } from "../../../test/smtp-receiver.ts";
import {
  PlatformNotifications,
  TestSMTPProviderRequestSchema,
} from "../../gen/platform/resources/notification/v3alpha/notification_service_pb.ts";
import { ProviderState } from "../../gen/platform/resources/notification/v3alpha/provider_pb.ts";
import type { Resolve } from "../../net/outbound.ts";
import { addCallers } from "../actions/testing.ts";

const SMTP = "/resources/v3alpha/smtp_providers";
const PASSWORD = "smtp-Pa55word";

/** `*.test` names answer these addresses (the platform's resolver seam). */
const NAMES: Record<string, string> = { "smtp.test": "127.0.0.1", "metadata.test": "169.254.169.254" };
const resolve: Resolve = async (hostname) => {
  const address = NAMES[hostname];
  if (!address) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: "ENOTFOUND" });
  return [{ address, family: net.isIP(address) } as LookupAddress];
};

describe("notification providers: SMTP", () => {
  let platform: TestPlatform;
  let callers: Awaited<ReturnType<typeof addCallers>>;
  let rest: ReturnType<typeof restClient>;
  const certificate = selfSignedCertificate(["smtp.test"]);
  /** STARTTLS with the self-signed certificate, AUTH required. */
  let startTls: SmtpReceiver;
  /** No TLS offered, AUTH PLAIN in the clear allowed. */
  let plain: SmtpReceiver;
  const rejects = (call: () => Promise<RestReply>, status: number, code: number, message?: RegExp | string) =>
    assertRejected(platform, call, status, code, message);
  const valid = (extra: Record<string, unknown> = {}) => ({
    description: "mail relay",
    sender_address: "noreply@example.com",
    sender_name: "Platform",
    host: `smtp.test:${startTls.port}`,
    tls: true,
    user: "mailer",
    password: PASSWORD,
    ...extra,
  });
  const createProvider = async (body: unknown) => {
    const r = await rest("POST", SMTP, { json: body });
    assert.equal(r.status, 201, r.text);
    return r.json.details.id as string;
  };

  before(async () => {
    startTls = await startSmtpReceiver({
      tls: certificate,
      auth: { user: "mailer", password: PASSWORD },
      rejectAnswer: { code: 550, text: "5.1.1 <reject@example.com>: mailbox unavailable" },
    });
    plain = await startSmtpReceiver({ auth: { user: "plain-user", password: PASSWORD } });
    platform = await startPlatform({ listen: true, resolve, smtpCa: [certificate.cert] });
    callers = await addCallers(platform);
    rest = restClient(platform, () => callers.owner);
  });
  after(async () => {
    await platform.stop();
    await startTls.close();
    await plain.close();
  });

  it("creates a provider (201, inactive) and reads it back without its password, which stays out of events", async () => {
    const created = await rest("POST", SMTP, { json: valid({ reply_to_address: "help@example.com" }) });
    assert.equal(created.status, 201, created.text);
    const { id } = created.json.details;
    assert.match(id, /^\d+$/);
    assert.deepEqual(created.json.details.resource_owner, {
      type: "OWNER_TYPE_INSTANCE",
      id: platform.bootstrapResult!.instanceId,
    });
    const got = await rest("GET", `${SMTP}/${id}`);
    assert.equal(got.status, 200, got.text);
    assert.equal(got.json.provider.state, "PROVIDER_STATE_INACTIVE");
    assert.deepEqual(got.json.provider.provider, {
      description: "mail relay",
      sender_address: "noreply@example.com",
      sender_name: "Platform",
      reply_to_address: "help@example.com",
      host: `smtp.test:${startTls.port}`,
      tls: true,
      user: "mailer",
    });
    assert.ok(!got.text.includes(PASSWORD));
    const searched = await rest("POST", `${SMTP}/_search`, { json: [{ id: { id } }] });
    assert.equal(searched.json.result.length, 1);
    assert.ok(!searched.text.includes(PASSWORD));
    // no event holds the password; the stored secret is sealed
    const events = await platform.db.query<{ event_type: string; payload: unknown }>(
      "SELECT event_type, payload FROM events WHERE aggregate_id = $1",
      [id],
    );
    assert.deepEqual(
      events.map((e) => e.event_type),
      ["smtp_provider.added"],
    );
    assert.ok(!JSON.stringify(events).includes(PASSWORD));
    const [secret] = await platform.db.query<{ secret: string }>(
      "SELECT secret FROM notification_provider_secrets WHERE provider_id = $1",
      [id],
    );
    assert.ok(secret.secret.startsWith("v1.") && !secret.secret.includes(PASSWORD));
  });

  it("rejects bad input naming the field and stores nothing", async () => {
    const cases: [string, unknown, string | RegExp][] = [
      ["description required", valid({ description: "" }), "provider.description: is required"],
      [
        "description at most 200",
        valid({ description: "d".repeat(201) }),
        "provider.description: must be at most 200",
      ],
      [
        "sender an e-mail address",
        valid({ sender_address: "nobody" }),
        "provider.sender_address: must match",
      ],
      [
        "reply-to an e-mail address",
        valid({ reply_to_address: "x@" }),
        "provider.reply_to_address: must match",
      ],
      ["host required", valid({ host: "" }), "provider.host: is required"],
      ["host with a port", valid({ host: "smtp.test" }), "provider.host: must be host:port"],
      ["port in range", valid({ host: "smtp.test:70000" }), "provider.host: must be host:port"],
      [
        "password needs a user",
        valid({ user: undefined }),
        "provider.user: is required with provider.password",
      ],
      ["user needs a password", valid({ password: undefined }), "provider.password: is required"],
      [
        "metadata address",
        valid({ host: "169.254.169.254:25" }),
        "provider.host: 169.254.169.254 is a cloud metadata address",
      ],
      [
        "link-local address",
        valid({ host: "[fe80::1]:25" }),
        /^provider\.host: fe80::1 is a link-local address/,
      ],
      ["provider required", undefined, "provider: is required"],
    ];
    for (const [what, body, message] of cases) {
      await rejects(
        () => (body === undefined ? rest("POST", SMTP) : rest("POST", SMTP, { json: body })),
        400,
        3,
        message,
      ).catch((e) => {
        throw new Error(`${what}: ${e.message}`);
      });
    }
    await rejects(() => rest("GET", `${SMTP}/404404`), 404, 5, "SMTP provider 404404 not found");
    await rejects(() => rest("PATCH", `${SMTP}/404404`, { json: { description: "x" } }), 404, 5);
    await rejects(() => rest("POST", `${SMTP}/404404/_activate`), 404, 5);
    await rejects(() => rest("DELETE", `${SMTP}/404404`), 404, 5);
  });

  it("_test sends a real message over STARTTLS with AUTH", async () => {
    const id = await createProvider(valid({ reply_to_address: "help@example.com" }));
    const r = await rest("POST", `${SMTP}/${id}/_test`, { json: { receiver_address: "alice@example.com" } });
    assert.equal(r.status, 200, r.text);
    assert.deepEqual(r.json, {});
    const last = startTls.received.at(-1)!;
    assert.equal(last.secure, true, "upgraded with STARTTLS");
    assert.equal(last.user, "mailer");
    assert.deepEqual(last.envelope, { from: "noreply@example.com", to: ["alice@example.com"] });
    assert.equal(last.mail.from?.text, '"Platform" <noreply@example.com>');
    assert.equal(last.mail.replyTo?.text, "help@example.com");
    assert.equal(last.mail.subject, "Test message");
    assert.match(last.mail.text ?? "", /test message of the SMTP provider "mail relay"/);
  });

  it("_test maps the server's refusal to FAILED_PRECONDITION carrying its answer", async () => {
    const id = await createProvider(valid());
    const r = await rest("POST", `${SMTP}/${id}/_test`, { json: { receiver_address: "reject@example.com" } });
    assert.equal(r.status, 400, r.text);
    assert.equal(r.json.code, 9);
    assert.match(
      r.json.message,
      /^the SMTP server answered: 550 5\.1\.1 <reject@example\.com>: mailbox unavailable/,
    );

    const wrong = await createProvider(valid({ password: "wrong" }));
    const denied = await rest("POST", `${SMTP}/${wrong}/_test`, {
      json: { receiver_address: "a@example.com" },
    });
    assert.equal(denied.status, 400);
    assert.match(
      denied.json.message,
      /the SMTP server answered: 535 5\.7\.8 Authentication credentials invalid/,
    );
  });

  it("tls: true requires encryption; tls: false sends in the clear with AUTH PLAIN", async () => {
    const required = await createProvider(
      valid({ host: `smtp.test:${plain.port}`, user: "plain-user", password: PASSWORD }),
    );
    const refused = await rest("POST", `${SMTP}/${required}/_test`, {
      json: { receiver_address: "a@example.com" },
    });
    assert.equal(refused.status, 400, refused.text);
    assert.equal(refused.json.code, 9);
    assert.match(refused.json.message, /STARTTLS/);
    assert.equal(plain.received.length, 0);

    const open = await createProvider(
      valid({ host: `smtp.test:${plain.port}`, tls: false, user: "plain-user", password: PASSWORD }),
    );
    const sent = await rest("POST", `${SMTP}/${open}/_test`, {
      json: { receiver_address: "bob@example.com" },
    });
    assert.equal(sent.status, 200, sent.text);
    assert.equal(plain.received.length, 1);
    assert.equal(plain.received[0].secure, false);
    assert.equal(plain.received[0].user, "plain-user");
    assert.deepEqual(plain.received[0].envelope.to, ["bob@example.com"]);
  });

  it("the server's certificate is verified: an untrusted one fails the test delivery", async () => {
    const untrusted = await startSmtpReceiver({ tls: selfSignedCertificate(["smtp.test"]) });
    try {
      const id = await createProvider(
        valid({ host: `smtp.test:${untrusted.port}`, user: undefined, password: undefined }),
      );
      const r = await rest("POST", `${SMTP}/${id}/_test`, { json: { receiver_address: "a@example.com" } });
      assert.equal(r.status, 400, r.text);
      assert.equal(r.json.code, 9);
      assert.match(r.json.message, /self[- ]signed certificate/);
      assert.equal(untrusted.received.length, 0);
    } finally {
      await untrusted.close();
    }
  });

  it("tls: true on port 465 speaks implicit TLS", async (t) => {
    // 465 is a privileged port: the test runs only where it can listen there
    const implicit = await startSmtpReceiver({
      tls: certificate,
      implicitTls: true,
      port: 465,
      auth: { user: "mailer", password: PASSWORD },
    }).catch((error: NodeJS.ErrnoException) => error);
    if (implicit instanceof Error) {
      t.skip(`cannot listen on 127.0.0.1:465 (${implicit.code ?? implicit.message})`);
      return;
    }
    try {
      const id = await createProvider(valid({ host: "smtp.test:465" }));
      const r = await rest("POST", `${SMTP}/${id}/_test`, { json: { receiver_address: "tls@example.com" } });
      assert.equal(r.status, 200, r.text);
      assert.equal(implicit.received.length, 1);
      assert.equal(implicit.received[0].secure, true);
      assert.deepEqual(implicit.received[0].envelope.to, ["tls@example.com"]);
    } finally {
      await implicit.close();
    }
  });

  it("a host name resolving to a metadata address is refused at connect time", async () => {
    const id = await createProvider(valid({ host: "metadata.test:25" }));
    const r = await rest("POST", `${SMTP}/${id}/_test`, { json: { receiver_address: "a@example.com" } });
    assert.equal(r.status, 400, r.text);
    assert.equal(r.json.code, 9);
    assert.match(r.json.message, /metadata\.test resolves to a cloud metadata address/);
  });

  it("patches keep the sealed password unless a new one is given; an empty user removes both", async () => {
    const id = await createProvider(valid());
    const patched = await rest("PATCH", `${SMTP}/${id}`, {
      json: { description: "renamed", sender_name: "" },
    });
    assert.equal(patched.status, 200, patched.text);
    assert.equal(patched.json.details.sequence, "2");
    const same = await rest("PATCH", `${SMTP}/${id}`, { json: { description: "renamed" } });
    assert.equal(same.json.details.sequence, "2", "a patch that changes nothing stores nothing");
    // the kept password still authenticates
    const sent = await rest("POST", `${SMTP}/${id}/_test`, { json: { receiver_address: "c@example.com" } });
    assert.equal(sent.status, 200, sent.text);
    const got = await rest("GET", `${SMTP}/${id}`);
    assert.equal(got.json.provider.provider.description, "renamed");
    assert.equal(got.json.provider.provider.sender_name, "");

    // a new password replaces it (the event only flags it)
    assert.equal((await rest("PATCH", `${SMTP}/${id}`, { json: { password: "wrong" } })).status, 200);
    const denied = await rest("POST", `${SMTP}/${id}/_test`, { json: { receiver_address: "c@example.com" } });
    assert.match(denied.json.message, /535/);
    const [changed] = await platform.db.query<{ payload: Record<string, unknown> }>(
      "SELECT payload FROM events WHERE aggregate_id = $1 ORDER BY sequence DESC LIMIT 1",
      [id],
    );
    assert.deepEqual(changed.payload, { password_changed: true });

    await rejects(
      () => rest("PATCH", `${SMTP}/${id}`, { json: { host: "nope" } }),
      400,
      3,
      "provider.host: must be host:port",
    );
    await rejects(
      () => rest("PATCH", `${SMTP}/${id}`, { json: { reply_to_address: "x" } }),
      400,
      3,
      "provider.reply_to_address: must match",
    );
    assert.equal(
      (await rest("PATCH", `${SMTP}/${id}`, { json: { reply_to_address: "r@example.com" } })).status,
      200,
    );
    assert.equal(
      (await rest("GET", `${SMTP}/${id}`)).json.provider.provider.reply_to_address,
      "r@example.com",
    );
    assert.equal((await rest("PATCH", `${SMTP}/${id}`, { json: { reply_to_address: "" } })).status, 200);
    assert.equal((await rest("GET", `${SMTP}/${id}`)).json.provider.provider.reply_to_address, undefined);
    const noAuth = await rest("PATCH", `${SMTP}/${id}`, { json: { user: "" } });
    assert.equal(noAuth.status, 200, noAuth.text);
    assert.equal((await rest("GET", `${SMTP}/${id}`)).json.provider.provider.user, undefined);
    const rows = await platform.db.query(
      "SELECT 1 FROM notification_provider_secrets WHERE provider_id = $1",
      [id],
    );
    assert.equal(rows.length, 0, "the password went with the user");
    await rejects(
      () => rest("PATCH", `${SMTP}/${id}`, { json: { user: "someone" } }),
      400,
      3,
      "provider.password: is required with provider.user",
    );
  });

  it("at most one provider is active: activating one deactivates the other", async () => {
    const a = await createProvider(valid({ description: "first active" }));
    const b = await createProvider(valid({ description: "second active" }));
    const state = async (id: string) => (await rest("GET", `${SMTP}/${id}`)).json.provider.state;
    assert.equal((await rest("POST", `${SMTP}/${a}/_activate`)).status, 200);
    assert.equal(await state(a), "PROVIDER_STATE_ACTIVE");
    const again = await rest("POST", `${SMTP}/${a}/_activate`);
    assert.equal(again.status, 200);
    const activated = await rest("POST", `${SMTP}/${b}/_activate`);
    assert.equal(activated.status, 200, activated.text);
    assert.equal(await state(a), "PROVIDER_STATE_INACTIVE");
    assert.equal(await state(b), "PROVIDER_STATE_ACTIVE");
    const active = await rest("POST", `${SMTP}/_search`, {
      json: [{ state: { state: "PROVIDER_STATE_ACTIVE" } }],
    });
    assert.deepEqual(
      active.json.result.map((r: { details: { id: string } }) => r.details.id),
      [b],
    );
    const [superseded] = await platform.db.query<{ payload: unknown }>(
      "SELECT payload FROM events WHERE aggregate_id = $1 AND event_type = 'smtp_provider.deactivated'",
      [a],
    );
    assert.deepEqual(superseded.payload, { superseded_by: b });
    // the sender uses the active one
    await platform.deps.notifications.sendEmail(platform.bootstrapResult!.instanceId, {
      to: "outbox@example.com",
      subject: "through the active provider",
      text: "hello",
    });
    assert.equal(startTls.received.at(-1)!.mail.subject, "through the active provider");

    assert.equal((await rest("POST", `${SMTP}/${b}/_deactivate`)).status, 200);
    assert.equal(await state(b), "PROVIDER_STATE_INACTIVE");
    await assert.rejects(
      platform.deps.notifications.sendEmail(platform.bootstrapResult!.instanceId, {
        to: "x@example.com",
        subject: "s",
        text: "t",
      }),
      /no SMTP provider is active/,
    );
    // deleting the active provider leaves none active
    await rest("POST", `${SMTP}/${a}/_activate`);
    assert.equal((await rest("DELETE", `${SMTP}/${a}`)).status, 200);
    await rejects(() => rest("GET", `${SMTP}/${a}`), 404, 5);
    const none = await rest("POST", `${SMTP}/_search`, {
      json: [{ state: { state: "PROVIDER_STATE_ACTIVE" } }],
    });
    assert.equal(none.json.details.total_result, "0");
  });

  it("searches page, sort and filter like the other resource searches", async () => {
    for (const d of ["page c", "page a", "page b"]) await createProvider(valid({ description: d }));
    const filter = [{ description: { description: "page ", method: "TEXT_FILTER_METHOD_STARTS_WITH" } }];
    const first = await rest(
      "POST",
      `${SMTP}/_search?query.limit=2&query.asc=true&sorting_column=PROVIDER_FIELD_NAME_DESCRIPTION`,
      {
        json: filter,
      },
    );
    assert.equal(first.status, 200, first.text);
    assert.deepEqual(
      first.json.result.map((r: { provider: { description: string } }) => r.provider.description),
      ["page a", "page b"],
    );
    assert.equal(first.json.details.total_result, "3");
    assert.equal(first.json.details.end_of_list, false);
    assert.equal(first.json.sorting_column, "PROVIDER_FIELD_NAME_DESCRIPTION");
    const last = await rest(
      "POST",
      `${SMTP}/_search?query.limit=2&query.offset=2&query.asc=true&sorting_column=PROVIDER_FIELD_NAME_DESCRIPTION`,
      {
        json: filter,
      },
    );
    assert.deepEqual(
      last.json.result.map((r: { provider: { description: string } }) => r.provider.description),
      ["page c"],
    );
    assert.equal(last.json.details.total_result, "3");
    assert.equal(last.json.details.end_of_list, true);
    const ignoreCase = await rest("POST", `${SMTP}/_search`, {
      json: [{ description: { description: "PAGE B", method: "TEXT_FILTER_METHOD_EQUALS_IGNORE_CASE" } }],
    });
    assert.equal(ignoreCase.json.result.length, 1);
  });

  it("permissions: IAM_OWNER_VIEWER reads but cannot write; an org owner cannot read", async () => {
    const id = await createProvider(valid());
    const asViewer = restClient(platform, () => callers.viewer);
    assert.equal((await asViewer("GET", `${SMTP}/${id}`)).status, 200);
    assert.equal((await asViewer("POST", `${SMTP}/_search`)).status, 200);
    await rejects(() => asViewer("POST", SMTP, { json: valid() }), 403, 7);
    await rejects(() => asViewer("POST", `${SMTP}/${id}/_activate`), 403, 7);
    await rejects(() => asViewer("DELETE", `${SMTP}/${id}`), 403, 7);
    await rejects(
      () => asViewer("POST", `${SMTP}/${id}/_test`, { json: { receiver_address: "a@example.com" } }),
      403,
      7,
    );
    const asOrgOwner = restClient(platform, () => callers.orgOwner);
    await rejects(() => asOrgOwner("GET", `${SMTP}/${id}`), 403, 7);
    await rejects(() => asOrgOwner("POST", `${SMTP}/_search`), 403, 7);
    await rejects(() => asOrgOwner("POST", SMTP, { json: valid() }), 403, 7);
  });

  it("the read model rebuilds from the events; the sealed secrets stay", async () => {
    const snapshot = (table: string) =>
      platform.db.query(`SELECT * FROM ${table} ORDER BY (to_jsonb(${table}.*))::text`);
    const providers = await snapshot("notification_providers");
    const secrets = await snapshot("notification_provider_secrets");
    assert.ok(providers.length > 5);
    assert.ok(await platform.eventStore.rebuild("notification_providers"));
    assert.deepEqual(await snapshot("notification_providers"), providers);
    assert.deepEqual(await snapshot("notification_provider_secrets"), secrets);
  });

  it("serves Connect: create, get, and a failing test as FailedPrecondition", async () => {
    const client = createClient(
      PlatformNotifications,
      createConnectTransport({ baseUrl: platform.url, httpVersion: "1.1" }),
    );
    const headers = { authorization: `Bearer ${callers.owner}` };
    const created = await client.createSMTPProvider(
      {
        provider: {
          description: "over connect",
          senderAddress: "noreply@example.com",
          senderName: "",
          host: `smtp.test:${startTls.port}`,
          tls: true,
          user: "mailer",
          password: PASSWORD,
        },
      },
      { headers },
    );
    const got = await client.getSMTPProvider({ id: created.details!.id }, { headers });
    assert.equal(got.provider!.state, ProviderState.INACTIVE);
    assert.equal(got.provider!.provider!.password, undefined);
    const failed = await client
      .testSMTPProvider({ id: created.details!.id, receiverAddress: "reject@example.com" }, { headers })
      .then(
        () => undefined,
        (e: unknown) => ConnectError.from(e),
      );
    assert.equal(failed?.code, Code.FailedPrecondition);
    assert.match(failed!.rawMessage, /550 5\.1\.1/);
    assert.ok(TestSMTPProviderRequestSchema);
  });
});
