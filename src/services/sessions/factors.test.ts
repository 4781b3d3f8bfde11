/**
 * Second-factor checks and challenges of the sessions API (REST and Connect): TOTP (one step either way,
 * each step once), recovery codes (each once, replaced by new ones), codes by e-mail (a real SMTP server)
 * and SMS, five wrong codes invalidating a challenge, wrong answers counting towards the factor's own
 * lockout (not the password's; more in ./factor-lockout.test.ts), the session's factors and its `amr`.
 */
import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { generate } from "otplib";
import {
  addMachineUser,
  assertRejected,
  type Json,
  restClient,
  startPlatform,
  type TestPlatform,
} from "../../../test/helpers.ts";
import { type SmtpReceiver, startSmtpReceiver } from "../../../test/smtp-receiver.ts";
import { testTime } from "../../../test/time.ts";
import { PlatformSessions } from "../../gen/platform/resources/session/v3alpha/session_service_pb.ts";
import { findLoginSession } from "../../login/sessions.ts";

const SESSIONS = "/resources/v3alpha/sessions";
const USERS = "/resources/v3alpha/users";
const PASSWORD = "Correct-Horse-1!";
const MAX_ATTEMPTS = 7;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const nowSeconds = () => Math.floor(Date.now() / 1000);
/** The TOTP code of `secret` for the time step `offset` steps from now. */
const totpAt = (secret: string, offset: number) => generate({ secret, epoch: nowSeconds() + offset * 30 });
/**
 * Waits for a fresh time step when the current one ends within 10 s, so that the codes a test computes
 * for "now ± n steps" are still that when the server checks them.
 */
async function freshStep(): Promise<void> {
  const left = 30 - (nowSeconds() % 30);
  if (left < 10) await sleep(left * 1000 + 200);
}

