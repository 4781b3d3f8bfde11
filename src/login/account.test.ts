/**
 * The account page's forms over HTTP (Chromium runs them in test/account-browser.test.ts): profile, e-mail
 * and phone with their codes (a real SMTP server and an SMS gateway receive them), password, links to
 * identity providers and signing one account out; what each stores (read back through the users API), the
 * events' creator, CSRF, and that a form only ever reaches the browser's own live session.
 */
import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import { addMachineUser, eventCount, restClient } from "../../test/helpers.ts";
import {
  addHuman,
  alertOf,
  formOf,
  HttpBrowser,
  type LoginTestPlatform,
  startLoginPlatform,
} from "../../test/login.ts";
import { type SmtpReceiver, startSmtpReceiver } from "../../test/smtp-receiver.ts";
import { testTime } from "../../test/time.ts";
import { sha256 } from "../crypto/tokens.ts";
import { createSession, terminateSession } from "../domain/session/commands.ts";
import { addHumanEvent, foldUser } from "../domain/user/commands.ts";
import { USER } from "../domain/user/events.ts";
import { addIdpLinkEvents } from "../domain/user/idp-links.ts";
import { newId } from "../id.ts";

const PASSWORD = "Secret-Passw0rd!";
const USERS = "/resources/v3alpha/users";

