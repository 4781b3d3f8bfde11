/**
 * The login UI's pages of e-mailed codes over HTTP, with a real SMTP server receiving the messages
 * (Chromium walks them in test/login-codes-browser.test.ts): "Forgot password?", the reset request that
 * never tells whether a name exists, the new password from the e-mail's link, the e-mail verification
 * after registration, the invitation, wrong codes, hide_password_reset, and no active SMTP provider.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { restClient } from "../../test/helpers.ts";
import {
  addHuman,
  alertOf,
  createAuthRequest,
  formOf,
  HttpBrowser,
  type LoginTestPlatform,
  REDIRECT_URI,
  startLoginPlatform,
} from "../../test/login.ts";
import { type SmtpReceiver, startSmtpReceiver } from "../../test/smtp-receiver.ts";
import { testTime } from "../../test/time.ts";
import { changeSettings } from "../domain/settings/commands.ts";
import { LOGIN } from "../domain/settings/login.ts";
import { codeHash } from "../domain/user/codes.ts";
import { USER, UserEvent } from "../domain/user/events.ts";
import { addCallers } from "../services/actions/testing.ts";
import { TestCompleter } from "./testing.ts";

const PASSWORD = "Secret-Passw0rd!";
const NEW_PASSWORD = "N3w-Secret-Passw0rd!";
const USERS = "/resources/v3alpha/users";
const SMTP = "/resources/v3alpha/smtp_providers";

describe("login UI: codes by e-mail", () => {
  let platform: LoginTestPlatform;
  let smtp: SmtpReceiver;
  let callers: Awaited<ReturnType<typeof addCallers>>;
  let providerId: string;
  let instanceId: string;
  const rest = restClient(
    () => platform,
    () => callers.owner,
  );

  before(async () => {
    smtp = await startSmtpReceiver({});
    platform = await startLoginPlatform();
    instanceId = platform.bootstrapResult!.instanceId;
    callers = await addCallers(platform);
    const created = await rest("POST", SMTP, {
      json: { description: "mail", sender_address: "noreply@example.com", host: `127.0.0.1:${smtp.port}` },
    });
    assert.equal(created.status, 201, created.text);
    providerId = created.json.details.id;
    assert.equal((await rest("POST", `${SMTP}/${providerId}/_activate`)).status, 200);
  });
  after(async () => {
    await platform.stop();
    await smtp.close();
  });

  /** The message to `address` whose text has a link to `path`, waited for; answers the link's path and query. */
  const linkTo = async (address: string, path: string, skip = 0) => {
    for (let i = 0; i < testTime(400); i++) {
      const mails = smtp.received.filter(
        (m) => m.envelope.to.includes(address) && (m.mail.text ?? "").includes(`${path}?`),
      );
      if (mails.length > skip) {
        const url = new URL(new RegExp(`https?://\\S+${path}\\?\\S+`).exec(mails[skip].mail.text ?? "")![0]);
        return { url: `${url.pathname}${url.search}`, code: url.searchParams.get("code")! };
      }
      await new Promise((r) => setTimeout(r, 25));
    }
    assert.fail(`no message to ${address} linking to ${path}`);
  };
  const mailsTo = (address: string) => smtp.received.filter((m) => m.envelope.to.includes(address)).length;
  /** Lets the worker send what it would (the outbox is checked every 5 s at the latest; commits wake it). */
  const settle = () => new Promise((r) => setTimeout(r, 700));

  /** Login name, then the password page of a new auth request. */
  const toPasswordPage = async (browser: HttpBrowser, loginName: string) => {
    const request = await createAuthRequest(platform);
    const loginPage = await browser.follow(`/ui/login?authRequest=${request.id}`);
    const passwordPage = await browser.submit(loginPage, "/ui/login/loginname", { loginName });
    assert.match(passwordPage.text, /Enter your password/);
    return { request, passwordPage };
  };
  const requestReset = async (browser: HttpBrowser, loginName: string) => {
    const { request, passwordPage } = await toPasswordPage(browser, loginName);
    const link = /<a href="(\/ui\/login\/password-reset\?authRequest=[^"]+)">Forgot password\?<\/a>/.exec(
      passwordPage.text,
    );
    assert.ok(link, "the password page links to the reset");
    const resetPage = await browser.get(link[1].replaceAll("&#38;", "&"));
    assert.equal(resetPage.status, 200);
    assert.match(resetPage.text, /Reset your password/);
    assert.match(resetPage.text, new RegExp(`value="${loginName}"`), "the login name is filled in");
    const sent = await browser.submit(resetPage, "/ui/login/password-reset", { loginName });
    return { request, sent };
  };

  it("forgot password: request, the e-mail's link, a wrong code, the new password, signed in with it", async () => {
    const userId = await addHuman(platform, "grace", PASSWORD);
    const browser = new HttpBrowser(platform.url);
    const { request, sent } = await requestReset(browser, "grace");
    assert.equal(sent.status, 200);
    assert.match(sent.text, /Check your e-mail/);
    assert.match(sent.text, /If an account exists for grace, we sent a link/);

    const link = await linkTo("grace@example.com", "/ui/login/password-reset");
    assert.match(link.code, /^[A-Z2-9]{8}$/);
    let page = await browser.get(link.url);
    assert.equal(page.status, 200);
    assert.match(page.text, /Choose a new password/);
    assert.match(page.text, new RegExp(`name="code"[^>]*value="${link.code}"`), "the code is filled in");
    assert.match(page.text, /at least 8 characters/, "the policy is shown");
    const form = formOf(page.text, "/ui/login/password-reset/set");
    assert.equal(form.userID, userId);
    assert.equal(form.authRequest, request.id, "the sign-in this browser asked from goes on");

    // a wrong code: a clear error, counted, the password unchanged
    page = await browser.submit(page, "/ui/login/password-reset/set", {
      code: "WRONG234",
      password: NEW_PASSWORD,
      passwordConfirm: NEW_PASSWORD,
    });
    assert.equal(alertOf(page.text), "Please correct the marked fields.");
    assert.match(page.text, /This code is wrong or has expired/);
    assert.match(page.text, /aria-describedby="code-error code-help"/);
    const [failed] = await platform.db.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM events WHERE aggregate_id = $1 AND event_type = 'user.human.password.code.check.failed'",
      [userId],
    );
    assert.equal(failed.n, 1, "the wrong try is counted");

    page = await browser.submit(page, "/ui/login/password-reset/set", {
      code: link.code.toLowerCase(), // typed in lower case: still the code
      password: NEW_PASSWORD,
      passwordConfirm: NEW_PASSWORD,
    });
    assert.match(page.text, /Your password was changed/);
    const next = /<a class="button[^"]*" href="([^"]+)">Continue to sign in<\/a>/.exec(page.text);
    assert.ok(next);
    assert.equal(next[1].replaceAll("&#38;", "&"), `/ui/login/password?authRequest=${request.id}`);
    const passwordPage = await browser.follow(next[1].replaceAll("&#38;", "&"));
    const old = await browser.submit(passwordPage, "/ui/login/password", { password: PASSWORD });
    assert.equal(alertOf(old.text), "The login name or password is wrong.", "the old password is gone");
    const done = await browser.submit(old, "/ui/login/password", { password: NEW_PASSWORD });
    assert.equal(done.status, 303);
    assert.equal(new URL(done.location!).searchParams.get("code"), TestCompleter.codeFor(request.id));
    assert.equal(platform.completer.completionOf(request.id)?.session.userId, userId);

    // the code is used up (another browser: a sign-in of the UI's own)
    const reuse = new HttpBrowser(platform.url);
    const reused = await reuse.submit(await reuse.get(link.url), "/ui/login/password-reset/set", {
      code: link.code,
      password: "Th1rd-Passw0rd!",
      passwordConfirm: "Th1rd-Passw0rd!",
    });
    assert.match(reused.text, /This code is wrong or has expired/);
  });

  it("an unknown name gets the identical page and no e-mail; beyond the per-user limit too", async () => {
    await addHuman(platform, "heidi", PASSWORD);
    const known = await requestReset(new HttpBrowser(platform.url), "heidi");
    const unknown = await requestReset(new HttpBrowser(platform.url), "nobody");
    const normal = (text: string, name: string) =>
      text.replaceAll(name, "NAME").replace(/authRequest(=|%3D)[\w-]+/g, "authRequest=ID");
    assert.equal(unknown.sent.status, known.sent.status);
    assert.equal(normal(unknown.sent.text, "nobody"), normal(known.sent.text, "heidi"));
    await linkTo("heidi@example.com", "/ui/login/password-reset");
    await settle();
    assert.equal(mailsTo("nobody@example.com"), 0);

    // three codes a minute for a user: the fourth request gets the same page and sends nothing
    for (let i = 0; i < 3; i++) {
      const more = await requestReset(new HttpBrowser(platform.url), "heidi");
      assert.equal(normal(more.sent.text, "heidi"), normal(known.sent.text, "heidi"));
    }
    await linkTo("heidi@example.com", "/ui/login/password-reset", 2);
    await settle();
    assert.equal(
      smtp.received.filter(
        (m) => m.envelope.to.includes("heidi@example.com") && (m.mail.text ?? "").includes("password-reset?"),
      ).length,
      3,
    );
  });

  it("hide_password_reset: no link on the password page, no request page", async () => {
    await addHuman(platform, "ivan", PASSWORD);
    const owner = { type: 2 as const, id: instanceId };
    const set = (hide: boolean) =>
      changeSettings(platform.eventStore, {
        category: LOGIN,
        owner,
        instanceId,
        creator: "test",
        set: hide ? { hide_password_reset: true } : {},
        reset: hide ? [] : ["hide_password_reset"],
      });
    await set(true);
    try {
      const browser = new HttpBrowser(platform.url);
      const { request, passwordPage } = await toPasswordPage(browser, "ivan");
      assert.doesNotMatch(passwordPage.text, /Forgot password/);
      const page = await browser.get(`/ui/login/password-reset?authRequest=${request.id}`);
      assert.equal(page.status, 403);
      assert.match(alertOf(page.text) ?? "", /cannot be reset here/);
    } finally {
      await set(false);
    }
  });

  it("registration sends VERIFY_EMAIL; its link verifies the address (the users API says so)", async () => {
    const browser = new HttpBrowser(platform.url);
    const request = await createAuthRequest(platform, { prompt: ["create"] });
    const form = await browser.follow(`/ui/login?authRequest=${request.id}`);
    const page = await browser.submit(form, "/ui/login/register", {
      username: "judy",
      givenName: "Judy",
      familyName: "Example",
      email: "judy@example.com",
      password: PASSWORD,
      passwordConfirm: PASSWORD,
    });
    assert.match(page.text, /Verify your e-mail address/);
    assert.match(page.text, /We sent you an e-mail with a code/);
    assert.match(page.text, /Enter the code we sent to judy@example\.com/);
    const [user] = await platform.db.query<{ id: string }>(
      "SELECT id FROM users WHERE instance_id = $1 AND username = 'judy'",
      [instanceId],
    );
    const verified = async () => (await rest("GET", `${USERS}/${user.id}`)).json.user.human.email.is_verified;
    assert.equal(await verified(), false);
    const link = await linkTo("judy@example.com", "/ui/login/verify-email");

    // a wrong code on the page after registration
    const wrong = await browser.submit(page, "/ui/login/verify-email", { code: "WRONG234" });
    assert.match(wrong.text, /This code is wrong or has expired/);
    assert.equal(await verified(), false);

    // the link, opened in another browser: the code filled in, verified, a page saying so
    const other = new HttpBrowser(platform.url);
    const linkPage = await other.get(link.url);
    assert.equal(linkPage.status, 200);
    assert.match(linkPage.text, new RegExp(`value="${link.code}"`));
    const done = await other.submit(linkPage, "/ui/login/verify-email", { code: link.code });
    assert.match(done.text, /your e-mail address is verified/);
    assert.equal(await verified(), true);

    // the first browser's sign-in goes on
    const skip = await browser.get(`/ui/login/complete?authRequest=${request.id}`);
    assert.equal(skip.status, 302);
    assert.equal(platform.completer.completionOf(request.id)?.session.userId, user.id);
  });

  it("resend: a new code replaces the old one; beyond three codes a minute the page says so", async () => {
    const browser = new HttpBrowser(platform.url);
    const request = await createAuthRequest(platform, { prompt: ["create"] });
    const form = await browser.follow(`/ui/login?authRequest=${request.id}`);
    let page = await browser.submit(form, "/ui/login/register", {
      username: "kim",
      givenName: "Kim",
      familyName: "Example",
      email: "kim@example.com",
      password: PASSWORD,
      passwordConfirm: PASSWORD,
    });
    const first = await linkTo("kim@example.com", "/ui/login/verify-email");
    page = await browser.submit(page, "/ui/login/verify-email/resend", {});
    assert.match(page.text, /We sent you a new code/);
    const second = await linkTo("kim@example.com", "/ui/login/verify-email", 1);
    assert.notEqual(second.code, first.code);
    page = await browser.submit(page, "/ui/login/verify-email/resend", {});
    page = await browser.submit(page, "/ui/login/verify-email/resend", {});
    assert.match(alertOf(page.text) ?? "", /Too many codes were requested/);
    // the old code no longer works, the newest does; the sign-in then completes
    page = await browser.submit(page, "/ui/login/verify-email", { code: first.code });
    assert.match(page.text, /This code is wrong or has expired/);
    const third = await linkTo("kim@example.com", "/ui/login/verify-email", 2);
    const done = await browser.submit(page, "/ui/login/verify-email", { code: third.code });
    assert.equal(done.status, 302);
    assert.ok(done.location?.startsWith(REDIRECT_URI));
  });

  it("invitation: the e-mail's link sets the first password and signs in", async () => {
    const created = await rest("POST", USERS, {
      json: {
        username: "leo",
        human: {
          profile: { given_name: "Leo", family_name: "Example" },
          email: { address: "leo@example.com", is_verified: true },
        },
      },
    });
    assert.equal(created.status, 201, created.text);
    const userId = created.json.details.id as string;
    assert.equal((await rest("POST", `${USERS}/${userId}/_invite`, { json: {} })).status, 200);
    const link = await linkTo("leo@example.com", "/ui/login/invite");
    const browser = new HttpBrowser(platform.url);
    let page = await browser.get(link.url);
    assert.equal(page.status, 200);
    assert.match(page.text, /Set up your account/);
    assert.match(page.text, new RegExp(`value="${link.code}"`));
    page = await browser.submit(page, "/ui/login/invite", {
      code: link.code,
      password: "short",
      passwordConfirm: "short",
    });
    assert.match(page.text, /The password does not meet the requirements/);
    assert.match(page.text, new RegExp(`value="${link.code}"`), "the code stays filled in");
    page = await browser.submit(page, "/ui/login/invite", {
      code: "WRONG234",
      password: NEW_PASSWORD,
      passwordConfirm: NEW_PASSWORD,
    });
    assert.match(page.text, /This code is wrong or has expired/);
    const posted = await browser.post("/ui/login/invite", {
      ...formOf(page.text, "/ui/login/invite"),
      code: link.code,
      password: NEW_PASSWORD,
      passwordConfirm: NEW_PASSWORD,
    });
    assert.equal(posted.status, 303);
    const account = await browser.follow(posted.location!);
    assert.match(account.text, /Your account/, "signed in: the account page");
    assert.match(account.text, /leo@/);

    // and the password signs in in another browser
    const fresh = new HttpBrowser(platform.url);
    const again = await toPasswordPage(fresh, "leo");
    const done = await fresh.submit(again.passwordPage, "/ui/login/password", { password: NEW_PASSWORD });
    assert.equal(done.status, 303);
    assert.equal(platform.completer.completionOf(again.request.id)?.session.userId, userId);
  });

  it("an invitation's code works only on the invitation page, a reset's only on the reset page; accepting the invitation verifies the e-mail", async () => {
    const created = await rest("POST", USERS, {
      json: {
        username: "ivy",
        human: {
          profile: { given_name: "Ivy", family_name: "Example" },
          email: { address: "ivy@example.com" },
        },
      },
    });
    assert.equal(created.status, 201, created.text);
    const userId = created.json.details.id as string;
    const state = async () =>
      (
        await platform.db.query<{ password_hash: string | null; email_verified: boolean }>(
          "SELECT password_hash, email_verified FROM users WHERE id = $1",
          [userId],
        )
      )[0];
    const failedTries = async () =>
      (
        await platform.db.query<{ n: number }>(
          "SELECT count(*)::int AS n FROM events WHERE aggregate_id = $1 AND event_type = 'user.human.password.code.check.failed'",
          [userId],
        )
      )[0].n;
    assert.equal((await rest("POST", `${USERS}/${userId}/_invite`, { json: {} })).status, 200);
    const invite = await linkTo("ivy@example.com", "/ui/login/invite");

    // the invitation's code on the reset's page: refused, not counted, nothing set
    const browser = new HttpBrowser(platform.url);
    const onReset = await browser.submit(
      await browser.get(invite.url.replace("/ui/login/invite?", "/ui/login/password-reset?")),
      "/ui/login/password-reset/set",
      { code: invite.code, password: NEW_PASSWORD, passwordConfirm: NEW_PASSWORD },
    );
    assert.match(onReset.text, /This code is wrong or has expired/);
    assert.deepEqual(await state(), { password_hash: null, email_verified: false });
    assert.equal(await failedTries(), 0, "a code of the other kind is not a wrong try");

    // on its own page it sets the password, signs in and verifies the address it was sent to
    let page = await browser.get(invite.url);
    const posted = await browser.post("/ui/login/invite", {
      ...formOf(page.text, "/ui/login/invite"),
      code: invite.code,
      password: NEW_PASSWORD,
      passwordConfirm: NEW_PASSWORD,
    });
    assert.equal(posted.status, 303);
    assert.match((await browser.follow(posted.location!)).text, /Your account/);
    const accepted = await state();
    assert.ok(accepted.password_hash);
    assert.equal(accepted.email_verified, true, "accepting the invitation verified the e-mail address");
    const user = await rest("GET", `${USERS}/${userId}`);
    assert.equal(user.json.user.human.email.is_verified, true, "the users API says so");

    // a reset's code on the invitation page: refused; on the reset's page it works
    assert.equal(
      (await rest("POST", `${USERS}/${userId}/password/_request_reset`, { json: {} })).status,
      200,
    );
    const reset = await linkTo("ivy@example.com", "/ui/login/password-reset");
    const other = new HttpBrowser(platform.url);
    page = await other.submit(
      await other.get(reset.url.replace("/ui/login/password-reset?", "/ui/login/invite?")),
      "/ui/login/invite",
      { code: reset.code, password: "Th1rd-Passw0rd!", passwordConfirm: "Th1rd-Passw0rd!" },
    );
    assert.match(page.text, /This code is wrong or has expired/);
    assert.equal((await state()).password_hash, accepted.password_hash, "the password stays");
    assert.equal(await failedTries(), 0);
    page = await other.submit(await other.get(reset.url), "/ui/login/password-reset/set", {
      code: reset.code,
      password: "Th1rd-Passw0rd!",
      passwordConfirm: "Th1rd-Passw0rd!",
    });
    assert.match(page.text, /Your password was changed/);
    assert.notEqual((await state()).password_hash, accepted.password_hash);
  });

  it("a password code recorded without a reason (an older event) is a reset's: the reset page takes it, the invitation page does not", async () => {
    const userId = await addHuman(platform, "olga", PASSWORD);
    const code = "LEGACY23";
    const target = "olga@example.com";
    await platform.eventStore.push({ instanceId, creator: "test" }, async () => [
      {
        aggregateType: USER,
        aggregateId: userId,
        resourceOwner: platform.bootstrapResult!.orgId,
        type: UserEvent.passwordCodeAdded,
        payload: {
          code_hash: codeHash(
            platform.deps.masterKey,
            { instanceId, userId, channel: "password", target },
            code,
          ),
          expires_at: new Date(Date.now() + 600_000).toISOString(),
          target,
          sent: true,
        },
      },
    ]);
    const fields = { code, password: NEW_PASSWORD, passwordConfirm: NEW_PASSWORD };
    const browser = new HttpBrowser(platform.url);
    const query = `userID=${userId}&code=${code}`;
    const onInvite = await browser.submit(
      await browser.get(`/ui/login/invite?${query}`),
      "/ui/login/invite",
      fields,
    );
    assert.match(onInvite.text, /This code is wrong or has expired/);
    const onReset = await browser.submit(
      await browser.get(`/ui/login/password-reset?${query}`),
      "/ui/login/password-reset/set",
      fields,
    );
    assert.match(onReset.text, /Your password was changed/);
  });

  it("no active SMTP provider: the pages say the e-mail could not be sent", async () => {
    await addHuman(platform, "mia", PASSWORD);
    assert.equal((await rest("POST", `${SMTP}/${providerId}/_deactivate`)).status, 200);
    try {
      const { sent } = await requestReset(new HttpBrowser(platform.url), "mia");
      assert.match(sent.text, /E-mail could not be sent/);
      assert.match(alertOf(sent.text) ?? "", /sending e-mail is not set up/);
      // the same for a name that does not exist: the page still tells nothing about accounts
      const { sent: unknown } = await requestReset(new HttpBrowser(platform.url), "nobody-else");
      assert.match(alertOf(unknown.text) ?? "", /sending e-mail is not set up/);

      const browser = new HttpBrowser(platform.url);
      const request = await createAuthRequest(platform, { prompt: ["create"] });
      const form = await browser.follow(`/ui/login?authRequest=${request.id}`);
      let page = await browser.submit(form, "/ui/login/register", {
        username: "nora",
        givenName: "Nora",
        familyName: "Example",
        email: "nora@example.com",
        password: PASSWORD,
        passwordConfirm: PASSWORD,
      });
      assert.match(page.text, /Verify your e-mail address/);
      assert.match(alertOf(page.text) ?? "", /could not be sent/);
      page = await browser.submit(page, "/ui/login/verify-email/resend", {});
      assert.match(alertOf(page.text) ?? "", /could not be sent/);
      const skip = /<a href="([^"]+)">Skip for now<\/a>/.exec(page.text);
      assert.ok(skip, "the sign-in can go on without the code");
      const done = await browser.get(skip[1].replaceAll("&#38;", "&"));
      assert.equal(done.status, 302);
      await settle();
      assert.equal(mailsTo("mia@example.com") + mailsTo("nora@example.com"), 0);
    } finally {
      assert.equal((await rest("POST", `${SMTP}/${providerId}/_activate`)).status, 200);
    }
  });
});
