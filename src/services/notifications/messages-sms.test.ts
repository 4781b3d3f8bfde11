import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import { restClient, startPlatform, type TestPlatform, testTime, within } from "../../../test/helpers.ts";
import { verifySignature } from "../../execution/signing.ts";
import type { NewMessage } from "../../notifications/outbox.ts";
import { addCallers } from "../actions/testing.ts";

const SEARCH = "/resources/v3alpha/notifications/_search";
const SMS = "/resources/v3alpha/sms_providers";
const HELD = -1;

/** The notification outbox's SMS messages: a signed POST to a local gateway, retried on 503, refused on 400. */
describe("notification delivery: SMS", () => {
  let platform: TestPlatform;
  let callers: Awaited<ReturnType<typeof addCallers>>;
  let gateway: http.Server;
  let signingKey: string;
  const posts: { body: Record<string, unknown>; signature: string; raw: string }[] = [];
  /** The next answers of the gateway (then 202); HELD: 202 once the test calls the function in `held`. */
  const answers: number[] = [];
  const held: (() => void)[] = [];
  const rest = restClient(
    () => platform,
    () => callers.owner,
  );

  before(async () => {
    gateway = http.createServer((req, res) => {
      let raw = "";
      req.on("data", (d) => (raw += d));
      req.on("end", () => {
        posts.push({ body: JSON.parse(raw), signature: String(req.headers["platform-signature"]), raw });
        const answer = answers.shift() ?? 202;
        if (answer === HELD) held.push(() => res.writeHead(202).end());
        else res.writeHead(answer).end(answer === 202 ? "" : `status ${answer}`);
      });
    });
    await new Promise<void>((r) => gateway.listen(0, "127.0.0.1", r));
    platform = await startPlatform({
      listen: true,
      env: { PLATFORM_NOTIFICATION_RETRY_DELAY_MS: "50", PLATFORM_NOTIFICATION_MAX_ATTEMPTS: "5" },
    });
    callers = await addCallers(platform);
  });
  after(async () => {
    await platform.stop();
    await new Promise((r) => gateway.close(r));
  });

  const userId = () => platform.bootstrapResult!.adminUserId;
  const queue = async (message: Partial<NewMessage> = {}) => {
    const instanceId = platform.bootstrapResult!.instanceId;
    const id = await platform.db.transaction((tx) =>
      platform.messages.queue(tx, {
        instanceId,
        userId: userId(),
        type: "VERIFY_PHONE",
        recipient: "+41791234567",
        origin: "http://localhost:8080",
        code: { value: "493817", expiresIn: 3600 },
        ...message,
      }),
    );
    platform.messages.worker.wake();
    return id;
  };
  const settled = async (id: string) => {
    for (const giveUp = Date.now() + testTime(10_000); Date.now() < giveUp; ) {
      const r = await rest("POST", SEARCH, { json: [{ type: { type: "VERIFY_PHONE" } }] });
      const found = (r.json.result ?? []).find((m: { details: { id: string } }) => m.details.id === id);
      if (found && found.state !== "NOTIFICATION_STATE_PENDING") return found;
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.fail(`message ${id} stayed pending`);
  };

  it("without an active SMS provider the message is FAILED with last_error", async () => {
    const message = await settled(await queue());
    assert.equal(message.state, "NOTIFICATION_STATE_FAILED");
    assert.equal(message.last_error, "no active SMS provider");
    assert.equal(message.channel, "NOTIFICATION_CHANNEL_SMS");
    assert.equal(posts.length, 0);
  });

  it("VERIFY_PHONE is POSTed signed with its code; a 503 is retried, a 400 fails at once", async () => {
    const port = (gateway.address() as AddressInfo).port;
    const created = await rest("POST", SMS, {
      json: { description: "gateway", http: { endpoint: `http://127.0.0.1:${port}/send` } },
    });
    assert.equal(created.status, 201, created.text);
    signingKey = created.json.signing_key;
    assert.equal((await rest("POST", `${SMS}/${created.json.details.id}/_activate`)).status, 200);

    answers.push(503, 503);
    const message = await settled(await queue());
    assert.equal(message.state, "NOTIFICATION_STATE_SENT", JSON.stringify(message));
    assert.equal(message.attempts, 3);
    assert.match(message.last_error, /503/);
    assert.equal(posts.length, 3);
    const last = posts.at(-1)!;
    assert.equal(last.body.recipient, "+41791234567");
    assert.equal(last.body.message_type, "VERIFY_PHONE");
    assert.equal(last.body.user_id, userId());
    assert.match(String(last.body.text), /493817/);
    assert.ok(verifySignature(last.signature, last.raw, signingKey));

    answers.push(400);
    const refused = await settled(await queue({ code: { value: "111222", expiresIn: 600 } }));
    assert.equal(refused.state, "NOTIFICATION_STATE_FAILED");
    assert.equal(refused.attempts, 1);
    assert.match(refused.last_error, /answered 400/);
  });

  it("the request that causes a message never waits for the provider", async () => {
    const created = await rest("POST", "/resources/v3alpha/users", {
      json: {
        username: "slow-phone",
        human: {
          profile: { given_name: "Slow", family_name: "Gateway" },
          email: { address: "slow@example.com" },
          phone: { number: "+41791110000" },
        },
      },
    });
    assert.equal(created.status, 201, created.text);
    const id = created.json.details.id as string;
    // the gateway holds its answer until the request has been answered: a request that waited for it
    // would never be
    answers.push(HELD);
    const sent = await within(
      rest("POST", `/resources/v3alpha/users/${id}/phone/_send_code`, { json: {} }),
      testTime(10_000),
      "the request waits for the SMS gateway",
    );
    assert.equal(sent.status, 200, sent.text);
    const r = await rest("POST", SEARCH, { json: [{ user_id: { user_id: id } }] });
    assert.equal(r.json.result[0].state, "NOTIFICATION_STATE_PENDING", "being sent");
    for (const release of held.splice(0)) release();
    const done = await settled(r.json.result[0].details.id);
    assert.equal(done.state, "NOTIFICATION_STATE_SENT");
  });
});
