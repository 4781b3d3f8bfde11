/**
 * The login UI's one-time-password pages over HTTP (src/login/steps/mfa/): the authenticator app's code,
 * codes by e-mail (a real SMTP server receives them), recovery codes, and enrolling an authenticator app
 * or e-mail codes during a sign-in; wrong codes, the lockout they count towards, the bound on codes sent,
 * and who may enrol.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { generate } from "otplib";
import { restClient } from "../../test/helpers.ts";
import {
  addHuman,
  alertOf,
  createAuthRequest,
  formOf,
  HttpBrowser,
  type LoginTestPlatform,
  startLoginPlatform,
} from "../../test/login.ts";
import { type SmtpReceiver, startSmtpReceiver } from "../../test/smtp-receiver.ts";
import { testTime } from "../../test/time.ts";
import { ACR_MFA } from "../domain/session/amr.ts";
import { foldUser, type UserAggregate } from "../domain/user/commands.ts";
import { USER } from "../domain/user/events.ts";
import type { CommandTx, NewEvent } from "../eventstore/types.ts";
import { userFactor } from "../query/user-factors.ts";
import { addCallers } from "../services/actions/testing.ts";
import { UserFactorCommands } from "../services/users/factor-commands.ts";

const PASSWORD = "Secret-Passw0rd!";
const SMTP = "/resources/v3alpha/smtp_providers";
const MAX_ATTEMPTS = 4;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const nowSeconds = () => Math.floor(Date.now() / 1000);
/** Waits for a fresh TOTP step when the current one ends within 10 s (codes computed now stay current). */
const freshStep = async () => {
  const left = 30 - (nowSeconds() % 30);
  if (left < 10) await sleep(left * 1000 + 200);
};

