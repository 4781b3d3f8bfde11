import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { assertRejected, restClient, startPlatform, type TestPlatform } from "../../../test/helpers.ts";
import { type SmtpReceiver, startSmtpReceiver } from "../../../test/smtp-receiver.ts";
import { testTime } from "../../../test/time.ts";
import { PlatformNotifications } from "../../gen/platform/resources/notification/v3alpha/notification_service_pb.ts";
import { MessageState } from "../../notifications/outbox.ts";
import { addCallers } from "../actions/testing.ts";

const SEARCH = "/resources/v3alpha/notifications/_search";
const USERS = "/resources/v3alpha/users";
const SMTP = "/resources/v3alpha/smtp_providers";

/**
 * The notification outbox: messages queued with their event, sent by the worker to a real SMTP server,
 * retried after a transient refusal, recorded FAILED without a provider; the record's search.
 */
describe("notification delivery", () => {
  let platform: TestPlatform;
  let callers: Awaited<ReturnType<typeof addCallers>>;
  let smtp: SmtpReceiver;
  let providerId: string;
  /** RCPT TO of `busy*` recipients is refused with 451 this many more times. */
  let busyRefusals = 0;
  const rest = restClient(
    () => platform,
    () => callers.owner,
  );

  before(async () => {
    smtp = await startSmtpReceiver({
      rejectAnswer: { code: 550, text: "5.1.1 mailbox unavailable" },
      refuseRcpt: (address) => {
        if (!address.startsWith("busy") || busyRefusals === 0) return undefined;
        busyRefusals--;
        return { code: 451, text: "4.3.0 try again later" };
      },
    });
    platform = await startPlatform({
      listen: true,
      env: { PLATFORM_NOTIFICATION_RETRY_DELAY_MS: "50", PLATFORM_NOTIFICATION_MAX_ATTEMPTS: "4" },
    });
    callers = await addCallers(platform);
  });
  after(async () => {
    await platform.stop();
    await smtp.close();
  });

  const activateProvider = async () => {
    const r = await rest("POST", SMTP, {
      json: {
        description: "loopback",
        sender_address: "noreply@example.com",
        host: `127.0.0.1:${smtp.port}`,
        tls: false,
      },
    });
    assert.equal(r.status, 201, r.text);
    providerId = r.json.details.id;
    assert.equal((await rest("POST", `${SMTP}/${providerId}/_activate`)).status, 200);
  };
  const createHuman = async (username: string, email: string, language = "en") => {
    const r = await rest("POST", USERS, {
      json: {
        username,
        human: {
          profile: { given_name: "Ada", family_name: "Lovelace", preferred_language: language },
          email: { address: email, is_verified: true },
        },
      },
    });
    assert.equal(r.status, 201, r.text);
    return r.json.details.id as string;
  };
  const setPassword = async (id: string) => {
    const r = await rest("POST", `${USERS}/${id}/_set_password`, { json: { password: "Secret-Pa55word!" } });
    assert.equal(r.status, 200, r.text);
  };
  const search = async (filters: unknown[]) => {
    const r = await rest("POST", SEARCH, { json: filters });
    assert.equal(r.status, 200, r.text);
    return (r.json.result ?? []) as Record<string, unknown>[];
  };
  /** The user's messages once none is pending any more. */
  const settled = async (userId: string) => {
    for (let i = 0; i < testTime(200); i++) {
      const rows = await search([{ user_id: { user_id: userId } }]);
      if (rows.length > 0 && rows.every((m) => m.state !== "NOTIFICATION_STATE_PENDING")) return rows;
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.fail(`the messages of ${userId} stayed pending`);
  };

  it("without an active provider a message is stored FAILED with last_error", async () => {
    const id = await createHuman("no-provider", "no-provider@example.com");
    await setPassword(id);
    const [message] = await settled(id);
    assert.equal(message.state, "NOTIFICATION_STATE_FAILED");
    assert.equal(message.last_error, "no active SMTP provider");
    assert.equal(message.type, "PASSWORD_CHANGED");
    assert.equal(message.channel, "NOTIFICATION_CHANNEL_EMAIL");
    assert.equal(message.recipient, "no-provider@example.com");
    assert.equal(message.attempts, 1);
    assert.equal(message.sent_at, undefined);
  });

  it("a password change sends PASSWORD_CHANGED in the user's language, without blocking the request", async () => {
    await activateProvider();
    const id = await createHuman("hedwig", "hedwig@example.com", "de");
    const before = smtp.received.length;
    await setPassword(id);
    const [message] = await settled(id);
    assert.equal(message.state, "NOTIFICATION_STATE_SENT", JSON.stringify(message));
    assert.ok(message.sent_at);
    assert.equal(message.attempts, 1);
    const mail = smtp.received.slice(before).find((m) => m.envelope.to.includes("hedwig@example.com"));
    assert.ok(mail, "the message arrived");
    assert.match(mail.mail.subject ?? "", /Passwort/);
    assert.match(mail.mail.text ?? "", /\/ui\/login\/loginname/);
  });

  it("a code is sealed in the outbox row, sent in the link, and erased once sent", async () => {
    const id = await createHuman("coded", "coded@example.com");
    const code = "K7Q2M9XW";
    const origin = await platform.db.transaction((tx) =>
      platform.messages.originOf(tx, platform.bootstrapResult!.instanceId),
    );
    const messageId = await platform.db.transaction((tx) =>
      platform.messages.queue(tx, {
        instanceId: platform.bootstrapResult!.instanceId,
        userId: id,
        type: "VERIFY_EMAIL",
        recipient: "coded@example.com",
        origin,
        code: { value: code, expiresIn: 3600 },
      }),
    );
    platform.messages.worker.wake();
    const [message] = await settled(id);
    assert.equal(message.state, "NOTIFICATION_STATE_SENT");
    const mail = smtp.received.find((m) => m.envelope.to.includes("coded@example.com"));
    assert.ok(mail);
    assert.ok(
      (mail.mail.text ?? "").includes(`/ui/login/verify-email?userID=${id}&code=${code}`),
      mail.mail.text ?? "",
    );
    const [row] = await platform.db.query<{ sealed_code: string | null }>(
      "SELECT sealed_code FROM notification_messages WHERE id = $1",
      [messageId],
    );
    assert.equal(row.sealed_code, null, "the sealed code is erased once sent");
    assert.ok(!JSON.stringify(await search([])).includes(code), "the code is never answered");
  });

  it("a code sealed in a row never reads in clear in the database while pending", async () => {
    const id = await createHuman("pending-code", "pending@example.com");
    const code = "ZX81SPEC";
    const messageId = await platform.db.transaction(async (tx) => {
      const queued = await platform.messages.queue(tx, {
        instanceId: platform.bootstrapResult!.instanceId,
        userId: id,
        type: "INIT",
        recipient: "pending@example.com",
        origin: "http://localhost:8080",
        code: { value: code, expiresIn: 3600 },
      });
      const [row] = await tx.query<Record<string, unknown>>(
        "SELECT * FROM notification_messages WHERE id = $1",
        [queued],
      );
      assert.ok(!JSON.stringify(row).includes(code), "no clear code in the row");
      assert.match(String(row.sealed_code), /^v1\./);
      return queued;
    });
    platform.messages.worker.wake();
    await settled(id);
    const [row] = await platform.db.query<{ sealed_code: string | null }>(
      "SELECT sealed_code FROM notification_messages WHERE id = $1",
      [messageId],
    );
    assert.equal(row.sealed_code, null);
  });

  it("a transient refusal (451) is retried with back-off until SENT; retries stop at the last attempt; a permanent refusal (550) fails at once", async () => {
    busyRefusals = 2;
    const id = await createHuman("busy", "busy@example.com");
    await setPassword(id);
    const [message] = await settled(id);
    assert.equal(message.state, "NOTIFICATION_STATE_SENT", JSON.stringify(message));
    assert.equal(message.attempts, 3);
    // the receiver is on loopback: the reply code is kept (a refusal to retry), the text is not
    assert.equal(
      message.last_error,
      "the SMTP server answered: 451 (answer text withheld: the provider's address is private)",
    );
    assert.equal(busyRefusals, 0);

    busyRefusals = 100;
    const down = await createHuman("busy-for-ever", "busy-for-ever@example.com");
    await setPassword(down);
    const [given] = await settled(down);
    assert.equal(given.state, "NOTIFICATION_STATE_FAILED");
    assert.equal(given.attempts, 4, "PLATFORM_NOTIFICATION_MAX_ATTEMPTS");
    busyRefusals = 0;

    const refused = await createHuman("rejected", "reject@example.com");
    await setPassword(refused);
    const [gone] = await settled(refused);
    assert.equal(gone.state, "NOTIFICATION_STATE_FAILED");
    assert.equal(gone.attempts, 1);
    // the receiver is on loopback: its reply code is kept (a refusal for good), its text is not
    assert.equal(
      gone.last_error,
      "the SMTP server answered: 550 (answer text withheld: the provider's address is private)",
    );
  });

  it("a message queued in a transaction that rolls back does not exist", async () => {
    const id = await createHuman("rolled-back", "rolled-back@example.com");
    await assert.rejects(
      platform.db.transaction(async (tx) => {
        await platform.messages.queue(tx, {
          instanceId: platform.bootstrapResult!.instanceId,
          userId: id,
          type: "PASSWORD_CHANGED",
          recipient: "rolled-back@example.com",
          origin: "http://localhost:8080",
        });
        throw new Error("the event failed");
      }),
      /the event failed/,
    );
    assert.deepEqual(await search([{ user_id: { user_id: id } }]), []);
    await assert.rejects(
      platform.db.transaction((tx) =>
        platform.messages.queue(tx, {
          instanceId: platform.bootstrapResult!.instanceId,
          userId: id,
          type: "VERIFY_EMAIL",
          recipient: "rolled-back@example.com",
          origin: "http://localhost:8080",
        }),
      ),
      /needs code/,
    );
    const [{ n }] = await platform.db.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM notification_messages WHERE user_id = $1",
      [id],
    );
    assert.equal(n, 0);
  });

  it("search filters by user, state and type; permissions; bad filters are refused; Connect", async () => {
    const sent = await search([{ state: { state: "NOTIFICATION_STATE_SENT" } }]);
    assert.ok(sent.length >= 3);
    assert.ok(sent.every((m) => m.state === "NOTIFICATION_STATE_SENT"));
    const typed = await search([{ type: { type: "VERIFY_EMAIL" } }]);
    assert.ok(typed.length >= 1 && typed.every((m) => m.type === "VERIFY_EMAIL"));
    const failed = await search([
      { state: { state: "NOTIFICATION_STATE_FAILED" } },
      { type: { type: "PASSWORD_CHANGED" } },
    ]);
    assert.ok(failed.length >= 2);
    const [first] = sent;
    assert.ok(first.details && typeof (first.details as { id: string }).id === "string");

    const asViewer = restClient(platform, () => callers.viewer);
    assert.equal((await asViewer("POST", SEARCH, { json: [] })).status, 200);
    const asOrgOwner = restClient(platform, () => callers.orgOwner);
    await assertRejected(platform, () => asOrgOwner("POST", SEARCH, { json: [] }), 403, 7);
    await assertRejected(platform, () => rest("POST", SEARCH, { json: [{}] }), 400, 3);
    await assertRejected(
      platform,
      () => rest("POST", SEARCH, { json: [{ state: { state: "NOTIFICATION_STATE_UNSPECIFIED" } }] }),
      400,
      3,
    );

    const client = createClient(
      PlatformNotifications,
      createConnectTransport({ baseUrl: platform.url, httpVersion: "1.1" }),
    );
    const headers = { authorization: `Bearer ${callers.owner}` };
    const found = await client.searchNotifications(
      { filters: [{ filter: { case: "state", value: { state: MessageState.failed } } }] },
      { headers },
    );
    assert.ok(found.result.length >= 2);
    assert.ok(found.result.every((m) => m.state === MessageState.failed && m.lastError !== ""));
    const denied = await client
      .searchNotifications({}, { headers: { authorization: `Bearer ${callers.nobody}` } })
      .then(
        () => undefined,
        (e: unknown) => ConnectError.from(e),
      );
    assert.equal(denied?.code, Code.PermissionDenied);
  });
});
