/**
 * The login UI's password step over HTTP: one answer for every failed sign-in (what an anonymous visitor
 * may not tell apart), lockouts an anonymous visitor cannot make permanent, and the password change a
 * sign-in asks for when the password was set with `change_required` (the Chromium walk of the same is in
 * test/login-ui.test.ts).
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { addMachineUser, eventCount } from "../../test/helpers.ts";
import {
  type Answer,
  addHuman,
  alertOf,
  createAuthRequest,
  HttpBrowser,
  type LoginTestPlatform,
  startLoginPlatform,
} from "../../test/login.ts";
import { requirePasswordChange } from "../../test/login-browser.ts";
import { changeSettings } from "../domain/settings/commands.ts";
import { LOGIN } from "../domain/settings/login.ts";
import { foldUser, userEvent } from "../domain/user/commands.ts";
import { USER, UserEvent } from "../domain/user/events.ts";
import { TestCompleter } from "./testing.ts";

const PASSWORD = "Secret-Passw0rd!";
const WRONG = "Wrong-Passw0rd!";

async function passwordPage(platform: LoginTestPlatform, browser: HttpBrowser, loginName: string) {
  const authRequest = await createAuthRequest(platform);
  const loginPage = await browser.follow(`/ui/login?authRequest=${authRequest.id}`);
  const page = await browser.submit(loginPage, "/ui/login/loginname", { loginName });
  assert.equal(page.status, 200, page.text);
  return { authRequest, page };
}

/** The password page's answer to `password` for `loginName`, with what differs by request taken out. */
async function answerTo(platform: LoginTestPlatform, loginName: string, password: string) {
  const browser = new HttpBrowser(platform.url);
  const { authRequest, page } = await passwordPage(platform, browser, loginName);
  const answer = await browser.submit(page, "/ui/login/password", { password });
  assert.equal(platform.completer.completionOf(authRequest.id), undefined, `${loginName} did not sign in`);
  const html = answer.text
    .replaceAll(authRequest.id, "<request>")
    .replace(/name="csrf" value="[^"]*"/, 'name="csrf"')
    .replaceAll(`value="${loginName}"`, 'value="<name>"')
    .replaceAll(`<span class="account-login">${loginName}</span>`, "<name>")
    .replace(/<span class="avatar" aria-hidden="true">[^<]*<\/span>/, "<avatar>");
  return { status: answer.status, alert: alertOf(answer.text), html };
}

async function userChange(platform: LoginTestPlatform, userId: string, type: string) {
  await platform.eventStore.push(
    { instanceId: platform.bootstrapResult!.instanceId, creator: "test" },
    async (tx) => [userEvent(foldUser(await tx.load(USER, userId))!, type)],
  );
}