describe("login UI: one-time-password second factors", () => {
  let platform: LoginTestPlatform;
  let smtp: SmtpReceiver;
  let instanceId: string;
  let factors: UserFactorCommands;

  before(async () => {
    smtp = await startSmtpReceiver({});
    platform = await startLoginPlatform({ PLATFORM_MAX_PASSWORD_ATTEMPTS: String(MAX_ATTEMPTS) });
    instanceId = platform.bootstrapResult!.instanceId;
    factors = new UserFactorCommands({ masterKey: platform.login.deps.masterKey! });
    const callers = await addCallers(platform);
    const rest = restClient(platform, () => callers.owner);
    const created = await rest("POST", SMTP, {
      json: { description: "mail", sender_address: "noreply@example.com", host: `127.0.0.1:${smtp.port}` },
    });
    assert.equal(created.status, 201, created.text);
    assert.equal((await rest("POST", `${SMTP}/${created.json.details.id}/_activate`)).status, 200);
  });
  after(async () => {
    await platform.stop();
    await smtp.close();
  });

  /** Runs a factor command on the user (as the users API would). */
  const onUser = (
    userId: string,
    decide: (user: UserAggregate, tx: CommandTx) => Promise<NewEvent[]> | NewEvent[],
  ) =>
    platform.eventStore.push({ instanceId, creator: "test" }, async (tx) =>
      decide(foldUser(await tx.load(USER, userId))!, tx),
    );
  /** A user with an active TOTP (its secret). */
  const withTotp = async (username: string) => {
    const id = await addHuman(platform, username, PASSWORD);
    let secret = "";
    await onUser(id, async (user, tx) => {
      const made = await factors.registerTotp(tx, instanceId, user);
      secret = made.secret;
      return made.events;
    });
    const code = await generate({ secret, epoch: nowSeconds() - 30 });
    await onUser(id, (user, tx) => factors.verifyTotp(tx, instanceId, user, code));
    return { id, secret };
  };

  /**
   * A browser signed in with the password for a new auth request that asks for a second factor
   * (acr_values): not completed yet, at the factor's page or its registration.
   */
  async function afterPassword(loginName: string) {
    const browser = new HttpBrowser(platform.url);
    const authRequest = await createAuthRequest(platform, { acrValues: [ACR_MFA] });
    const loginPage = await browser.follow(`/ui/login?authRequest=${authRequest.id}`);
    const passwordPage = await browser.submit(loginPage, "/ui/login/loginname", { loginName });
    const posted = await browser.post("/ui/login/password", {
      ...formOf(passwordPage.text, "/ui/login/password"),
      password: PASSWORD,
    });
    // the password passed: straight on to the second factor (its page, or its registration)
    assert.equal(posted.status, 303, posted.text);
    assert.match(posted.location ?? "", /^\/ui\/login\/mfa(\/|\?)/);
    return { browser, authRequest };
  }
  /** Submits the page's form to `action` with `fields`; answers the 303 (not followed). */
  const post = async (browser: HttpBrowser, page: { text: string }, action: string, fields = {}) => {
    const answer = await browser.post(action, { ...formOf(page.text, action), ...fields });
    assert.equal(answer.status, 303, answer.text.slice(0, 300));
    return answer;
  };

  it("TOTP: a wrong code is an error on the page; the right one completes the sign-in with amr otp and mfa", async () => {
    await freshStep();
    const { secret } = await withTotp("totp-ui");
    const { browser, authRequest } = await afterPassword("totp-ui");
    const url = `/ui/login/mfa/totp?authRequest=${authRequest.id}`;
    const page = await browser.get(url);
    assert.equal(page.status, 200, page.text);
    assert.match(page.text, /<label for="code">Authenticator code<\/label>/);
    assert.match(page.text, /autocomplete="one-time-code"/);
    const right = await generate({ secret });
    const wrong = await post(browser, page, "/ui/login/mfa/totp", {
      code: right === "000000" ? "111111" : "000000",
    });
    assert.equal(wrong.location, url);
    const again = await browser.get(url);
    assert.equal(alertOf(again.text), "The code is wrong or has expired.");
    assert.match(again.text, /aria-describedby="form-error"/);
    const passed = await post(browser, again, "/ui/login/mfa/totp", { code: right });
    // completed at once: the client's redirect with its code
    assert.match(passed.location ?? "", /^http:\/\/app\.test\/callback\?code=/);
    const completion = platform.completer.completionOf(authRequest.id);
    assert.ok(completion, "signed in");
    assert.deepEqual(completion.session.amr, ["pwd", "otp", "mfa"]);
  });

  it("without a signed-in session the pages go back to the entry; a form post needs the CSRF token", async () => {
    const browser = new HttpBrowser(platform.url);
    const authRequest = await createAuthRequest(platform);
    for (const path of ["totp", "otp-email", "otp-sms", "recovery", "setup/totp", "setup/otp-email"]) {
      const page = await browser.get(`/ui/login/mfa/${path}?authRequest=${authRequest.id}`);
      assert.equal(page.status, 302, path);
      assert.equal(page.location, `/ui/login?authRequest=${authRequest.id}`);
    }
    const forged = await browser.post("/ui/login/mfa/totp", { authRequest: authRequest.id, code: "123456" });
    assert.equal(forged.status, 403);
  });

  it("wrong codes count towards the lockout: then even the right code is refused", async () => {
    await freshStep();
    const { secret } = await withTotp("totp-lockout");
    const { browser, authRequest } = await afterPassword("totp-lockout");
    const url = `/ui/login/mfa/totp?authRequest=${authRequest.id}`;
    const right = await generate({ secret });
    for (let i = 1; i <= MAX_ATTEMPTS; i++)
      await post(browser, await browser.get(url), "/ui/login/mfa/totp", {
        code: right === "000000" ? "111111" : "000000",
      });
    await post(browser, await browser.get(url), "/ui/login/mfa/totp", { code: right });
    assert.equal(alertOf((await browser.get(url)).text), "Too many wrong attempts. Try again later.");
    assert.equal(platform.completer.completionOf(authRequest.id), undefined);
  });

  it("recovery codes: each works once; the TOTP page links to them", async () => {
    const { id } = await withTotp("recovery-ui");
    let codes: string[] = [];
    await onUser(id, (user) => {
      const made = factors.recoveryCodes(instanceId, user);
      codes = made.codes;
      return made.events;
    });
    const first = await afterPassword("recovery-ui");
    const totpPage = await first.browser.get(`/ui/login/mfa/totp?authRequest=${first.authRequest.id}`);
    assert.ok(totpPage.text.includes(`href="/ui/login/mfa/recovery?authRequest=${first.authRequest.id}"`));
    const page = await first.browser.get(`/ui/login/mfa/recovery?authRequest=${first.authRequest.id}`);
    const passed = await post(first.browser, page, "/ui/login/mfa/recovery", { code: codes[0] });
    // completed at once: the client's redirect with its code
    assert.match(passed.location ?? "", /^http:\/\/app\.test\/callback\?code=/);

    const second = await afterPassword("recovery-ui");
    const url = `/ui/login/mfa/recovery?authRequest=${second.authRequest.id}`;
    const used = await post(second.browser, await second.browser.get(url), "/ui/login/mfa/recovery", {
      code: codes[0],
    });
    assert.equal(used.location, url);
    assert.equal(alertOf((await second.browser.get(url)).text), "The code is wrong or has expired.");
  });

  it("codes by e-mail: sent when the page is shown (not again on a reload), a new one on request, checked once", async () => {
    const id = await addHuman(platform, "email-ui", PASSWORD);
    await onUser(id, (user, tx) => factors.addOtp(tx, instanceId, user, "otp_email"));
    const { browser, authRequest } = await afterPassword("email-ui");
    const url = `/ui/login/mfa/otp-email?authRequest=${authRequest.id}`;
    const page = await browser.get(url);
    assert.equal(page.status, 200, page.text);
    assert.match(page.text, /<div class="notice" role="status">A code is on its way.<\/div>/);
    const codeOf = async (index: number) => {
      for (let i = 0; i < testTime(400); i++) {
        const mails = smtp.received.filter((m) => m.envelope.to.includes("email-ui@example.com"));
        if (mails.length > index) return /\b(\d{6})\b/.exec(mails[index].mail.text ?? "")![1];
        await sleep(25);
      }
      assert.fail("no code e-mailed");
    };
    const first = await codeOf(0);
    const reload = await browser.get(url);
    assert.doesNotMatch(reload.text, /role="status"/, "no new code on a reload");
    await sleep(700);
    const mailed = () => smtp.received.filter((m) => m.envelope.to.includes("email-ui@example.com")).length;
    assert.equal(mailed(), 1);
    // a new code at most every 30 s: right away, the page says when, and nothing is sent
    const tooSoon = await post(browser, reload, `/ui/login/mfa/otp-email/resend`);
    assert.equal(tooSoon.location, url);
    const wait =
      /^Too many codes were requested\. Enter the last code you received, or ask for a new one in (\d+) seconds?\.$/.exec(
        alertOf((await browser.get(url)).text) ?? "",
      );
    assert.ok(wait && Number(wait[1]) >= 1 && Number(wait[1]) <= 30, String(wait));
    await sleep(300);
    assert.equal(mailed(), 1);
    // as if 30 s passed (the bound counts the outbox's rows)
    await platform.db.query(
      "UPDATE notification_messages SET created_at = created_at - interval '30 seconds' WHERE user_id = $1",
      [id],
    );
    const resent = await post(browser, await browser.get(url), `/ui/login/mfa/otp-email/resend`);
    assert.equal(resent.location, url);
    assert.match((await browser.get(url)).text, /We sent a new code./);
    const second = await codeOf(1);
    if (first !== second) {
      const old = await post(browser, await browser.get(url), "/ui/login/mfa/otp-email", { code: first });
      assert.equal(old.location, url, "the first code was replaced");
      assert.equal(alertOf((await browser.get(url)).text), "The code is wrong or has expired.");
    }
    const passed = await post(browser, await browser.get(url), "/ui/login/mfa/otp-email", { code: second });
    // completed at once: the client's redirect with its code
    assert.match(passed.location ?? "", /^http:\/\/app\.test\/callback\?code=/);
    assert.deepEqual(platform.completer.completionOf(authRequest.id)?.session.amr, ["pwd", "otp", "mfa"]);
  });

  it("enrolment: an authenticator app (QR code as SVG, the key, the same key after a wrong code), then signed in", async () => {
    await freshStep();
    const id = await addHuman(platform, "setup-ui", PASSWORD);
    const { browser, authRequest } = await afterPassword("setup-ui");
    const url = `/ui/login/mfa/setup/totp?authRequest=${authRequest.id}`;
    const page = await browser.get(url);
    assert.equal(page.status, 200, page.text);
    assert.match(
      page.text,
      /<svg width="200" height="200" aria-hidden="true" focusable="false" xmlns="http:\/\/www.w3.org\/2000\/svg"/,
    );
    const key = /<code class="totp-secret">([A-Z2-7 ]+)<\/code>/.exec(page.text)?.[1]?.replaceAll(" ", "");
    assert.ok(key, "the key is shown");
    const wrong = await post(browser, page, "/ui/login/mfa/setup/totp", { code: "12" });
    assert.equal(wrong.location, url);
    const again = await browser.get(url);
    assert.equal(alertOf(again.text), "The code is wrong or has expired.");
    assert.ok(
      again.text.includes(/<code class="totp-secret">([A-Z2-7 ]+)<\/code>/.exec(page.text)![1]),
      "same key",
    );
    const passed = await post(browser, again, "/ui/login/mfa/setup/totp", {
      code: await generate({ secret: key }),
    });
    // completed at once: the client's redirect with its code
    assert.match(passed.location ?? "", /^http:\/\/app\.test\/callback\?code=/);
    assert.equal((await userFactor(platform.db, instanceId, id, "totp"))?.active, true);
    assert.deepEqual(platform.completer.completionOf(authRequest.id)?.session.amr, ["pwd", "otp", "mfa"]);
  });

  it("enrolment needs the second factor once the account has one; e-mail codes are enabled, then checked", async () => {
    await withTotp("enrol-guard");
    const guarded = await afterPassword("enrol-guard");
    for (const path of ["setup/totp", "setup/otp-email"]) {
      const page = await guarded.browser.get(`/ui/login/mfa/${path}?authRequest=${guarded.authRequest.id}`);
      assert.equal(page.status, 302, path);
      assert.equal(page.location, `/ui/login/mfa?authRequest=${guarded.authRequest.id}`);
    }

    const id = await addHuman(platform, "enrol-email", PASSWORD);
    const { browser, authRequest } = await afterPassword("enrol-email");
    const page = await browser.get(`/ui/login/mfa/setup/otp-email?authRequest=${authRequest.id}`);
    assert.equal(page.status, 200, page.text);
    assert.match(page.text, /We will send a code to enrol-email@example.com each time you sign in./);
    const enabled = await post(browser, page, "/ui/login/mfa/setup/otp-email");
    assert.equal(enabled.location, `/ui/login/mfa/otp-email?authRequest=${authRequest.id}`);
    assert.equal((await userFactor(platform.db, instanceId, id, "otp_email"))?.active, true);
  });
});