describe("account page over HTTP", () => {
  let platform: LoginTestPlatform;
  let instanceId: string;
  let owner: string;
  const rest = restClient(
    () => platform,
    () => owner,
  );

  before(async () => {
    platform = await startLoginPlatform({ PLATFORM_MAX_PASSWORD_ATTEMPTS: "5" });
    instanceId = platform.bootstrapResult!.instanceId;
    ({ token: owner } = await addMachineUser(platform, {
      username: "owner",
      membership: { contextType: "instance", roles: ["IAM_OWNER"] },
    }));
  });
  after(() => platform.stop());

  /** A browser signed in as `loginName` through the UI's own sign-in; answers it and the account page. */
  async function signedIn(loginName: string, password = PASSWORD, browser = new HttpBrowser(platform.url)) {
    const loginPage = await browser.follow("/ui/login/loginname");
    const passwordPage = await browser.submit(loginPage, "/ui/login/loginname", { loginName });
    const page = await browser.submit(passwordPage, "/ui/login/password", { password });
    assert.equal(page.status, 200, page.text);
    assert.match(page.text, /<h1 id="page-title">Your account<\/h1>/);
    return { browser, page };
  }

  const userOf = async (id: string) => (await rest("GET", `${USERS}/${id}`)).json.user;
  const creators = async (userId: string, type: string) =>
    (
      await platform.db.query<{ creator: string }>(
        "SELECT creator FROM events WHERE instance_id = $1 AND aggregate_id = $2 AND event_type = $3",
        [instanceId, userId, type],
      )
    ).map((r) => r.creator);
  const fieldError = (html: string, name: string) =>
    new RegExp(`<p class="field-error" id="${name}-error">([^<]*)</p>`).exec(html)?.[1];
  const notice = (html: string) => /<div class="notice" role="status">([^<]*)<\/div>/.exec(html)?.[1];

  it("saves the profile through PatchUser's rules, with the user as creator", async () => {
    const id = await addHuman(platform, "paula", PASSWORD);
    const { browser, page } = await signedIn("paula");
    assert.match(page.text, /value="Paula"/);
    const saved = await browser.submit(page, "/ui/login/account/profile", {
      givenName: "Paola",
      familyName: "Rossi",
      displayName: "",
      nickName: "Pao",
      preferredLanguage: "it",
    });
    assert.equal(saved.status, 200);
    assert.equal(notice(saved.text), "Your profile was saved.");
    assert.match(saved.text, /value="Paola"/);
    const profile = (await userOf(id)).human.profile;
    assert.equal(profile.given_name, "Paola");
    assert.equal(profile.family_name, "Rossi");
    assert.equal(profile.nick_name, "Pao");
    assert.equal(profile.preferred_language, "it");
    assert.equal(profile.display_name ?? "", "", "an empty display name removes it");
    assert.deepEqual(await creators(id, "user.changed"), [id]);
  });

  it("shows each invalid profile value on the form and stores nothing", async () => {
    const id = await addHuman(platform, "pietro", PASSWORD);
    const { browser, page } = await signedIn("pietro");
    const before = await eventCount(platform);
    const form = formOf(page.text, "/ui/login/account/profile");
    const posted = await browser.post("/ui/login/account/profile", {
      ...form,
      givenName: "",
      familyName: "x".repeat(201),
      displayName: "Nul\u0000",
      nickName: "Piet",
      preferredLanguage: "xx",
    });
    assert.equal(posted.status, 303);
    const shown = await browser.follow(posted.location!);
    assert.equal(await eventCount(platform), before, "nothing stored");
    assert.equal(alertOf(shown.text), "Please correct the marked fields.");
    assert.equal(fieldError(shown.text, "givenName"), "This field is required.");
    assert.equal(fieldError(shown.text, "familyName"), "This is too long: at most 200 characters.");
    assert.equal(fieldError(shown.text, "displayName"), "This value is not valid.");
    assert.equal(fieldError(shown.text, "preferredLanguage"), "This value is not valid.");
    assert.match(shown.text, /id="givenName"[^>]*aria-describedby="givenName-error"[^>]*aria-invalid="true"/);
    assert.match(shown.text, /id="nickName"[^>]*value="Piet"/, "the values typed are kept");
    assert.equal((await userOf(id)).human.profile.given_name, "Pietro");
    // the page shows the outcome once
    const again = await browser.get("/");
    assert.equal(alertOf(again.text), undefined);
  });

  it("offers and accepts only the languages the instance allows", async () => {
    const id = await addHuman(platform, "lucia", PASSWORD);
    const options = (html: string) =>
      [
        ...(/<select[^>]*name="preferredLanguage"[^>]*>([\s\S]*?)<\/select>/.exec(html)?.[1] ?? "").matchAll(
          /<option value="(\w*)"/g,
        ),
      ].map((m) => m[1]);
    const restrict = await rest("PATCH", "/settings/v3alpha/languages", {
      json: { restricted_languages: { languages: [{ key: "en" }, { key: "de" }, { key: "fr" }] } },
    });
    assert.equal(restrict.status, 200, restrict.text);
    try {
      const { browser, page } = await signedIn("lucia");
      assert.deepEqual(
        options(page.text).filter((v) => v !== ""),
        ["en", "de", "fr"],
      );
      const before = await eventCount(platform);
      const form = formOf(page.text, "/ui/login/account/profile");
      const posted = await browser.post("/ui/login/account/profile", { ...form, preferredLanguage: "it" });
      const shown = await browser.follow(posted.location!);
      assert.equal(fieldError(shown.text, "preferredLanguage"), "This value is not valid.");
      assert.equal(await eventCount(platform), before, "nothing stored");
      assert.equal((await userOf(id)).human.profile.preferred_language ?? "", "");
    } finally {
      await rest("PATCH", "/settings/v3alpha/languages", {
        json: { restricted_languages: { languages: [] } },
      });
    }
  });

  it("changes the password with the current one; a wrong one counts toward the lockout with one message", async () => {
    const id = await addHuman(platform, "petra", PASSWORD);
    const { browser, page } = await signedIn("petra");
    assert.match(page.text, /id="password-policy"/);
    const wrong = await browser.submit(page, "/ui/login/account/password", {
      currentPassword: "Wrong-Passw0rd!",
      newPassword: "Renewed-Passw0rd!",
      newPasswordConfirm: "Renewed-Passw0rd!",
    });
    const message = fieldError(wrong.text, "currentPassword");
    assert.match(message ?? "", /current password is wrong/);
    assert.deepEqual(await creators(id, "user.password.check.failed"), [id], "counted like a sign-in");
    assert.deepEqual(await creators(id, "user.password.changed"), []);

    const policy = await browser.submit(wrong, "/ui/login/account/password", {
      currentPassword: PASSWORD,
      newPassword: "short",
      newPasswordConfirm: "other",
    });
    assert.equal(fieldError(policy.text, "newPassword"), "The password does not meet the requirements.");
    assert.equal(fieldError(policy.text, "newPasswordConfirm"), "The passwords do not match.");
    assert.ok(!policy.text.includes("short"), "passwords are never shown again");

    const changed = await browser.submit(policy, "/ui/login/account/password", {
      currentPassword: PASSWORD,
      newPassword: "Renewed-Passw0rd!",
      newPasswordConfirm: "Renewed-Passw0rd!",
      keepSession: "true",
    });
    assert.equal(
      notice(changed.text),
      "Your password was changed. You were signed out on every other browser and device.",
    );
    assert.deepEqual(await creators(id, "user.password.changed"), [id]);
    // this browser stays signed in ("Stay signed in on this browser"), and the new password signs in elsewhere
    assert.match((await browser.get("/")).text, /Your account/);
    await signedIn("petra", "Renewed-Passw0rd!");
  });

  it("locks the password checks out after too many wrong current passwords, with the same message", async () => {
    await addHuman(platform, "pia", PASSWORD);
    const { browser, page } = await signedIn("pia");
    let shown = page;
    const messages = new Set<string | undefined>();
    // PLATFORM_MAX_PASSWORD_ATTEMPTS=5: the 5th wrong one locks out; then the right one fails alike
    for (const current of ["W1-rong!x", "W2-rong!x", "W3-rong!x", "W4-rong!x", "W5-rong!x", PASSWORD]) {
      shown = await browser.submit(shown, "/ui/login/account/password", {
        currentPassword: current,
        newPassword: "Renewed-Passw0rd!",
        newPasswordConfirm: "Renewed-Passw0rd!",
      });
      messages.add(fieldError(shown.text, "currentPassword"));
    }
    assert.equal(messages.size, 1, "one message for wrong and locked out");
    assert.ok([...messages][0]);
  });

  it("refuses a post without the CSRF token, or naming a session that is not this browser's live one", async () => {
    const id = await addHuman(platform, "quentin", PASSWORD);
    const other = await addHuman(platform, "rita", PASSWORD);
    const { browser, page } = await signedIn("quentin");
    const { page: ritaPage } = await signedIn("rita");
    const form = formOf(page.text, "/ui/login/account/profile");
    const before = await eventCount(platform);

    const noCsrf = await browser.post("/ui/login/account/profile", {
      session: form.session,
      givenName: "Q",
      familyName: "Q",
    });
    assert.equal(noCsrf.status, 403);
    // rita's session (another browser) named from quentin's browser: not one of its sessions
    const ritaSession = formOf(ritaPage.text, "/ui/login/account/profile").session;
    const foreign = await browser.post("/ui/login/account/profile", {
      ...form,
      session: ritaSession,
      userId: other,
      givenName: "Hacked",
      familyName: "Hacked",
    });
    assert.equal(foreign.status, 403);
    assert.match(foreign.text, /no longer signed in/);
    const foreignLink = await browser.post("/ui/login/account/signout", { ...form, target: ritaSession });
    assert.equal(foreignLink.status, 303);
    assert.equal(await eventCount(platform), before, "nothing stored");
    assert.equal((await userOf(other)).human.profile.given_name, "Rita");

    // the session ended (through the sessions domain, as the API would): its forms are refused
    await terminateSession(platform.eventStore, { instanceId, creator: "test" }, { sessionId: form.session });
    const ended = await browser.post("/ui/login/account/profile", {
      ...form,
      givenName: "Q",
      familyName: "Q",
    });
    assert.equal(ended.status, 403);
    assert.equal((await userOf(id)).human.profile.given_name, "Quentin");
  });

  it("refuses the forms of a user locked since", async () => {
    const id = await addHuman(platform, "sven", PASSWORD);
    const { browser, page } = await signedIn("sven");
    const locked = await rest("POST", `${USERS}/${id}/_lock`, { json: {} });
    assert.equal(locked.status, 200, locked.text);
    const form = formOf(page.text, "/ui/login/account/password");
    const before = await eventCount(platform);
    const answer = await browser.post("/ui/login/account/password", {
      ...form,
      currentPassword: PASSWORD,
      newPassword: "Renewed-Passw0rd!",
      newPasswordConfirm: "Renewed-Passw0rd!",
    });
    assert.equal(answer.status, 403);
    assert.equal(await eventCount(platform), before);
  });

  it("removes links to identity providers, but never the only way to sign in", async () => {
    const link = (userId: string, idpId: string) =>
      platform.eventStore.push({ instanceId, creator: "test" }, async (tx) => {
        const user = foldUser(await tx.load(USER, userId));
        assert.ok(user);
        return addIdpLinkEvents(user, {
          idp_id: idpId,
          external_user_id: `${userId}-${idpId}`,
          external_username: `${idpId}-name`,
        });
      });
    const id = await addHuman(platform, "tina", PASSWORD);
    await link(id, "idp-a");
    await link(id, "idp-b");
    const { browser, page } = await signedIn("tina");
    assert.match(page.text, /idp-a-name/);
    const removed = await browser.submit(page, "/ui/login/account/links/remove", { idp: "idp-a" });
    assert.equal(notice(removed.text), "The link was removed.");
    assert.deepEqual(await creators(id, "user.idp.link.removed"), [id]);
    const links = (await rest("GET", `${USERS}/${id}/links`)).json.links;
    assert.deepEqual(
      links.map((l: { idp_id: string }) => l.idp_id),
      ["idp-b"],
    );

    // a user without a password (signed in through its provider) keeps its last link
    const idpOnly = newId();
    await platform.eventStore.push({ instanceId, creator: "test" }, async () => [
      addHumanEvent(idpOnly, platform.bootstrapResult!.orgId, {
        username: "walter",
        profile: { given_name: "Walter", family_name: "Example" },
        email: { address: "walter@example.com", is_verified: true },
      }),
    ]);
    await link(idpOnly, "idp-a");
    const fresh = new HttpBrowser(platform.url);
    await fresh.get("/ui/login/loginname"); // the browser's cookie
    await createSession(
      platform.eventStore,
      { instanceId, creator: idpOnly },
      {
        user: { id: idpOnly, orgId: platform.bootstrapResult!.orgId },
        userAgentHash: sha256(fresh.cookies.get("platform_ua")!),
        idpId: "idp-a",
      },
      platform.login.policy,
    );
    const walterPage = await fresh.get("/");
    assert.match(walterPage.text, /Your account has no password/);
    const before = await eventCount(platform);
    const refused = await fresh.submit(walterPage, "/ui/login/account/links/remove", { idp: "idp-a" });
    assert.match(alertOf(refused.text) ?? "", /only way to sign in/);
    assert.equal(await eventCount(platform), before, "nothing stored");
    assert.equal((await rest("GET", `${USERS}/${idpOnly}/links`)).json.links.length, 1);
  });

  it("signs one account of the browser out and keeps the other", async () => {
    await addHuman(platform, "ulla", PASSWORD);
    await addHuman(platform, "vera", PASSWORD);
    const { browser } = await signedIn("ulla");
    const { page } = await signedIn("vera", PASSWORD, browser);
    const sessions = [...page.text.matchAll(/name="target" value="([^"]+)"/g)].map((m) => m[1]);
    assert.equal(sessions.length, 2);
    const form = formOf(page.text, "/ui/login/account/signout");
    // vera is shown (the most recent); sign ulla out
    const ulla = sessions.find((s) => s !== form.session)!;
    const posted = await browser.post("/ui/login/account/signout", { ...form, target: ulla });
    assert.equal(posted.status, 303);
    const shown = await browser.follow(posted.location!);
    assert.equal(notice(shown.text), "The account was signed out on this browser.");
    assert.equal([...shown.text.matchAll(/name="target"/g)].length, 1);
    assert.doesNotMatch(shown.text, /ulla@/);
  });
});

