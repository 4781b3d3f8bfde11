/**
 * The login policy in the login UI over HTTP: the second-factor step and the prompt to register one,
 * skipping it, passwords and identity providers ruled out, acr_values and prompt=none.
 * Factors are set up by appending their events (the factor pages live elsewhere).
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { addOrg, eventCount } from "../../test/helpers.ts";
import {
  type Answer,
  addHuman,
  alertOf,
  createAuthRequest,
  formOf,
  HttpBrowser,
  type LoginTestPlatform,
  startLoginPlatform,
} from "../../test/login.ts";
import { ACR_MFA } from "../domain/session/amr.ts";
import { SESSION, SessionEvent } from "../domain/session/events.ts";
import { changeSettings } from "../domain/settings/commands.ts";
import { LOGIN } from "../domain/settings/login.ts";
import { USER, UserEvent } from "../domain/user/events.ts";

const PASSWORD = "Secret-Passw0rd!";

describe("login policy in the login UI", () => {
  let platform: LoginTestPlatform;
  let instanceId: string;
  let defaultOrgId: string;

  before(async () => {
    platform = await startLoginPlatform();
    instanceId = platform.bootstrapResult!.instanceId;
    defaultOrgId = platform.bootstrapResult!.orgId;
  });
  after(() => platform.stop());

  const setPolicy = (
    owner: { type: 2 | 3; id: string },
    set: Record<string, unknown>,
    reset: string[] = [],
  ) =>
    changeSettings(platform.eventStore, { category: LOGIN, owner, instanceId, creator: "test", set, reset });
  const instance = () => ({ type: 2 as const, id: instanceId });

  const userEvents = (userId: string, orgId: string, types: string[]) =>
    platform.eventStore.push({ instanceId, creator: "test" }, async () =>
      types.map((type) => ({
        aggregateType: USER,
        aggregateId: userId,
        resourceOwner: orgId,
        type,
        payload:
          type === UserEvent.totpAdded
            ? { secret_sealed: "sealed" }
            : type === UserEvent.recoveryCodesGenerated
              ? { hashes: ["h1", "h2"] }
              : null,
      })),
    );

  /** Login name and password; answers the 303 of the password post (not followed). */
  async function password(browser: HttpBrowser, authRequestId: string, loginName: string): Promise<Answer> {
    const page = await browser.follow(`/ui/login?authRequest=${authRequestId}`);
    assert.equal(page.status, 200, page.text);
    const passwordPage = await browser.submit(page, "/ui/login/loginname", { loginName });
    assert.equal(passwordPage.status, 200, passwordPage.text);
    const posted = await browser.post("/ui/login/password", {
      ...formOf(passwordPage.text, "/ui/login/password"),
      password: PASSWORD,
    });
    assert.equal(posted.status, 303, posted.text);
    return posted;
  }

  /**
   * Follows redirects within the login UI, answering the path of each step on the way: none when `start`
   * is the client's redirect already (a post that completed the sign-in).
   */
  async function walk(browser: HttpBrowser, start: string): Promise<{ paths: string[]; last: Answer }> {
    const paths: string[] = [];
    if (!start.startsWith("/"))
      return { paths, last: { status: 303, headers: new Headers(), text: "", location: start } };
    let last = await browser.get(start);
    paths.push(start.split("?")[0]);
    while (last.location?.startsWith("/")) {
      paths.push(last.location.split("?")[0]);
      last = await browser.get(last.location);
    }
    return { paths, last };
  }

  const sessionOf = async (userId: string) =>
    (
      await platform.db.query<{ id: string; org_id: string }>(
        "SELECT id, org_id FROM sessions WHERE instance_id = $1 AND user_id = $2",
        [instanceId, userId],
      )
    )[0];

  it("a user with one second factor goes from the password straight to its page, and completes once it passed", async () => {
    const userId = await addHuman(platform, "olga", PASSWORD);
    await userEvents(userId, defaultOrgId, [UserEvent.otpEmailAdded]);
    const browser = new HttpBrowser(platform.url);
    const request = await createAuthRequest(platform);
    const posted = await password(browser, request.id, "olga");
    const { paths } = await walk(browser, posted.location!);
    assert.deepEqual(paths, ["/ui/login/mfa/otp-email"]);
    assert.equal(platform.completer.completionOf(request.id), undefined, "not completed without the factor");

    // the code passed (the otp page does this through the sessions domain)
    const session = await sessionOf(userId);
    await platform.eventStore.push({ instanceId, creator: "test" }, async () => [
      {
        aggregateType: SESSION,
        aggregateId: session.id,
        resourceOwner: session.org_id,
        type: SessionEvent.otpEmailChecked,
        payload: null,
      },
    ]);
    const done = await browser.get(`/ui/login/complete?authRequest=${request.id}`);
    assert.equal(done.status, 302);
    const completion = platform.completer.completionOf(request.id);
    assert.ok(completion);
    assert.deepEqual(completion.session.amr, ["pwd", "otp", "mfa"]);

    // prompt=login asks for every factor again: the password, then the code
    const again = await createAuthRequest(platform, { prompt: ["login"] });
    const reauth = await browser.follow(`/ui/login?authRequest=${again.id}`);
    assert.match(reauth.text, /action="\/ui\/login\/password"/);
    const posted2 = await browser.post("/ui/login/password", {
      ...formOf(reauth.text, "/ui/login/password"),
      password: PASSWORD,
    });
    const walked = await walk(browser, posted2.location!);
    assert.deepEqual(walked.paths, ["/ui/login/mfa/otp-email"]);
    assert.equal(platform.completer.completionOf(again.id), undefined);
  });

  it("a user with several factors chooses among the allowed ones; recovery codes are offered", async () => {
    const userId = await addHuman(platform, "paul", PASSWORD);
    await userEvents(userId, defaultOrgId, [
      UserEvent.totpAdded,
      UserEvent.totpVerified,
      UserEvent.otpSmsAdded,
      UserEvent.recoveryCodesGenerated,
    ]);
    const browser = new HttpBrowser(platform.url);
    const request = await createAuthRequest(platform);
    const posted = await password(browser, request.id, "paul");
    const { paths, last } = await walk(browser, posted.location!);
    assert.deepEqual(paths, ["/ui/login/mfa"]);
    assert.equal(last.status, 200, last.text);
    const links = [...last.text.matchAll(/href="(\/ui\/login\/mfa\/[^"?]+)\?/g)].map((m) => m[1]);
    assert.deepEqual(links, ["/ui/login/mfa/totp", "/ui/login/mfa/otp-sms", "/ui/login/mfa/recovery"]);

    // the policy no longer allows SMS codes: only TOTP is left, but the recovery codes keep the page
    await setPolicy(instance(), { second_factors: ["SECOND_FACTOR_TYPE_TOTP"] });
    try {
      const page = await browser.get(`/ui/login/mfa?authRequest=${request.id}`);
      const left = [...page.text.matchAll(/href="(\/ui\/login\/mfa\/[^"?]+)\?/g)].map((m) => m[1]);
      assert.deepEqual(left, ["/ui/login/mfa/totp", "/ui/login/mfa/recovery"]);
    } finally {
      await setPolicy(instance(), {}, ["second_factors"]);
    }
    const complete = await browser.get(`/ui/login/complete?authRequest=${request.id}`);
    assert.equal(complete.location, `/ui/login/mfa?authRequest=${request.id}`);
  });

  it("forced MFA: a user without factors must register one, without Skip", async () => {
    const orgId = await addOrg(platform, "Strict");
    const owner = { type: 3 as const, id: orgId };
    await setPolicy(owner, { force_mfa: true });
    const userId = await addHuman(platform, "quinn", PASSWORD, { orgId });
    const browser = new HttpBrowser(platform.url);
    const request = await createAuthRequest(platform);
    const posted = await password(browser, request.id, "quinn");
    const { paths, last } = await walk(browser, posted.location!);
    assert.deepEqual(paths, ["/ui/login/mfa/setup"]);
    assert.equal(last.status, 200, last.text);
    const links = [...last.text.matchAll(/href="(\/ui\/login\/mfa\/setup\/[^"?]+)\?/g)].map((m) => m[1]);
    assert.deepEqual(links, [
      "/ui/login/mfa/setup/totp",
      "/ui/login/mfa/setup/u2f",
      "/ui/login/mfa/setup/otp-email",
      "/ui/login/mfa/setup/otp-sms",
    ]);
    assert.match(last.text, /Your organization requires a second factor/);
    assert.doesNotMatch(last.text, /mfa\/setup\/skip/);
    // a skip posted anyway changes nothing
    const csrf = /name="csrf" value="([^"]+)"/.exec(
      (await browser.get(`/ui/login/password?authRequest=${request.id}`)).text,
    )?.[1];
    const before = await eventCount(platform);
    const skip = await browser.post("/ui/login/mfa/setup/skip", {
      csrf: csrf ?? "",
      authRequest: request.id,
    });
    assert.equal(skip.status, 303);
    assert.equal(skip.location, `/ui/login/mfa/setup?authRequest=${request.id}`);
    assert.equal(await eventCount(platform), before);
    assert.equal(platform.completer.completionOf(request.id), undefined);
    // the organization's policy, not the instance's
    assert.equal((await platform.login.loginPolicy(instanceId, undefined)).force_mfa, false);
    assert.ok(userId);
  });

  it("not forced: the prompt with Skip when a skip lifetime is set; skipped, it stays away that long", async () => {
    await setPolicy(instance(), { mfa_init_skip_lifetime: 3600 });
    try {
      const userId = await addHuman(platform, "rita", PASSWORD);
      const browser = new HttpBrowser(platform.url);
      const request = await createAuthRequest(platform);
      const posted = await password(browser, request.id, "rita");
      const { paths, last } = await walk(browser, posted.location!);
      assert.deepEqual(paths, ["/ui/login/mfa/setup"]);
      assert.match(last.text, /Skip for now/);
      const skipped = await browser.post(
        "/ui/login/mfa/setup/skip",
        formOf(last.text, "/ui/login/mfa/setup/skip"),
      );
      assert.equal(skipped.status, 303);
      assert.equal(skipped.location, `/ui/login/complete?authRequest=${request.id}`);
      const done = await browser.get(skipped.location!);
      assert.equal(done.status, 302);
      assert.ok(platform.completer.completionOf(request.id));
      const skips = await platform.db.query(
        "SELECT 1 FROM events WHERE aggregate_id = $1 AND event_type = $2",
        [userId, UserEvent.mfaInitSkipped],
      );
      assert.equal(skips.length, 1);

      // within the skip lifetime: signed in again with the password, no prompt
      const again = await createAuthRequest(platform, { prompt: ["login"] });
      const reauth = await browser.follow(`/ui/login?authRequest=${again.id}`);
      assert.match(reauth.text, /action="\/ui\/login\/password"/);
      const second = await browser.post("/ui/login/password", {
        ...formOf(reauth.text, "/ui/login/password"),
        password: PASSWORD,
      });
      const walked = await walk(browser, second.location!);
      assert.deepEqual(walked.paths, [], "completed by the password's post");
      assert.ok(platform.completer.completionOf(again.id));
    } finally {
      await setPolicy(instance(), {}, ["mfa_init_skip_lifetime"]);
    }
  });

  it("acr_values=urn:platform:acr:mfa asks for a second factor like force_mfa", async () => {
    await addHuman(platform, "sam", PASSWORD);
    const browser = new HttpBrowser(platform.url);
    const plain = await createAuthRequest(platform);
    const first = await password(browser, plain.id, "sam");
    assert.deepEqual((await walk(browser, first.location!)).paths, [], "completed by the password's post");
    assert.ok(platform.completer.completionOf(plain.id));

    // the same browser, single sign-on: the request with acr_values needs the registration, no Skip
    const strict = await createAuthRequest(platform, { acrValues: [ACR_MFA] });
    const { paths, last } = await walk(browser, `/ui/login?authRequest=${strict.id}`);
    assert.deepEqual(paths, ["/ui/login", "/ui/login/mfa/setup"]);
    assert.doesNotMatch(last.text, /mfa\/setup\/skip/);
    assert.equal(platform.completer.completionOf(strict.id), undefined);

    // prompt=none cannot register a factor: interaction_required
    const none = await createAuthRequest(platform, { acrValues: [ACR_MFA], prompt: ["none"] });
    const failed = await browser.get(`/ui/login?authRequest=${none.id}`);
    assert.equal(failed.status, 302);
    assert.equal(new URL(failed.location!).searchParams.get("error"), "interaction_required");
  });

  it("allow_username_password=false hides the login-name form and refuses the password", async () => {
    await addHuman(platform, "tess", PASSWORD);
    const browser = new HttpBrowser(platform.url);
    const request = await createAuthRequest(platform);
    const page = await browser.follow(`/ui/login?authRequest=${request.id}`);
    const passwordPage = await browser.submit(page, "/ui/login/loginname", { loginName: "tess" });
    await setPolicy(instance(), { allow_username_password: false });
    try {
      const hidden = await browser.get(`/ui/login/loginname?authRequest=${request.id}`);
      assert.equal(hidden.status, 200);
      assert.doesNotMatch(hidden.text, /action="\/ui\/login\/loginname"/);
      const posted = await browser.post("/ui/login/password", {
        ...formOf(passwordPage.text, "/ui/login/password"),
        password: PASSWORD,
      });
      assert.equal(posted.status, 303);
      const refused = await browser.follow(posted.location!);
      assert.equal(
        alertOf(refused.text),
        "Signing in with a password is not allowed here. Use a passkey or another sign-in option.",
      );
      assert.equal(platform.completer.completionOf(request.id), undefined);
    } finally {
      await setPolicy(instance(), {}, ["allow_username_password"]);
    }
    const shown = await browser.get(`/ui/login/loginname?authRequest=${request.id}`);
    assert.match(shown.text, /action="\/ui\/login\/loginname"/);
  });

  it("allow_external_idp=false refuses to start a provider", async () => {
    const browser = new HttpBrowser(platform.url);
    const request = await createAuthRequest(platform);
    await browser.follow(`/ui/login?authRequest=${request.id}`);
    const start = `/ui/login/idp/start?idp=123&authRequest=${request.id}`;
    assert.equal((await browser.get(start)).status, 404, "allowed: an unknown provider");
    await setPolicy(instance(), { allow_external_idp: false });
    try {
      const refused = await browser.get(start);
      assert.equal(refused.status, 403);
      assert.match(refused.text, /Signing in with other providers is not allowed here/);
    } finally {
      await setPolicy(instance(), {}, ["allow_external_idp"]);
    }
  });
});
