/**
 * The bound on one-time codes the sessions API sends by SMS and e-mail: per user and per recipient, at
 * most OTP_SENDS_PER_WINDOW in OTP_SEND_WINDOW_SECONDS and one per OTP_SEND_INTERVAL_SECONDS; beyond it
 * 429 RESOURCE_EXHAUSTED with Retry-After, and nothing is stored or sent. Time passes by moving the
 * outbox rows' creation back (the bound counts them).
 */
import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import {
  addMachineUser,
  assertRejected,
  type Json,
  type RestReply,
  restClient,
  startPlatform,
  type TestPlatform,
} from "../../../test/helpers.ts";
import { type SmtpReceiver, startSmtpReceiver } from "../../../test/smtp-receiver.ts";
import { testTime } from "../../../test/time.ts";
import {
  OTP_SEND_INTERVAL_SECONDS,
  OTP_SEND_WINDOW_SECONDS,
  OTP_SENDS_PER_WINDOW,
} from "../../domain/user/factors/otp-sends.ts";
import { PlatformSessions } from "../../gen/platform/resources/session/v3alpha/session_service_pb.ts";

const SESSIONS = "/resources/v3alpha/sessions";
const USERS = "/resources/v3alpha/users";
const PASSWORD = "Correct-Horse-1!";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("sessions: the bound on codes sent by SMS and e-mail", () => {
  let platform: TestPlatform;
  let owner: string;
  let smtp: SmtpReceiver;
  let gateway: http.Server;
  const texts: string[] = [];
  const rest = restClient(
    () => platform,
    () => owner,
  );

  before(async () => {
    smtp = await startSmtpReceiver({});
    gateway = http.createServer((req, res) => {
      let raw = "";
      req.on("data", (d) => (raw += d));
      req.on("end", () => {
        texts.push(raw.replaceAll(" ", ""));
        res.writeHead(202).end();
      });
    });
    await new Promise<void>((r) => gateway.listen(0, "127.0.0.1", r));
    platform = await startPlatform({ listen: true });
    ({ token: owner } = await addMachineUser(platform, {
      username: "owner",
      membership: { contextType: "instance", roles: ["IAM_OWNER"] },
    }));
    for (const [path, body] of [
      [
        "/resources/v3alpha/smtp_providers",
        { description: "mail", sender_address: "noreply@example.com", host: `127.0.0.1:${smtp.port}` },
      ],
      [
        "/resources/v3alpha/sms_providers",
        {
          description: "sms",
          http: { endpoint: `http://127.0.0.1:${(gateway.address() as AddressInfo).port}/send` },
        },
      ],
    ] as const) {
      const created = await rest("POST", path, { json: body });
      assert.equal(created.status, 201, created.text);
      assert.equal((await rest("POST", `${path}/${created.json.details.id}/_activate`)).status, 200);
    }
  });
  after(async () => {
    await platform.stop();
    await smtp.close();
    await new Promise((r) => gateway.close(r));
  });

  let seq = 0;
  /** A user with codes by SMS and e-mail (`phone`, default one of its own) and a signed-in session. */
  const signedIn = async (phone = `+41 44 555 30 ${String(++seq).padStart(2, "0")}`) => {
    const username = `sends-${++seq}`;
    const r = await rest("POST", USERS, {
      json: {
        username,
        human: {
          profile: { given_name: "Hedy", family_name: "Lamarr" },
          email: { address: `${username}@example.com`, is_verified: true },
          phone: { number: phone, is_verified: true },
          password: { password: PASSWORD, change_required: false },
        },
      },
    });
    assert.equal(r.status, 201, r.text);
    const id = r.json.details.id as string;
    for (const factor of ["otp_sms", "otp_email"])
      assert.equal((await rest("POST", `${USERS}/${id}/${factor}`)).status, 200);
    const created = await rest("POST", SESSIONS, {
      json: { checks: { user: { login_name: username }, password: { password: PASSWORD } } },
    });
    assert.equal(created.status, 201, created.text);
    return {
      id,
      username,
      number: phone.replaceAll(" ", ""),
      session: { id: created.json.details.id as string, token: created.json.session_token as string },
    };
  };
  const ask = (session: { id: string; token: string }, challenges: Json) =>
    rest("PATCH", `${SESSIONS}/${session.id}`, { json: { session_token: session.token, challenges } });
  /** The outbox rows of the user's codes of `type`. */
  const queued = async (userId: string, type = "OTP_SMS") =>
    Number(
      (
        await platform.db.query<{ n: number }>(
          "SELECT count(*)::int AS n FROM notification_messages WHERE user_id = $1 AND type = $2",
          [userId, type],
        )
      )[0].n,
    );
  /** As if `seconds` passed since the codes queued so far. */
  const age = (seconds: number) =>
    platform.db.query(`UPDATE notification_messages SET created_at = created_at - $1 * interval '1 second'`, [
      seconds,
    ]);
  const textsTo = (number: string) => texts.filter((t) => t.includes(number)).length;
  /** Waits until `n` texts reached `number`, then a little longer to see that no more come. */
  const expectTexts = async (number: string, n: number) => {
    for (let i = 0; i < testTime(200) && textsTo(number) < n; i++) await sleep(25);
    await sleep(300);
    assert.equal(textsTo(number), n);
  };
  const assertLimited = async (reply: () => Promise<RestReply>, wait: { min: number; max: number }) => {
    let seconds = 0;
    await assertRejected(
      platform,
      async () => {
        const r = await reply();
        seconds = Number(r.headers["retry-after"]);
        return r;
      },
      429,
      8,
      /^at most 5 codes per 10 minutes and one per 30 seconds for a user and a recipient/,
    );
    assert.ok(seconds >= wait.min && seconds <= wait.max, `Retry-After ${seconds}`);
  };

  it(`SMS: the ${OTP_SENDS_PER_WINDOW}th code in ${OTP_SEND_WINDOW_SECONDS / 60} minutes is sent, one more is 429 with Retry-After and sends nothing`, async () => {
    const user = await signedIn();
    assert.equal((await ask(user.session, { otp_sms: {} })).status, 200);
    // a second code right away: too soon
    await assertLimited(() => ask(user.session, { otp_sms: {} }), {
      min: OTP_SEND_INTERVAL_SECONDS - 5,
      max: OTP_SEND_INTERVAL_SECONDS,
    });
    for (let n = 2; n <= OTP_SENDS_PER_WINDOW; n++) {
      await age(OTP_SEND_INTERVAL_SECONDS);
      const r = await ask(user.session, { otp_sms: {} });
      assert.equal(r.status, 200, `code ${n}: ${r.text}`);
    }
    await age(OTP_SEND_INTERVAL_SECONDS);
    // the first was sent 5 × 30 s ago: the window frees a send 600 - 150 s after it
    const freed = OTP_SEND_WINDOW_SECONDS - OTP_SENDS_PER_WINDOW * OTP_SEND_INTERVAL_SECONDS;
    await assertLimited(() => ask(user.session, { otp_sms: {} }), { min: freed - 5, max: freed });
    assert.equal(await queued(user.id), OTP_SENDS_PER_WINDOW);
    await expectTexts(user.number, OTP_SENDS_PER_WINDOW);
    // e-mail codes are another channel; a code answered (return_code) sends nothing and is not bounded
    assert.equal((await ask(user.session, { otp_email: {} })).status, 200);
    assert.equal((await ask(user.session, { otp_sms: { return_code: true } })).status, 200);
    // once the first send leaves the window, one more may go
    await age(freed);
    assert.equal((await ask(user.session, { otp_sms: {} })).status, 200);
    await expectTexts(user.number, OTP_SENDS_PER_WINDOW + 1);
  });

  it("a number shared by two users: codes to it are bounded together; Connect answers RESOURCE_EXHAUSTED", async () => {
    const shared = "+41 44 555 39 99";
    const alice = await signedIn(shared);
    const bob = await signedIn(shared);
    assert.equal((await ask(alice.session, { otp_sms: {} })).status, 200);
    await assertLimited(() => ask(bob.session, { otp_sms: {} }), { min: 1, max: OTP_SEND_INTERVAL_SECONDS });
    const sessions = createClient(
      PlatformSessions,
      createConnectTransport({ baseUrl: platform.url!, httpVersion: "1.1" }),
    );
    await assert.rejects(
      sessions.patchSession(
        {
          id: bob.session.id,
          session: { sessionToken: bob.session.token, challenges: { otpSms: { returnCode: false } } },
        },
        { headers: { authorization: `Bearer ${owner}` } },
      ),
      (error: unknown) =>
        error instanceof ConnectError &&
        error.code === Code.ResourceExhausted &&
        Number(error.metadata.get("retry-after")) > 0,
    );
    assert.equal(await queued(bob.id), 0);
    await age(OTP_SEND_INTERVAL_SECONDS);
    assert.equal((await ask(bob.session, { otp_sms: {} })).status, 200);
    await expectTexts(alice.number, 2);
  });
});
