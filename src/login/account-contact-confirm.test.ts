/**
 * The account page's e-mail and phone changes need proof (the current password, or a recent sign-in for a
 * user without one), the previous address is told of a new one (EMAIL_CHANGED, by a real SMTP server), and
 * a password reset is e-mailed only to a verified address (the API and the login UI's reset page).
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { eventCount, restClient } from "../../test/helpers.ts";
import {
  addHuman,
  alertOf,
  HttpBrowser,
  type LoginTestPlatform,
  startLoginPlatform,
} from "../../test/login.ts";
import { type SmtpReceiver, startSmtpReceiver } from "../../test/smtp-receiver.ts";
import { testTime } from "../../test/time.ts";
import { sha256 } from "../crypto/tokens.ts";
import { createSession } from "../domain/session/commands.ts";
import { addCallers } from "../services/actions/testing.ts";
import { USER_AGENT_COOKIE } from "./user-agent.ts";

const PASSWORD = "Secret-Passw0rd!";
const USERS = "/resources/v3alpha/users";
const SMTP = "/resources/v3alpha/smtp_providers";

describe("account page: changing the e-mail address or phone number needs proof", () => {
  let platform: LoginTestPlatform;
  let smtp: SmtpReceiver;
  let callers: Awaited<ReturnType<typeof addCallers>>;
  const rest = restClient(
    () => platform,
    () => callers.owner,
  );

  before(async () => {
    smtp = await startSmtpReceiver({});
    platform = await startLoginPlatform({ PLATFORM_MAX_PASSWORD_ATTEMPTS: "100" });
    callers = await addCallers(platform);
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

  const human = async (id: string) => (await rest("GET", `${USERS}/${id}`)).json.user.human;
  const fieldError = (html: string, name: string) =>
    new RegExp(`<p class="field-error" id="${name}-error">([^<]*)</p>`).exec(html)?.[1];
  const notice = (html: string) => /<div class="notice" role="status">([^<]*)<\/div>/.exec(html)?.[1];
  const mailsTo = (address: string, subject: RegExp) =>
    smtp.received.filter((m) => m.envelope.to.includes(address) && subject.test(m.mail.subject ?? ""));
  const waitForMail = async (address: string, subject: RegExp) => {
    for (let i = 0; i < testTime(400); i++) {
      const found = mailsTo(address, subject);
      if (found.length) return found[0];
      await new Promise((r) => setTimeout(r, 25));
    }
    assert.fail(`no message "${subject}" to ${address}`);
  };
  /** Lets the worker send what it would (commits wake it). */
  const settle = () => new Promise((r) => setTimeout(r, 700));

  async function signedIn(loginName: string) {
    const browser = new HttpBrowser(platform.url);
    const loginPage = await browser.follow("/ui/login/loginname");
    const passwordPage = await browser.submit(loginPage, "/ui/login/loginname", { loginName });
    const page = await browser.submit(passwordPage, "/ui/login/password", { password: PASSWORD });
    assert.match(page.text, /<h1 id="page-title">Your account<\/h1>/);
    return { browser, page };
  }

  it("the e-mail address changes only with the current password; the previous address is told", async () => {
    const id = await addHuman(platform, "rita", PASSWORD);
    const { browser, page } = await signedIn("rita");
    assert.match(page.text, /id="emailPassword" name="emailPassword" type="password"/);
    const before = await eventCount(platform);

    const missing = await browser.submit(page, "/ui/login/account/email", { email: "thief@evil.example" });
    assert.equal(alertOf(missing.text), "Please correct the marked fields.");
    assert.equal(fieldError(missing.text, "emailPassword"), "This field is required.");
    assert.match(missing.text, /id="email"[^>]*value="thief@evil\.example"/, "the address typed stays");
    assert.equal(await eventCount(platform), before, "nothing stored");

    const wrong = await browser.submit(missing, "/ui/login/account/email", {
      email: "thief@evil.example",
      emailPassword: "Wrong-Passw0rd!",
    });
    assert.match(fieldError(wrong.text, "emailPassword") ?? "", /current password is wrong/);
    assert.equal((await human(id)).email.address, "rita@example.com");

    const changed = await browser.submit(wrong, "/ui/login/account/email", {
      email: "rita@new.example",
      emailPassword: PASSWORD,
    });
    assert.match(notice(changed.text) ?? "", /e-mail address was changed/);
    assert.deepEqual(
      [(await human(id)).email.address, (await human(id)).email.is_verified ?? false],
      ["rita@new.example", false],
    );
    const told = await waitForMail("rita@example.com", /e-mail address of your .* account was changed/);
    assert.match(told.mail.text ?? "", /Hello Rita Example,/);
    assert.match(told.mail.text ?? "", /The e-mail address of your account rita/);
    assert.doesNotMatch(told.mail.text ?? "", /rita@new\.example/, "the new address is not disclosed");
    await waitForMail("rita@new.example", /verify|confirm/i);
    assert.equal(mailsTo("rita@new.example", /account was changed/).length, 0, "only the previous one");
  });

  it("the phone number changes and is removed only with the current password", async () => {
    const id = await addHuman(platform, "sven", PASSWORD);
    const { browser, page } = await signedIn("sven");
    const refused = await browser.submit(page, "/ui/login/account/phone", { phone: "+41 79 555 01 09" });
    assert.equal(fieldError(refused.text, "phonePassword"), "This field is required.");
    assert.equal((await human(id)).phone, undefined);
    const set = await browser.submit(refused, "/ui/login/account/phone", {
      phone: "+41 79 555 01 09",
      phonePassword: PASSWORD,
    });
    assert.equal((await human(id)).phone.number, "+41 79 555 01 09");
    const keep = await browser.submit(set, "/ui/login/account/phone", { remove: "true" });
    assert.equal(fieldError(keep.text, "phonePassword"), "This field is required.");
    assert.equal((await human(id)).phone.number, "+41 79 555 01 09");
    const removed = await browser.submit(keep, "/ui/login/account/phone", {
      remove: "true",
      phonePassword: PASSWORD,
    });
    assert.equal(notice(removed.text), "Your phone number was removed.");
    assert.equal((await human(id)).phone, undefined);
  });

  it("a user without a password changes it only within 5 minutes of signing in", async () => {
    const created = await rest("POST", USERS, {
      json: {
        username: "uma",
        human: {
          profile: { given_name: "Uma", family_name: "Example" },
          email: { address: "uma@example.com", is_verified: true },
        },
      },
    });
    assert.equal(created.status, 201, created.text);
    const id = created.json.details.id;
    // a browser signed in through an identity provider (the session such a sign-in makes)
    const browser = new HttpBrowser(platform.url);
    await browser.follow("/ui/login/loginname");
    const instanceId = platform.bootstrapResult!.instanceId;
    const session = await createSession(
      platform.eventStore,
      { instanceId, creator: id },
      {
        user: { id, orgId: platform.bootstrapResult!.orgId },
        userAgentHash: sha256(browser.cookies.get(USER_AGENT_COOKIE)!),
        idpId: "an-idp",
      },
      platform.login.policy,
    );
    let page = await browser.follow("/");
    assert.match(page.text, /Your account/);
    assert.doesNotMatch(page.text, /id="emailPassword"/, "no password to ask for");
    assert.match(page.text, /you must have signed in within the last 5 minutes/);

    // the sign-in 10 minutes ago (the read model's check time, as time would have made it)
    await platform.db.query(
      "UPDATE sessions SET idp_checked_at = now() - interval '10 minutes' WHERE instance_id = $1 AND id = $2",
      [instanceId, session.sessionId],
    );
    const before = await eventCount(platform);
    page = await browser.submit(page, "/ui/login/account/email", { email: "uma@new.example" });
    assert.match(alertOf(page.text) ?? "", /sign in again before you change this/);
    assert.equal(await eventCount(platform), before, "nothing stored");
    assert.equal((await human(id)).email.address, "uma@example.com");

    // signed in again just now
    await platform.db.query("UPDATE sessions SET idp_checked_at = now() WHERE instance_id = $1 AND id = $2", [
      instanceId,
      session.sessionId,
    ]);
    page = await browser.submit(page, "/ui/login/account/email", { email: "uma@new.example" });
    assert.match(notice(page.text) ?? "", /e-mail address was changed/);
    assert.equal((await human(id)).email.address, "uma@new.example");
  });

  it("a password reset is e-mailed only to a verified address, with the same answer on the reset page", async () => {
    const id = await addHuman(platform, "tara", PASSWORD);
    const changed = await rest("PATCH", `${USERS}/${id}`, {
      json: { human: { email: { address: "tara@new.example" } } },
    });
    assert.equal(changed.status, 200, changed.text);
    assert.equal((await human(id)).email.is_verified ?? false, false);

    const refused = await rest("POST", `${USERS}/${id}/password/_request_reset`, { json: {} });
    assert.equal(refused.status, 400, refused.text);
    assert.equal(refused.json.code, 9, "FAILED_PRECONDITION");
    assert.match(refused.json.message, /not verified/);
    const answered = await rest("POST", `${USERS}/${id}/password/_request_reset`, {
      json: { return_code: true },
    });
    assert.equal(answered.status, 200, "answered instead of sent, the code goes to no address");

    // the reset page answers every name alike, and sends nothing to the unverified address
    const browser = new HttpBrowser(platform.url);
    const resetPage = await browser.follow("/ui/login/password-reset");
    const sent = await browser.submit(resetPage, "/ui/login/password-reset", { loginName: "tara" });
    const unknown = await browser.submit(resetPage, "/ui/login/password-reset", { loginName: "nobody" });
    assert.match(sent.text, /If an account exists for tara/);
    const neutral = (html: string, name: string) =>
      html.replaceAll(name, "x").replace(/authRequest(=|%3D)[\w-]+/g, "authRequest=…");
    assert.equal(neutral(sent.text, "tara"), neutral(unknown.text, "nobody"));
    await settle();
    assert.equal(mailsTo("tara@new.example", /password/i).length, 0);

    // once verified, the reset goes there
    const verifyMail = await waitForMail("tara@new.example", /confirm/i);
    const code = /[?&]code=([A-Z2-9]{8})/.exec(verifyMail.mail.text ?? "")?.[1];
    const verified = await rest("POST", `${USERS}/${id}/email/_verify`, {
      json: { verification_code: code },
    });
    assert.equal(verified.status, 200, verified.text);
    const reset = await rest("POST", `${USERS}/${id}/password/_request_reset`, { json: {} });
    assert.equal(reset.status, 200, reset.text);
    await waitForMail("tara@new.example", /password/i);
  });
});
