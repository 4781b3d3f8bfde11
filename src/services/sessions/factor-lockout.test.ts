/**
 * The lockout of second factors in the sessions API: each factor counts its wrong answers on its own, a
 * right password resets none of them, from the maximum on even the right answer is refused (and not
 * verified), and the lockout ends as the password's does (by itself, or with an administrator's unlock).
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { generate } from "otplib";
import {
  addMachineUser,
  assertRejected,
  type Json,
  restClient,
  startPlatform,
  type TestPlatform,
} from "../../../test/helpers.ts";

const SESSIONS = "/resources/v3alpha/sessions";
const USERS = "/resources/v3alpha/users";
const PASSWORD = "Correct-Horse-1!";
const MAX_ATTEMPTS = 3;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const nowSeconds = () => Math.floor(Date.now() / 1000);
const totpAt = (secret: string, offset: number) => generate({ secret, epoch: nowSeconds() + offset * 30 });
/** A fresh TOTP time step when the current one ends within 10 s (the codes computed stay valid). */
async function freshStep(): Promise<void> {
  const left = 30 - (nowSeconds() % 30);
  if (left < 10) await sleep(left * 1000 + 200);
}
/** Waits past the end of the lockout a refusal names ("… locked until <RFC 3339> …"). */
async function waitPast(message: string): Promise<void> {
  const until = /locked until (\S+)/.exec(message)?.[1];
  assert.ok(until, message);
  await sleep(Math.max(0, new Date(until).getTime() - Date.now()) + 150);
}
const wrongOf = (code: string) => (code === "000000" ? "111111" : "000000");