describe("sessions: second-factor checks and challenges", () => {
  let platform: TestPlatform;
  let owner: string;
  let smtp: SmtpReceiver;
  let gateway: http.Server;
  const texts: Array<Record<string, unknown>> = [];
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
        texts.push(JSON.parse(raw));
        res.writeHead(202).end();
      });
    });
    await new Promise<void>((r) => gateway.listen(0, "127.0.0.1", r));
    platform = await startPlatform({
      listen: true,
      env: {
        PLATFORM_MAX_PASSWORD_ATTEMPTS: String(MAX_ATTEMPTS),
        PLATFORM_PASSWORD_LOCKOUT_SECONDS: "600",
      },
    });
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
  const createHuman = async () => {
    const username = `second-${++seq}`;
    const r = await rest("POST", USERS, {
      json: {
        username,
        human: {
          profile: { given_name: "Grace", family_name: "Hopper" },
          email: { address: `${username}@example.com`, is_verified: true },
          phone: { number: `+41 44 555 10 ${String(seq).padStart(2, "0")}`, is_verified: true },
          password: { password: PASSWORD, change_required: false },
        },
      },
    });
    assert.equal(r.status, 201, r.text);
    return { id: r.json.details.id as string, username };
  };
  /** A user with an active TOTP whose registration used the code of step `offset` (default -1). */
  const withTotp = async () => {
    const user = await createHuman();
    const registered = await rest("POST", `${USERS}/${user.id}/totp`);
    assert.equal(registered.status, 200, registered.text);
    const secret = registered.json.secret as string;
    const verified = await rest("POST", `${USERS}/${user.id}/totp/_verify`, {
      json: { code: await totpAt(secret, -1) },
    });
    assert.equal(verified.status, 200, verified.text);
    return { ...user, secret };
  };
  const create = (checks: Json, challenges?: Json) =>
    rest("POST", SESSIONS, { json: { checks, ...(challenges ? { challenges } : {}) } });
  const patch = (id: string, token: string, checks: Json, challenges?: Json) =>
    rest("PATCH", `${SESSIONS}/${id}`, {
      json: { session_token: token, checks, ...(challenges ? { challenges } : {}) },
    });
  const factorsOf = async (id: string) =>
    (await rest("GET", `${SESSIONS}/${id}`)).json.session.session.factors;
  const signIn = async (username: string) => {
    const r = await create({ user: { login_name: username }, password: { password: PASSWORD } });
    assert.equal(r.status, 201, r.text);
    return { id: r.json.details.id as string, token: r.json.session_token as string };
  };
  const userOf = async (id: string) => (await rest("GET", `${USERS}/${id}`)).json.user;

  it("TOTP: ±1 step accepted, ±2 refused, each step once; the session's factors and amr show it", async () => {
    await freshStep();
    const user = await createHuman();
    const secret = (await rest("POST", `${USERS}/${user.id}/totp`)).json.secret as string;
    for (const offset of [-2, 2])
      await assertRejected(
        platform,
        async () =>
          rest("POST", `${USERS}/${user.id}/totp/_verify`, { json: { code: await totpAt(secret, offset) } }),
        400,
        3,
      );
    const verified = await rest("POST", `${USERS}/${user.id}/totp/_verify`, {
      json: { code: await totpAt(secret, -1) },
    });
    assert.equal(verified.status, 200, verified.text);

    const session = await signIn(user.username);
    assert.equal((await factorsOf(session.id)).totp, undefined);
    // step +2 is outside the window (and later than the used step -1: not refused as a replay)
    const outside = await patch(session.id, session.token, { totp: { code: await totpAt(secret, 2) } });
    assert.equal(outside.status, 400, outside.text);
    assert.equal(outside.json.message, "checks.totp.code: is wrong");
    const plusOne = await totpAt(secret, 1);
    const passed = await patch(session.id, session.token, { totp: { code: plusOne } });
    assert.equal(passed.status, 200, passed.text);
    const factors = await factorsOf(session.id);
    assert.ok(factors.totp.verified_at, JSON.stringify(factors));
    assert.ok(factors.password.verified_at);
    // used: the same code, and the current step's (earlier than the used one), are refused
    for (const code of [plusOne, await totpAt(secret, 0)]) {
      const replay = await patch(session.id, session.token, { totp: { code } });
      assert.equal(replay.status, 400, replay.text);
      assert.equal(replay.json.message, "checks.totp.code: is wrong");
    }
    const login = await findLoginSession(platform.db, platform.bootstrapResult!.instanceId, session.id);
    assert.deepEqual(login?.amr, ["pwd", "otp", "mfa"]);
  });

  it("a factor the user has not activated: FAILED_PRECONDITION, nothing stored", async () => {
    const user = await createHuman();
    const session = await signIn(user.username);
    await assertRejected(
      platform,
      () => patch(session.id, session.token, { totp: { code: "123456" } }),
      400,
      9,
      /no active TOTP/,
    );
    await assertRejected(
      platform,
      () => patch(session.id, session.token, { recovery_code: { code: "AAAAA-BBBBB" } }),
      400,
      9,
      /no active recovery codes/,
    );
    await assertRejected(
      platform,
      () => patch(session.id, session.token, {}, { otp_email: { return_code: true } }),
      400,
      9,
      /no active e-mail code/,
    );
    await assertRejected(
      platform,
      () => create({ user: { login_name: user.username }, totp: { code: "123456" } }),
      400,
      9,
    );
  });

  it("recovery codes: each accepted once (dashes and case do not matter), replaced by new ones", async () => {
    const user = await createHuman();
    const codes = (await rest("POST", `${USERS}/${user.id}/recovery_codes`)).json.codes as string[];
    const created = await create({
      user: { login_name: user.username },
      password: { password: PASSWORD },
      recovery_code: { code: codes[3].replace("-", "").toLowerCase() },
    });
    assert.equal(created.status, 201, created.text);
    assert.ok((await factorsOf(created.json.details.id)).recovery_code.verified_at);
    const session = await signIn(user.username);
    const again = await patch(session.id, session.token, { recovery_code: { code: codes[3] } });
    assert.equal(again.status, 400, again.text);
    assert.equal(again.json.code, 3);
    assert.equal((await patch(session.id, session.token, { recovery_code: { code: codes[4] } })).status, 200);
    const login = await findLoginSession(platform.db, platform.bootstrapResult!.instanceId, session.id);
    assert.deepEqual(login?.amr, ["pwd", "otp", "mfa"]);

    await rest("POST", `${USERS}/${user.id}/recovery_codes`);
    const replaced = await patch(session.id, session.token, { recovery_code: { code: codes[5] } });
    assert.equal(replaced.status, 400, "the earlier codes are gone");
  });

  it("otp_email: the code is e-mailed (OTP_EMAIL) and checked once; return_code answers it and sends nothing", async () => {
    const user = await createHuman();
    assert.equal((await rest("POST", `${USERS}/${user.id}/otp_email`)).status, 200);
    const created = await create(
      { user: { login_name: user.username }, password: { password: PASSWORD } },
      { otp_email: {} },
    );
    assert.equal(created.status, 201, created.text);
    assert.deepEqual(created.json.challenges, { otp_email: "", otp_sms: "" }, "sent, not answered");
    const { details, session_token: token } = created.json;
    let mail: (typeof smtp.received)[number] | undefined;
    for (let i = 0; i < testTime(200) && !mail; i++) {
      mail = smtp.received.find((m) => m.envelope.to.includes(`${user.username}@example.com`));
      if (!mail) await sleep(25);
    }
    assert.ok(mail, "the code was e-mailed");
    const code = /\b(\d{6})\b/.exec(mail.mail.text ?? "")?.[1];
    assert.ok(code, mail.mail.text ?? "");
    const challenges = await platform.db.query<{ payload: Json }>(
      "SELECT payload FROM events WHERE aggregate_id = $1 AND event_type = 'session.challenge.added'",
      [details.id],
    );
    assert.equal(challenges.length, 1);
    assert.ok(!JSON.stringify(challenges[0].payload).includes(code!), "only the code's keyed hash is stored");
    const checked = await patch(details.id, token, { otp_email: { code } });
    assert.equal(checked.status, 200, checked.text);
    assert.ok((await factorsOf(details.id)).otp_email.verified_at);
    await assertRejected(
      platform,
      () => patch(details.id, token, { otp_email: { code: code! } }),
      400,
      9,
      /no open otp_email challenge/,
    );

    const mails = smtp.received.length;
    const returned = await patch(details.id, token, {}, { otp_email: { return_code: true } });
    assert.equal(returned.status, 200, returned.text);
    assert.match(returned.json.challenges.otp_email, /^\d{6}$/);
    assert.equal(
      (await patch(details.id, token, { otp_email: { code: returned.json.challenges.otp_email } })).status,
      200,
    );
    await sleep(300);
    assert.equal(smtp.received.length, mails, "return_code sends nothing");
  });

  it("otp_sms: the code is texted (OTP_SMS) through the SMS provider and checked", async () => {
    const user = await createHuman();
    assert.equal((await rest("POST", `${USERS}/${user.id}/otp_sms`)).status, 200);
    const session = await signIn(user.username);
    const asked = await patch(session.id, session.token, {}, { otp_sms: {} });
    assert.equal(asked.status, 200, asked.text);
    assert.equal(asked.json.challenges.otp_sms, "", "sent, not answered");
    const number = `+41 44 555 10 ${String(seq).padStart(2, "0")}`.replaceAll(" ", "");
    let text: Record<string, unknown> | undefined;
    for (let i = 0; i < testTime(200) && !text; i++) {
      text = texts.find((t) => JSON.stringify(t).replaceAll(" ", "").includes(number));
      if (!text) await sleep(25);
    }
    assert.ok(text, `texted: ${JSON.stringify(texts)}`);
    const code = /\b(\d{6})\b/.exec(JSON.stringify(text))?.[1];
    assert.ok(code, JSON.stringify(text));
    assert.equal((await patch(session.id, session.token, { otp_sms: { code } })).status, 200);
    assert.ok((await factorsOf(session.id)).otp_sms.verified_at);
  });

  it("otp_sms: five wrong codes invalidate the challenge; they are not counted on the password", async () => {
    const user = await createHuman();
    assert.equal((await rest("POST", `${USERS}/${user.id}/otp_sms`)).status, 200);
    const session = await signIn(user.username);
    const asked = await patch(session.id, session.token, {}, { otp_sms: { return_code: true } });
    assert.equal(asked.status, 200, asked.text);
    const code = asked.json.challenges.otp_sms as string;
    const wrong = code === "000000" ? "111111" : "000000";
    for (let i = 1; i <= 5; i++) {
      const r = await patch(session.id, session.token, { otp_sms: { code: wrong } });
      assert.equal(r.status, 400, r.text);
      assert.equal(r.json.message, "checks.otp_sms.code: is wrong or expired");
      assert.equal((await userOf(user.id)).human.failed_password_attempts, 0);
    }
    await assertRejected(
      platform,
      () => patch(session.id, session.token, { otp_sms: { code } }),
      400,
      9,
      /no open otp_sms challenge/,
    );
    const again = await patch(session.id, session.token, {}, { otp_sms: { return_code: true } });
    const right = await patch(session.id, session.token, {
      otp_sms: { code: again.json.challenges.otp_sms },
    });
    assert.equal(right.status, 200, right.text);
    assert.equal((await userOf(user.id)).human.failed_password_attempts, 0);
    assert.ok((await factorsOf(session.id)).otp_sms.verified_at);
  });

  it(`wrong TOTP codes count towards TOTP's lockout: the ${MAX_ATTEMPTS}th locks TOTP out, not the password`, async () => {
    await freshStep();
    const user = await withTotp();
    const session = await signIn(user.username);
    const right = await totpAt(user.secret, 0);
    const wrong = right === "000000" ? "111111" : "000000";
    for (let i = 1; i <= MAX_ATTEMPTS; i++) {
      const r = await patch(session.id, session.token, { totp: { code: wrong } });
      assert.equal(r.status, 400, r.text);
      assert.equal(r.json.code, 3);
    }
    const human = (await userOf(user.id)).human;
    assert.equal(human.failed_password_attempts, 0);
    assert.equal(human.password_locked_until, undefined);
    await assertRejected(
      platform,
      () => patch(session.id, session.token, { totp: { code: right } }),
      400,
      9,
      /totp checks are locked until/,
    );
    await assertRejected(
      platform,
      () =>
        create({
          user: { login_name: user.username },
          password: { password: PASSWORD },
          totp: { code: right },
        }),
      400,
      9,
      /totp checks are locked until/,
    );
    assert.equal((await signIn(user.username)).token.length > 0, true, "the password still signs in");
  });

  it("Connect: create with a password and a TOTP code; a wrong code is INVALID_ARGUMENT; challenges answered", async () => {
    await freshStep();
    const user = await withTotp();
    assert.equal((await rest("POST", `${USERS}/${user.id}/otp_email`)).status, 200);
    const sessions = createClient(
      PlatformSessions,
      createConnectTransport({ baseUrl: platform.url, httpVersion: "1.1" }),
    );
    const headers = { authorization: `Bearer ${owner}` };
    const right = await totpAt(user.secret, 0);
    const failed = await sessions
      .createSession(
        {
          session: {
            checks: {
              user: { search: { case: "loginName", value: user.username } },
              password: { password: PASSWORD },
              totp: { code: right === "000000" ? "111111" : "000000" },
            },
          },
        },
        { headers },
      )
      .then(
        () => undefined,
        (e: unknown) => ConnectError.from(e),
      );
    assert.equal(failed?.code, Code.InvalidArgument);
    const created = await sessions.createSession(
      {
        session: {
          checks: {
            user: { search: { case: "loginName", value: user.username } },
            password: { password: PASSWORD },
            totp: { code: right },
          },
          challenges: { otpEmail: { returnCode: true } },
        },
      },
      { headers },
    );
    assert.match(created.challenges?.otpEmail ?? "", /^\d{6}$/);
    const got = await sessions.getSession({ id: created.details!.id }, { headers });
    assert.ok(got.session?.session?.factors?.totp?.verifiedAt);
    const patched = await sessions.patchSession(
      {
        id: created.details!.id,
        session: {
          sessionToken: created.sessionToken,
          checks: { otpEmail: { code: created.challenges!.otpEmail } },
        },
      },
      { headers },
    );
    assert.equal(patched.challenges, undefined);
    const after = await sessions.getSession({ id: created.details!.id }, { headers });
    assert.ok(after.session?.session?.factors?.otpEmail?.verifiedAt);
  });
});