describe("account page rate limits", () => {
  let platform: LoginTestPlatform;

  before(async () => {
    platform = await startLoginPlatform({
      PLATFORM_LOGIN_ATTEMPTS_PER_IP: "3",
      PLATFORM_LOGIN_ATTEMPTS_PER_NAME: "0",
    });
    await addHuman(platform, "xenia", PASSWORD);
  });
  after(() => platform.stop());

  it("counts the forms' posts per client IP like the sign-in's, with a 429 page back to the account", async () => {
    const browser = new HttpBrowser(platform.url);
    const loginPage = await browser.follow("/ui/login/loginname");
    const passwordPage = await browser.submit(loginPage, "/ui/login/loginname", { loginName: "xenia" });
    const page = await browser.submit(passwordPage, "/ui/login/password", { password: PASSWORD }); // 1
    const form = formOf(page.text, "/ui/login/account/profile");
    const first = await browser.post("/ui/login/account/profile", {
      ...form,
      givenName: "Xenia",
      familyName: "Example",
    }); // 2
    assert.equal(first.status, 303);
    // the outcome cookie: HttpOnly, SameSite=Lax, short-lived
    const outcome = browser.setCookieHeaders.find((h) => h.startsWith("platform_account_form="));
    assert.match(outcome ?? "", /HttpOnly/i);
    assert.match(outcome ?? "", /SameSite=Lax/i);
    assert.match(outcome ?? "", /Max-Age=120/i);
    await browser.post("/ui/login/account/profile", { ...form, givenName: "X", familyName: "Y" }); // 3
    const limited = await browser.post("/ui/login/account/profile", {
      ...form,
      givenName: "Z",
      familyName: "Z",
    });
    assert.equal(limited.status, 429);
    assert.match(limited.text, /Too many attempts/);
    assert.match(limited.text, /href="\/"/);
    assert.ok(Number(limited.headers.get("retry-after")) > 0);
  });
});