describe("second-factor lockout: per factor, not reset by the password", () => {
  let platform: TestPlatform;
  let owner: string;
  const rest = restClient(
    () => platform,
    () => owner,
  );

  before(async () => {
    platform = await startPlatform({
      listen: true,
      env: {
        PLATFORM_MAX_PASSWORD_ATTEMPTS: String(MAX_ATTEMPTS),
        PLATFORM_PASSWORD_LOCKOUT_SECONDS: "2",
        PLATFORM_PASSWORD_LOCKOUT_MAX_SECONDS: "4",
      },
    });
    ({ token: owner } = await addMachineUser(platform, {
      username: "owner",
      membership: { contextType: "instance", roles: ["IAM_OWNER"] },
    }));
  });
  after(() => platform.stop());

  let seq = 0;
  /** A user with an active TOTP, codes by e-mail and SMS, and recovery codes. */
  const withFactors = async () => {
    const username = `locked-${++seq}`;
    const r = await rest("POST", USERS, {
      json: {
        username,
        human: {
          profile: { given_name: "Ada", family_name: "Lovelace" },
          email: { address: `${username}@example.com`, is_verified: true },
          phone: { number: `+41 44 555 20 ${String(seq).padStart(2, "0")}`, is_verified: true },
          password: { password: PASSWORD, change_required: false },
        },
      },
    });
    assert.equal(r.status, 201, r.text);
    const id = r.json.details.id as string;
    const registered = await rest("POST", `${USERS}/${id}/totp`);
    const secret = registered.json.secret as string;
    const verified = await rest("POST", `${USERS}/${id}/totp/_verify`, {
      json: { code: await totpAt(secret, -1) },
    });
    assert.equal(verified.status, 200, verified.text);
    for (const factor of ["otp_email", "otp_sms"])
      assert.equal((await rest("POST", `${USERS}/${id}/${factor}`)).status, 200);
    const codes = (await rest("POST", `${USERS}/${id}/recovery_codes`)).json.codes as string[];
    return { id, username, secret, codes };
  };
  const signIn = async (username: string) => {
    const r = await rest("POST", SESSIONS, {
      json: { checks: { user: { login_name: username }, password: { password: PASSWORD } } },
    });
    assert.equal(r.status, 201, r.text);
    return { id: r.json.details.id as string, token: r.json.session_token as string };
  };
  const patch = (session: { id: string; token: string }, checks: Json, challenges?: Json) =>
    rest("PATCH", `${SESSIONS}/${session.id}`, {
      json: { session_token: session.token, checks, ...(challenges ? { challenges } : {}) },
    });
  /** A new code of the channel on the session (answered, nothing sent). */
  const codeOf = async (session: { id: string; token: string }, channel: "otp_email" | "otp_sms") => {
    const r = await patch(session, {}, { [channel]: { return_code: true } });
    assert.equal(r.status, 200, r.text);
    return r.json.challenges[channel] as string;
  };
  const assertWrong = async (reply: Promise<{ status: number; json: Json; text: string }>) => {
    const r = await reply;
    assert.equal(r.status, 400, r.text);
    assert.equal(r.json.code, 3, r.text);
  };

  it(`TOTP: the maximum-th wrong code in a row locks TOTP out, a right password between them resets nothing; even the right code is refused until the lockout ends`, async () => {
    await freshStep();
    const user = await withFactors();
    const right = await totpAt(user.secret, 0);
    let session = await signIn(user.username);
    await assertWrong(patch(session, { totp: { code: wrongOf(right) } }));
    await assertWrong(patch(session, { totp: { code: wrongOf(right) } }));
    // the owner of the password signs in again: that does not give new guesses
    session = await signIn(user.username);
    await assertWrong(patch(session, { totp: { code: wrongOf(right) } }));
    let message = "";
    await assertRejected(
      platform,
      async () => {
        const r = await patch(session, { totp: { code: right } });
        message = r.json.message;
        return r;
      },
      400,
      9,
      /^totp checks are locked until \S+ after too many wrong answers$/,
    );
    // the password has its own count: it still signs in
    const other = await signIn(user.username);
    assert.equal((await rest("GET", `${USERS}/${user.id}`)).json.user.human.failed_password_attempts, 0);
    await waitPast(message);
    const passed = await patch(other, { totp: { code: right } });
    assert.equal(passed.status, 200, passed.text);
  });

  it("codes by e-mail and SMS and recovery codes count on their own: wrong answers of one neither lock out nor are reset by another", async () => {
    await freshStep();
    const user = await withFactors();
    const session = await signIn(user.username);
    const right = await totpAt(user.secret, 0);
    const email = await codeOf(session, "otp_email");
    const sms = await codeOf(session, "otp_sms");
    // MAX - 1 wrong answers of every factor: 8 in a row, none locked out
    for (let i = 1; i < MAX_ATTEMPTS; i++) {
      await assertWrong(patch(session, { totp: { code: wrongOf(right) } }));
      await assertWrong(patch(session, { otp_email: { code: wrongOf(email) } }));
      await assertWrong(patch(session, { otp_sms: { code: wrongOf(sms) } }));
      await assertWrong(patch(session, { recovery_code: { code: "AAAAA-AAAAA" } }));
    }
    // a right e-mail code resets the e-mail count alone
    assert.equal((await patch(session, { otp_email: { code: email } })).status, 200);
    for (const checks of [
      { otp_email: { code: "000000" } },
      { otp_email: { code: "111111" } },
      { recovery_code: { code: "AAAAA-AAAAA" } },
    ]) {
      await codeOf(session, "otp_email");
      await assertWrong(patch(session, checks));
    }
    // the recovery codes are locked out now (their 3rd), the e-mail codes not (their 2nd since the reset)
    await assertRejected(
      platform,
      () => patch(session, { recovery_code: { code: user.codes[0] } }),
      400,
      9,
      /^recovery_code checks are locked until/,
    );
    assert.equal((await patch(session, { otp_sms: { code: sms } })).status, 200, "SMS: 2 wrong, then right");
    assert.equal((await patch(session, { totp: { code: right } })).status, 200, "TOTP: 2 wrong, then right");
    const fresh = await codeOf(session, "otp_email");
    assert.equal((await patch(session, { otp_email: { code: fresh } })).status, 200);
  });

  it("a code by SMS: the lockout refuses the right code of an open challenge without using it up", async () => {
    const user = await withFactors();
    const session = await signIn(user.username);
    const sms = await codeOf(session, "otp_sms");
    for (let i = 1; i <= MAX_ATTEMPTS; i++)
      await assertWrong(patch(session, { otp_sms: { code: wrongOf(sms) } }));
    const refused = await patch(session, { otp_sms: { code: sms } });
    assert.equal(refused.status, 400, refused.text);
    assert.match(refused.json.message, /^otp_sms checks are locked until/);
    await waitPast(refused.json.message);
    assert.equal((await patch(session, { otp_sms: { code: sms } })).status, 200);
  });

  it("an administrator's _unlock ends a factor's lockout and resets its count", async () => {
    const user = await withFactors();
    const session = await signIn(user.username);
    for (let i = 1; i <= MAX_ATTEMPTS; i++)
      await assertWrong(patch(session, { recovery_code: { code: "AAAAA-AAAAA" } }));
    assert.equal((await patch(session, { recovery_code: { code: user.codes[1] } })).json.code, 9);
    const unlocked = await rest("POST", `${USERS}/${user.id}/_unlock`);
    assert.equal(unlocked.status, 200, unlocked.text);
    assert.equal((await patch(session, { recovery_code: { code: user.codes[1] } })).status, 200);
    // the count starts again: MAX - 1 wrong ones are not a lockout
    for (let i = 1; i < MAX_ATTEMPTS; i++)
      await assertWrong(patch(session, { recovery_code: { code: "AAAAA-AAAAA" } }));
    assert.equal((await patch(session, { recovery_code: { code: user.codes[2] } })).status, 200);
  });
});
