import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { restClient } from "../../../test/helpers.ts";
import { PlatformNotifications } from "../../gen/platform/resources/notification/v3alpha/notification_service_pb.ts";
import { ProviderState } from "../../gen/platform/resources/notification/v3alpha/provider_pb.ts";
import { PASSWORD, SMTP, smtpSuite } from "./testing.ts";

describe("notification providers: SMTP", () => {
  const { s, valid, createProvider, rejects } = smtpSuite();

  it("creates a provider (201, inactive) and reads it back without its password, which stays out of events", async () => {
    const created = await s.rest("POST", SMTP, { json: valid({ reply_to_address: "help@example.com" }) });
    assert.equal(created.status, 201, created.text);
    const { id } = created.json.details;
    assert.match(id, /^\d+$/);
    assert.deepEqual(created.json.details.resource_owner, {
      type: "OWNER_TYPE_INSTANCE",
      id: s.platform.bootstrapResult!.instanceId,
    });
    const got = await s.rest("GET", `${SMTP}/${id}`);
    assert.equal(got.status, 200, got.text);
    assert.equal(got.json.provider.state, "PROVIDER_STATE_INACTIVE");
    assert.deepEqual(got.json.provider.provider, {
      description: "mail relay",
      sender_address: "noreply@example.com",
      sender_name: "Platform",
      reply_to_address: "help@example.com",
      host: `smtp.test:${s.startTls.port}`,
      tls: true,
      user: "mailer",
    });
    assert.ok(!got.text.includes(PASSWORD));
    const searched = await s.rest("POST", `${SMTP}/_search`, { json: [{ id: { id } }] });
    assert.equal(searched.json.result.length, 1);
    assert.ok(!searched.text.includes(PASSWORD));
    // no event holds the password; the stored secret is sealed
    const events = await s.platform.db.query<{ event_type: string; payload: unknown }>(
      "SELECT event_type, payload FROM events WHERE aggregate_id = $1",
      [id],
    );
    assert.deepEqual(
      events.map((e) => e.event_type),
      ["smtp_provider.added"],
    );
    assert.ok(!JSON.stringify(events).includes(PASSWORD));
    const [secret] = await s.platform.db.query<{ secret: string }>(
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
        () => (body === undefined ? s.rest("POST", SMTP) : s.rest("POST", SMTP, { json: body })),
        400,
        3,
        message,
      ).catch((e) => {
        throw new Error(`${what}: ${e.message}`);
      });
    }
    await rejects(() => s.rest("GET", `${SMTP}/404404`), 404, 5, "SMTP provider 404404 not found");
    await rejects(() => s.rest("PATCH", `${SMTP}/404404`, { json: { description: "x" } }), 404, 5);
    await rejects(() => s.rest("POST", `${SMTP}/404404/_activate`), 404, 5);
    await rejects(() => s.rest("DELETE", `${SMTP}/404404`), 404, 5);
  });

  it("patches keep the sealed password unless a new one is given; an empty user removes both", async () => {
    const id = await createProvider(valid());
    const patched = await s.rest("PATCH", `${SMTP}/${id}`, {
      json: { description: "renamed", sender_name: "" },
    });
    assert.equal(patched.status, 200, patched.text);
    assert.equal(patched.json.details.sequence, "2");
    const same = await s.rest("PATCH", `${SMTP}/${id}`, { json: { description: "renamed" } });
    assert.equal(same.json.details.sequence, "2", "a patch that changes nothing stores nothing");
    // the kept password still authenticates
    const sent = await s.rest("POST", `${SMTP}/${id}/_test`, { json: { receiver_address: "c@example.com" } });
    assert.equal(sent.status, 200, sent.text);
    const got = await s.rest("GET", `${SMTP}/${id}`);
    assert.equal(got.json.provider.provider.description, "renamed");
    assert.equal(got.json.provider.provider.sender_name, "");

    // a new password replaces it (the event only flags it)
    assert.equal((await s.rest("PATCH", `${SMTP}/${id}`, { json: { password: "wrong" } })).status, 200);
    const denied = await s.rest("POST", `${SMTP}/${id}/_test`, {
      json: { receiver_address: "c@example.com" },
    });
    assert.match(denied.json.message, /535/);
    const [changed] = await s.platform.db.query<{ payload: Record<string, unknown> }>(
      "SELECT payload FROM events WHERE aggregate_id = $1 ORDER BY sequence DESC LIMIT 1",
      [id],
    );
    assert.deepEqual(changed.payload, { password_changed: true });

    await rejects(
      () => s.rest("PATCH", `${SMTP}/${id}`, { json: { host: "nope" } }),
      400,
      3,
      "provider.host: must be host:port",
    );
    await rejects(
      () => s.rest("PATCH", `${SMTP}/${id}`, { json: { reply_to_address: "x" } }),
      400,
      3,
      "provider.reply_to_address: must match",
    );
    assert.equal(
      (await s.rest("PATCH", `${SMTP}/${id}`, { json: { reply_to_address: "r@example.com" } })).status,
      200,
    );
    assert.equal(
      (await s.rest("GET", `${SMTP}/${id}`)).json.provider.provider.reply_to_address,
      "r@example.com",
    );
    assert.equal((await s.rest("PATCH", `${SMTP}/${id}`, { json: { reply_to_address: "" } })).status, 200);
    assert.equal((await s.rest("GET", `${SMTP}/${id}`)).json.provider.provider.reply_to_address, undefined);
    const noAuth = await s.rest("PATCH", `${SMTP}/${id}`, { json: { user: "" } });
    assert.equal(noAuth.status, 200, noAuth.text);
    assert.equal((await s.rest("GET", `${SMTP}/${id}`)).json.provider.provider.user, undefined);
    const rows = await s.platform.db.query(
      "SELECT 1 FROM notification_provider_secrets WHERE provider_id = $1",
      [id],
    );
    assert.equal(rows.length, 0, "the password went with the user");
    await rejects(
      () => s.rest("PATCH", `${SMTP}/${id}`, { json: { user: "someone" } }),
      400,
      3,
      "provider.password: is required with provider.user",
    );
  });

  it("at most one provider is active: activating one deactivates the other", async () => {
    const a = await createProvider(valid({ description: "first active" }));
    const b = await createProvider(valid({ description: "second active" }));
    const state = async (id: string) => (await s.rest("GET", `${SMTP}/${id}`)).json.provider.state;
    assert.equal((await s.rest("POST", `${SMTP}/${a}/_activate`)).status, 200);
    assert.equal(await state(a), "PROVIDER_STATE_ACTIVE");
    const again = await s.rest("POST", `${SMTP}/${a}/_activate`);
    assert.equal(again.status, 200);
    const activated = await s.rest("POST", `${SMTP}/${b}/_activate`);
    assert.equal(activated.status, 200, activated.text);
    assert.equal(await state(a), "PROVIDER_STATE_INACTIVE");
    assert.equal(await state(b), "PROVIDER_STATE_ACTIVE");
    const active = await s.rest("POST", `${SMTP}/_search`, {
      json: [{ state: { state: "PROVIDER_STATE_ACTIVE" } }],
    });
    assert.deepEqual(
      active.json.result.map((r: { details: { id: string } }) => r.details.id),
      [b],
    );
    const [superseded] = await s.platform.db.query<{ payload: unknown }>(
      "SELECT payload FROM events WHERE aggregate_id = $1 AND event_type = 'smtp_provider.deactivated'",
      [a],
    );
    assert.deepEqual(superseded.payload, { superseded_by: b });
    // the sender uses the active one
    await s.platform.deps.notifications.sendEmail(s.platform.bootstrapResult!.instanceId, {
      to: "outbox@example.com",
      subject: "through the active provider",
      text: "hello",
    });
    assert.equal(s.startTls.received.at(-1)!.mail.subject, "through the active provider");

    assert.equal((await s.rest("POST", `${SMTP}/${b}/_deactivate`)).status, 200);
    assert.equal(await state(b), "PROVIDER_STATE_INACTIVE");
    await assert.rejects(
      s.platform.deps.notifications.sendEmail(s.platform.bootstrapResult!.instanceId, {
        to: "x@example.com",
        subject: "s",
        text: "t",
      }),
      /no SMTP provider is active/,
    );
    // deleting the active provider leaves none active
    await s.rest("POST", `${SMTP}/${a}/_activate`);
    assert.equal((await s.rest("DELETE", `${SMTP}/${a}`)).status, 200);
    await rejects(() => s.rest("GET", `${SMTP}/${a}`), 404, 5);
    const none = await s.rest("POST", `${SMTP}/_search`, {
      json: [{ state: { state: "PROVIDER_STATE_ACTIVE" } }],
    });
    assert.equal(none.json.details.total_result, "0");
  });

  it("searches page, sort and filter like the other resource searches", async () => {
    for (const d of ["page c", "page a", "page b"]) await createProvider(valid({ description: d }));
    const filter = [{ description: { description: "page ", method: "TEXT_FILTER_METHOD_STARTS_WITH" } }];
    const first = await s.rest(
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
    const last = await s.rest(
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
    const ignoreCase = await s.rest("POST", `${SMTP}/_search`, {
      json: [{ description: { description: "PAGE B", method: "TEXT_FILTER_METHOD_EQUALS_IGNORE_CASE" } }],
    });
    assert.equal(ignoreCase.json.result.length, 1);
  });

  it("permissions: IAM_OWNER_VIEWER reads but cannot write; an org owner cannot read", async () => {
    const id = await createProvider(valid());
    const asViewer = restClient(s.platform, () => s.callers.viewer);
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
    const asOrgOwner = restClient(s.platform, () => s.callers.orgOwner);
    await rejects(() => asOrgOwner("GET", `${SMTP}/${id}`), 403, 7);
    await rejects(() => asOrgOwner("POST", `${SMTP}/_search`), 403, 7);
    await rejects(() => asOrgOwner("POST", SMTP, { json: valid() }), 403, 7);
  });

  it("the read model rebuilds from the events; the sealed secrets stay", async () => {
    const snapshot = (table: string) =>
      s.platform.db.query(`SELECT * FROM ${table} ORDER BY (to_jsonb(${table}.*))::text`);
    const providers = await snapshot("notification_providers");
    const secrets = await snapshot("notification_provider_secrets");
    assert.ok(providers.length > 5);
    assert.ok(await s.platform.eventStore.rebuild("notification_providers"));
    assert.deepEqual(await snapshot("notification_providers"), providers);
    assert.deepEqual(await snapshot("notification_provider_secrets"), secrets);
  });

  it("serves Connect: create, get, and a failing test as FailedPrecondition", async () => {
    const client = createClient(
      PlatformNotifications,
      createConnectTransport({ baseUrl: s.platform.url, httpVersion: "1.1" }),
    );
    const headers = { authorization: `Bearer ${s.callers.owner}` };
    const created = await client.createSMTPProvider(
      {
        provider: {
          description: "over connect",
          senderAddress: "noreply@example.com",
          senderName: "",
          host: `smtp.test:${s.startTls.port}`,
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
    assert.match(failed!.rawMessage, /^the SMTP server answered: 550 \(answer text withheld/);
  });
});