describe("account page: e-mail address and phone number", () => {
  let platform: LoginTestPlatform;
  let smtp: SmtpReceiver;
  let gateway: http.Server;
  let instanceId: string;
  let owner: string;
  let smtpProvider: string;
  /** The SMS gateway's posts (VERIFY_PHONE messages). */
  const sms: { recipient: string; text: string; type: string }[] = [];
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
        const body = JSON.parse(raw);
        sms.push({ recipient: body.recipient, text: String(body.text), type: body.message_type });
        res.writeHead(202).end();
      });
    });
    await new Promise<void>((r) => gateway.listen(0, "127.0.0.1", r));
    platform = await startLoginPlatform();
    instanceId = platform.bootstrapResult!.instanceId;
    ({ token: owner } = await addMachineUser(platform, {
      username: "owner",
      membership: { contextType: "instance", roles: ["IAM_OWNER"] },
    }));
    const mail = await rest("POST", "/resources/v3alpha/smtp_providers", {
      json: { description: "mail", sender_address: "noreply@example.com", host: `127.0.0.1:${smtp.port}` },
    });
    assert.equal(mail.status, 201, mail.text);
    smtpProvider = mail.json.details.id;
    assert.equal(
      (await rest("POST", `/resources/v3alpha/smtp_providers/${smtpProvider}/_activate`)).status,
      200,
    );
    const port = (gateway.address() as AddressInfo).port;
    const text = await rest("POST", "/resources/v3alpha/sms_providers", {
      json: { description: "gateway", http: { endpoint: `http://127.0.0.1:${port}/send` } },
    });
    assert.equal(text.status, 201, text.text);
    const smsProvider = text.json.details.id;
    assert.equal(
      (await rest("POST", `/resources/v3alpha/sms_providers/${smsProvider}/_activate`)).status,
      200,
    );
  });
  after(async () => {
    await platform.stop();
    await smtp.close();
    await new Promise((r) => gateway.close(r));
  });

  async function signedIn(loginName: string) {
    const browser = new HttpBrowser(platform.url);
    const loginPage = await browser.follow("/ui/login/loginname");
    const passwordPage = await browser.submit(loginPage, "/ui/login/loginname", { loginName });
    const page = await browser.submit(passwordPage, "/ui/login/password", { password: PASSWORD });
    assert.match(page.text, /<h1 id="page-title">Your account<\/h1>/);
    return { browser, page };
  }
  const human = async (id: string) => (await rest("GET", `${USERS}/${id}`)).json.user.human;
  const fieldError = (html: string, name: string) =>
    new RegExp(`<p class="field-error" id="${name}-error">([^<]*)</p>`).exec(html)?.[1];
  const notice = (html: string) => /<div class="notice" role="status">([^<]*)<\/div>/.exec(html)?.[1];
  const countOf = async (userId: string, type: string) =>
    (
      await platform.db.query<{ creator: string }>(
        "SELECT creator FROM events WHERE instance_id = $1 AND aggregate_id = $2 AND event_type = $3",
        [instanceId, userId, type],
      )
    ).map((r) => r.creator);
  /** The code of the `skip`th VERIFY_EMAIL message to `address` (from its link), waited for. */
  const mailedCode = async (address: string, skip = 0) => {
    for (let i = 0; i < testTime(400); i++) {
      const mails = smtp.received.filter(
        (m) => m.envelope.to.includes(address) && (m.mail.text ?? "").includes("/ui/login/verify-email?"),
      );
      if (mails.length > skip) {
        const link = /https?:\/\/\S+\/ui\/login\/verify-email\?\S+/.exec(mails[skip].mail.text ?? "")![0];
        const url = new URL(link);
        return { code: url.searchParams.get("code")!, path: `${url.pathname}${url.search}` };
      }
      await new Promise((r) => setTimeout(r, 25));
    }
    assert.fail(`no VERIFY_EMAIL message to ${address}`);
  };
  const textedCode = async (number: string) => {
    for (let i = 0; i < testTime(400); i++) {
      const found = sms.find((m) => m.recipient === number && m.type === "VERIFY_PHONE");
      if (found) return /\b(\d{6})\b/.exec(found.text)![1];
      await new Promise((r) => setTimeout(r, 25));
    }
    assert.fail(`no VERIFY_PHONE message to ${number}`);
  };

  it("changes the e-mail address: unverified, a code mailed to the new address; a wrong code changes nothing, the right one verifies", async () => {
    const id = await addHuman(platform, "emma", PASSWORD);
    const { browser, page } = await signedIn("emma");
    assert.match(page.text, /Current: emma@example\.com \(verified\)/);
    assert.doesNotMatch(
      page.text,
      /action="\/ui\/login\/account\/email\/verify"/,
      "a verified address has no code form",
    );
    const changed = await browser.submit(page, "/ui/login/account/email", {
      emailPassword: PASSWORD,
      email: "emma@new.example",
    });
    assert.match(notice(changed.text) ?? "", /e-mail address was changed\. We sent a code/);
    assert.match(changed.text, /Current: emma@new\.example \(not verified\)/);
    assert.deepEqual(
      [(await human(id)).email.address, (await human(id)).email.is_verified ?? false],
      ["emma@new.example", false],
    );
    assert.deepEqual(await countOf(id, "user.changed"), [id], "the user is the creator");
    const { code } = await mailedCode("emma@new.example");
    assert.match(code, /^[A-Z2-9]{8}$/);

    const wrong = await browser.submit(changed, "/ui/login/account/email/verify", { emailCode: "WRONG234" });
    assert.equal(alertOf(wrong.text), "Please correct the marked fields.");
    assert.equal(
      fieldError(wrong.text, "emailCode"),
      "This code is wrong or has expired. Check the code, or ask for a new one.",
    );
    assert.match(
      wrong.text,
      /id="emailCode"[^>]*aria-describedby="emailCode-error emailCode-help"[^>]*aria-invalid="true"/,
    );
    assert.equal((await human(id)).email.is_verified ?? false, false);
    assert.equal((await countOf(id, "user.human.email.code.check.failed")).length, 1, "the wrong try counts");

    const empty = await browser.submit(wrong, "/ui/login/account/email/verify", { emailCode: "" });
    assert.equal(fieldError(empty.text, "emailCode"), "This field is required.");

    const verified = await browser.submit(empty, "/ui/login/account/email/verify", {
      emailCode: code.toLowerCase().replace(/(....)/, "$1 "), // as typed: spaces and lower case are fine
    });
    assert.equal(notice(verified.text), "Your e-mail address is verified.");
    assert.match(verified.text, /Current: emma@new\.example \(verified\)/);
    assert.equal((await human(id)).email.is_verified, true);
    assert.deepEqual(await countOf(id, "user.human.email.verified"), [id]);
  });

  it("refuses an invalid or empty address and stores nothing; the same address again changes nothing", async () => {
    const id = await addHuman(platform, "eric", PASSWORD);
    const { browser, page } = await signedIn("eric");
    const before = await eventCount(platform);
    const invalid = await browser.submit(page, "/ui/login/account/email", {
      emailPassword: PASSWORD,
      email: "not an address",
    });
    assert.equal(alertOf(invalid.text), "Please correct the marked fields.");
    assert.equal(fieldError(invalid.text, "email"), "Enter an e-mail address such as name@example.com.");
    assert.match(
      invalid.text,
      /id="email"[^>]*value="not an address"[^>]*aria-describedby="email-error email-status"/,
    );
    const empty = await browser.submit(invalid, "/ui/login/account/email", {
      emailPassword: PASSWORD,
      email: "",
    });
    assert.equal(
      fieldError(empty.text, "email"),
      "This field is required.",
      "the e-mail address cannot be removed",
    );
    const phone = await browser.submit(empty, "/ui/login/account/phone", {
      phonePassword: PASSWORD,
      phone: "call me",
    });
    assert.equal(fieldError(phone.text, "phone"), "Enter a phone number such as +41 79 123 45 67.");
    const same = await browser.submit(phone, "/ui/login/account/email", {
      emailPassword: PASSWORD,
      email: "eric@example.com",
    });
    assert.equal(notice(same.text), "This is already your address: nothing was changed.");
    assert.equal(await eventCount(platform), before, "nothing stored");
    assert.equal((await human(id)).email.is_verified, true);
  });

  it("another user's code does not verify; five wrong tries invalidate the code", async () => {
    await addHuman(platform, "fabio", PASSWORD);
    const gina = await addHuman(platform, "gina", PASSWORD);
    const fabio = await signedIn("fabio");
    const ginaIn = await signedIn("gina");
    await fabio.browser.submit(fabio.page, "/ui/login/account/email", {
      emailPassword: PASSWORD,
      email: "fabio@new.example",
    });
    let page = await ginaIn.browser.submit(ginaIn.page, "/ui/login/account/email", {
      emailPassword: PASSWORD,
      email: "gina@new.example",
    });
    const fabioCode = (await mailedCode("fabio@new.example")).code;
    const ginaCode = (await mailedCode("gina@new.example")).code;
    page = await ginaIn.browser.submit(page, "/ui/login/account/email/verify", { emailCode: fabioCode });
    assert.match(fieldError(page.text, "emailCode") ?? "", /wrong or has expired/);
    for (let i = 0; i < 4; i++)
      page = await ginaIn.browser.submit(page, "/ui/login/account/email/verify", {
        emailCode: `WRONG${i}22`,
      });
    // five wrong tries: the right code no longer works
    page = await ginaIn.browser.submit(page, "/ui/login/account/email/verify", { emailCode: ginaCode });
    assert.match(fieldError(page.text, "emailCode") ?? "", /wrong or has expired/);
    assert.equal((await human(gina)).email.is_verified ?? false, false);
    // a new code works
    page = await ginaIn.browser.submit(page, "/ui/login/account/email/code", {});
    assert.equal(notice(page.text), "We sent you a new code. Earlier codes no longer work.");
    const fresh = (await mailedCode("gina@new.example", 1)).code;
    page = await ginaIn.browser.submit(page, "/ui/login/account/email/verify", { emailCode: fresh });
    assert.equal(notice(page.text), "Your e-mail address is verified.");
  });

  it("more than three codes a minute: a clear message, no error page", async () => {
    const id = await addHuman(platform, "hugo", PASSWORD);
    const { browser, page } = await signedIn("hugo");
    let shown = await browser.submit(page, "/ui/login/account/email", {
      emailPassword: PASSWORD,
      email: "hugo@new.example",
    }); // 1
    shown = await browser.submit(shown, "/ui/login/account/email/code", {}); // 2
    shown = await browser.submit(shown, "/ui/login/account/email/code", {}); // 3
    assert.equal(notice(shown.text), "We sent you a new code. Earlier codes no longer work.");
    const limited = await browser.submit(shown, "/ui/login/account/email/code", {});
    assert.equal(limited.status, 200);
    assert.equal(alertOf(limited.text), "Too many codes were requested. Please wait a minute and try again.");
    assert.equal((await countOf(id, "user.human.email.code.added")).length, 3);
    // a change beyond the limit is saved; its code waits for the next minute
    const changed = await browser.submit(limited, "/ui/login/account/email", {
      emailPassword: PASSWORD,
      email: "hugo@other.example",
    });
    assert.equal(notice(changed.text), "Your e-mail address was changed.");
    assert.equal(alertOf(changed.text), "Too many codes were requested. Please wait a minute and try again.");
    assert.equal((await human(id)).email.address, "hugo@other.example");
  });

  it("refuses the forms without the CSRF token", async () => {
    const id = await addHuman(platform, "iris", PASSWORD);
    const { browser, page } = await signedIn("iris");
    const before = await eventCount(platform);
    for (const [action, fields] of [
      ["/ui/login/account/email", { emailPassword: PASSWORD, email: "iris@evil.example" }],
      ["/ui/login/account/email/verify", { emailCode: "ABCDEFGH" }],
      ["/ui/login/account/email/code", {}],
      ["/ui/login/account/phone", { phonePassword: PASSWORD, phone: "+41 79 000 00 00" }],
    ] as const) {
      const { csrf: _csrf, ...form } = formOf(
        page.text,
        action === "/ui/login/account/email/verify" || action === "/ui/login/account/email/code"
          ? "/ui/login/account/email"
          : action,
      );
      const answer = await browser.post(action, { ...form, ...fields });
      assert.equal(answer.status, 403, action);
    }
    assert.equal(await eventCount(platform), before, "nothing stored");
    assert.equal((await human(id)).email.address, "iris@example.com");
  });

  it("the e-mail's link verifies the address in the signed-in browser too, and leads back to the account", async () => {
    const id = await addHuman(platform, "jana", PASSWORD);
    const { browser, page } = await signedIn("jana");
    await browser.submit(page, "/ui/login/account/email", {
      emailPassword: PASSWORD,
      email: "jana@new.example",
    });
    const link = await mailedCode("jana@new.example");
    const linkPage = await browser.get(link.path);
    assert.equal(linkPage.status, 200);
    assert.match(linkPage.text, new RegExp(`value="${link.code}"`));
    const done = await browser.submit(linkPage, "/ui/login/verify-email", { code: link.code });
    assert.match(done.text, /your e-mail address is verified/);
    assert.match(done.text, /href="\/"/, "a link to the account page");
    assert.equal((await human(id)).email.is_verified, true);
    const account = await browser.get("/");
    assert.match(account.text, /Current: jana@new\.example \(verified\)/);
  });

  it("sets the phone number: a code by SMS verifies it; the number can be removed", async () => {
    const id = await addHuman(platform, "karl", PASSWORD);
    const { browser, page } = await signedIn("karl");
    assert.match(page.text, /You have not given a phone number\./);
    assert.doesNotMatch(page.text, /Remove phone number/);
    let shown = await browser.submit(page, "/ui/login/account/phone", {
      phonePassword: PASSWORD,
      phone: "+41 79 555 01 02",
    });
    assert.match(notice(shown.text) ?? "", /phone number was changed\. We sent a code by text message/);
    assert.match(shown.text, /Current: \+41 79 555 01 02 \(not verified\)/);
    assert.equal((await human(id)).phone.is_verified ?? false, false);
    const code = await textedCode("+41 79 555 01 02");
    shown = await browser.submit(shown, "/ui/login/account/phone/verify", {
      phoneCode: "000000" === code ? "111111" : "000000",
    });
    assert.match(fieldError(shown.text, "phoneCode") ?? "", /wrong or has expired/);
    shown = await browser.submit(shown, "/ui/login/account/phone/verify", { phoneCode: code });
    assert.equal(notice(shown.text), "Your phone number is verified.");
    assert.deepEqual(
      [(await human(id)).phone.number, (await human(id)).phone.is_verified],
      ["+41 79 555 01 02", true],
    );
    shown = await browser.submit(shown, "/ui/login/account/phone", { phonePassword: PASSWORD, phone: "" });
    assert.equal(notice(shown.text), "Your phone number was removed.");
    assert.equal((await human(id)).phone, undefined);
    assert.match(shown.text, /You have not given a phone number\./);
  });

  it("without an active provider the page says the code could not be sent; the address is changed", async () => {
    const id = await addHuman(platform, "lena", PASSWORD);
    const { browser, page } = await signedIn("lena");
    assert.equal(
      (await rest("POST", `/resources/v3alpha/smtp_providers/${smtpProvider}/_deactivate`)).status,
      200,
    );
    try {
      let shown = await browser.submit(page, "/ui/login/account/email", {
        emailPassword: PASSWORD,
        email: "lena@new.example",
      });
      assert.equal(notice(shown.text), "Your e-mail address was changed.");
      assert.match(alertOf(shown.text) ?? "", /could not be sent: sending e-mail is not set up/);
      shown = await browser.submit(shown, "/ui/login/account/email/code", {});
      assert.match(alertOf(shown.text) ?? "", /could not be sent: sending e-mail is not set up/);
      assert.equal((await human(id)).email.address, "lena@new.example");
    } finally {
      assert.equal(
        (await rest("POST", `/resources/v3alpha/smtp_providers/${smtpProvider}/_activate`)).status,
        200,
      );
    }
  });
});