describe("login UI: the password step", () => {
  let platform: LoginTestPlatform;

  before(async () => {
    platform = await startLoginPlatform({ PLATFORM_MAX_PASSWORD_ATTEMPTS: "3" });
    // an unknown name reaches the password step only with ignore_unknown_usernames (else the login-name
    // page says so: src/login/login.test.ts)
    const instanceId = platform.bootstrapResult!.instanceId;
    await changeSettings(platform.eventStore, {
      category: LOGIN,
      owner: { type: 2 as const, id: instanceId },
      instanceId,
      creator: "test",
      set: { ignore_unknown_usernames: true },
      reset: [],
    });
  });
  after(() => platform.stop());

  it("answers a wrong password, an unknown name, a locked, locked-out or deactivated account and a machine alike", async () => {
    await addHuman(platform, "wrongpw", PASSWORD);
    await addHuman(platform, "lockedout", PASSWORD);
    const lockedId = await addHuman(platform, "locked", PASSWORD);
    const inactiveId = await addHuman(platform, "inactive", PASSWORD);
    await addMachineUser(platform, { username: "robot" });
    await userChange(platform, lockedId, UserEvent.locked);
    await userChange(platform, inactiveId, UserEvent.deactivated);
    // three wrong passwords start a temporary lockout (60 s by default)
    for (let i = 0; i < 3; i++) await answerTo(platform, "lockedout", WRONG);

    const reference = await answerTo(platform, "wrongpw", WRONG);
    assert.equal(reference.status, 200);
    assert.equal(reference.alert, "The login name or password is wrong.");
    // the right password of the locked, locked-out and deactivated accounts changes nothing
    for (const [name, password] of [
      ["no-such-user", WRONG],
      ["lockedout", PASSWORD],
      ["locked", PASSWORD],
      ["inactive", PASSWORD],
      ["robot", WRONG],
    ]) {
      const answer = await answerTo(platform, name, password);
      assert.deepEqual(answer, reference, `${name}: the same page`);
    }
  });

  it("an anonymous visitor's wrong passwords never lock the account for good", async () => {
    const userId = await addHuman(platform, "victim", PASSWORD);
    for (let i = 0; i < 6; i++) await answerTo(platform, "victim", WRONG);
    const [row] = await platform.db.query<{ state: number; password_locked_until: Date | null }>(
      "SELECT state, password_locked_until FROM users WHERE id = $1",
      [userId],
    );
    assert.equal(Number(row.state), 1, "still ACTIVE");
    assert.ok(row.password_locked_until, "a temporary lockout");
    // the lockout ends by itself (here ended early, as waiting for it would): the owner signs in
    await platform.db.query("UPDATE users SET password_locked_until = now() WHERE id = $1", [userId]);
    const browser = new HttpBrowser(platform.url);
    const { authRequest, page } = await passwordPage(platform, browser, "victim");
    const answer = await browser.submit(page, "/ui/login/password", { password: PASSWORD });
    assert.equal(answer.status, 303, answer.text);
    assert.equal(platform.completer.completionOf(authRequest.id)?.session.userId, userId);
  });

  it("asks for a new password after the password check when it must be changed, then completes", async () => {
    const userId = await addHuman(platform, "newbie", PASSWORD);
    await requirePasswordChange(platform, userId, PASSWORD);
    const browser = new HttpBrowser(platform.url);
    const { authRequest, page } = await passwordPage(platform, browser, "newbie");
    let change: Answer = await browser.submit(page, "/ui/login/password", { password: PASSWORD });
    assert.equal(change.status, 200, change.text);
    assert.match(change.text, /<h1[^>]*>Change your password<\/h1>/);
    assert.equal(platform.completer.completionOf(authRequest.id), undefined, "not signed in yet");
    // the completion cannot be reached around it
    const around = await browser.get(`/ui/login/complete?authRequest=${authRequest.id}`);
    assert.equal(around.location, `/ui/login/password-change?authRequest=${authRequest.id}`);

    // the policy, the confirmation and a password other than the current one are required
    const before = await eventCount(platform);
    for (const [password, passwordConfirm, message] of [
      ["short", "short", "The password does not meet the requirements."],
      ["Other-Passw0rd!", "Other-Passw0rd?", "The passwords do not match."],
      [PASSWORD, PASSWORD, "Choose a password other than the current one."],
    ]) {
      change = await browser.submit(change, "/ui/login/password-change", { password, passwordConfirm });
      assert.equal(change.status, 200);
      assert.match(change.text, new RegExp(`class="field-error"[^>]*>${message.replace(/[.?]/g, "\\$&")}<`));
    }
    assert.equal(await eventCount(platform), before, "nothing stored");

    const done = await browser.submit(change, "/ui/login/password-change", {
      password: "Other-Passw0rd!",
      passwordConfirm: "Other-Passw0rd!",
    });
    assert.equal(done.status, 302, done.text);
    assert.equal(new URL(done.location!).searchParams.get("code"), TestCompleter.codeFor(authRequest.id));
    const [row] = await platform.db.query<{ password_change_required: boolean }>(
      "SELECT password_change_required FROM users WHERE id = $1",
      [userId],
    );
    assert.equal(row.password_change_required, false);
  });

  it("a browser signed in before the change was required gets the password page first, not single sign-on", async () => {
    const userId = await addHuman(platform, "sso", PASSWORD);
    const browser = new HttpBrowser(platform.url);
    const first = await passwordPage(platform, browser, "sso");
    assert.equal(
      (await browser.submit(first.page, "/ui/login/password", { password: PASSWORD })).status,
      303,
    );
    await requirePasswordChange(platform, userId, PASSWORD);

    // prompt=none cannot complete it
    const silent = await createAuthRequest(platform, { prompt: ["none"] });
    const none = await browser.get(`/ui/login?authRequest=${silent.id}`);
    assert.equal(new URL(none.location!).searchParams.get("error"), "login_required");

    const next = await createAuthRequest(platform);
    const entry = await browser.get(`/ui/login?authRequest=${next.id}`);
    assert.equal(entry.location, `/ui/login/password?authRequest=${next.id}`);
    // the change page itself sends a session not checked during this request to the password
    const direct = await browser.get(`/ui/login/password-change?authRequest=${next.id}`);
    assert.equal(direct.location, `/ui/login/password?authRequest=${next.id}`);
    const page = await browser.follow(entry.location!);
    const change = await browser.submit(page, "/ui/login/password", { password: PASSWORD });
    assert.match(change.text, /Change your password/);
  });
});
