/**
 * The login UI over HTTP (the browser flows run in Chromium in test/login-ui.test.ts): completion through
 * the test completer, errors, CSRF, post/redirect/get, headers, cookies, languages, GET /, auth request
 * states, prompt=none, registration, rate limits and form_post.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { addMachineUser, eventCount } from "../../test/helpers.ts";
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
import { changeSettings } from "../domain/settings/commands.ts";
import { LANGUAGE } from "../domain/settings/languages.ts";
import { LOGIN } from "../domain/settings/login.ts";
import { TestCompleter } from "./testing.ts";

const PASSWORD = "Secret-Passw0rd!";
const WRONG = "Wrong-Passw0rd!";

/** Signs in through login name and password; answers the final answer (a redirect to the client). */
async function signIn(browser: HttpBrowser, authRequestId: string, loginName: string, password = PASSWORD) {
  const loginPage = await browser.follow(`/ui/login?authRequest=${authRequestId}`);
  assert.equal(loginPage.status, 200, loginPage.text);
  const passwordPage = await browser.submit(loginPage, "/ui/login/loginname", { loginName });
  assert.equal(passwordPage.status, 200, passwordPage.text);
  return browser.submit(passwordPage, "/ui/login/password", { password });
}

function assertCompleted(
  platform: LoginTestPlatform,
  answer: { status: number; location?: string },
  id: string,
) {
  // 303 from the post that completed it (the password), 302 from a page (single sign-on)
  assert.ok([302, 303].includes(answer.status), `redirected to the client: ${answer.status}`);
  const url = new URL(answer.location ?? "");
  assert.equal(`${url.origin}${url.pathname}`, REDIRECT_URI);
  assert.equal(url.searchParams.get("code"), TestCompleter.codeFor(id));
  const completion = platform.completer.completionOf(id);
  assert.ok(completion, "the completer was called");
  assert.equal(url.searchParams.get("state"), completion.authRequest.state);
  return completion;
}

describe("login UI over HTTP", () => {
  let platform: LoginTestPlatform;
  let aliceId: string;
  let instanceId: string;

  before(async () => {
    platform = await startLoginPlatform({ PLATFORM_MAX_PASSWORD_ATTEMPTS: "3" });
    instanceId = platform.bootstrapResult!.instanceId;
    aliceId = await addHuman(platform, "alice", PASSWORD);
    await addHuman(platform, "bob", PASSWORD);
  });
  after(() => platform.stop());

  it("signs in with login name and password, then reuses the session without a page", async () => {
    const browser = new HttpBrowser(platform.url);
    const first = await createAuthRequest(platform);
    const answer = await signIn(browser, first.id, "alice");
    const completion = assertCompleted(platform, answer, first.id);
    assert.equal(completion.session.userId, aliceId);
    assert.equal(completion.session.loginName, "alice@platform.localhost");
    assert.deepEqual(completion.session.amr, ["pwd"]);
    assert.ok(completion.session.authTime instanceof Date);
    assert.equal(completion.authRequest.sessionId, completion.session.id);
    assert.ok(completion.authRequest.doneAt, "handed over as done");

    // SSO: the next request of this browser goes straight back, with the same session
    const second = await createAuthRequest(platform);
    const direct = await browser.get(`/ui/login?authRequest=${second.id}`);
    assert.equal(platform.completer.completionOf(second.id)?.session.id, completion.session.id);
    assertCompleted(platform, direct, second.id);

    // the protocol side sees the same session for the browser
    const sessions = await platform.login.sessionsOfUserAgent({
      cookies: Object.fromEntries(browser.cookies),
      scope: { instanceId },
    } as never);
    assert.deepEqual(
      sessions.map((s) => s.id),
      [completion.session.id],
    );
  });

  it("prefills the login name with login_hint, and a machine user cannot sign in", async () => {
    const browser = new HttpBrowser(platform.url);
    const hinted = await createAuthRequest(platform, { loginHint: "alice@platform.localhost" });
    const page = await browser.follow(`/ui/login?authRequest=${hinted.id}`);
    assert.match(
      page.text,
      /name="loginName" type="text" autocomplete="username"[^>]* value="alice@platform\.localhost"/,
    );
    // nobody in the instance has a passkey: the link, but no autofill offer (nor its stored challenge)
    assert.match(page.text, /href="\/ui\/login\/passkey\?authRequest=/);
    assert.doesNotMatch(page.text, /data-webauthn="conditional"/);

    await addMachineUser(platform, { username: "robot" });
    const robot = await signIn(browser, (await createAuthRequest(platform)).id, "robot", WRONG);
    assert.equal(alertOf(robot.text), "The login name or password is wrong.");
  });

  /** Sets (or resets: undefined) the instance's login setting `ignore_unknown_usernames`. */
  const ignoreUnknownUsernames = (value: boolean | undefined) =>
    changeSettings(platform.eventStore, {
      category: LOGIN,
      owner: { type: 2 as const, id: instanceId },
      instanceId,
      creator: "test",
      set: value === undefined ? {} : { ignore_unknown_usernames: value },
      reset: value === undefined ? ["ignore_unknown_usernames"] : [],
    });

  it("says an unknown login name is unknown with ignore_unknown_usernames off (ZITADEL's default)", async () => {
    await ignoreUnknownUsernames(false);
    try {
      await unknownNameIsTold();
    } finally {
      await ignoreUnknownUsernames(undefined);
    }
  });

  const unknownNameIsTold = async () => {
    const browser = new HttpBrowser(platform.url);
    const authRequest = await createAuthRequest(platform);
    const loginPage = await browser.follow(`/ui/login?authRequest=${authRequest.id}`);
    const posted = await browser.post("/ui/login/loginname", {
      ...formOf(loginPage.text, "/ui/login/loginname"),
      loginName: "nobody-here",
    });
    assert.equal(posted.status, 303);
    assert.equal(posted.location, `/ui/login/loginname?authRequest=${authRequest.id}`);
    const page = await browser.follow(posted.location!);
    assert.equal(alertOf(page.text), "No account was found for this login name.");
    assert.match(page.text, /value="nobody-here"/);
    // the UI's own sign-in (no auth request) too; a known name goes on to the password
    const own = await browser.follow("/ui/login/loginname");
    const again = await browser.submit(own, "/ui/login/loginname", { loginName: "nobody-here" });
    assert.equal(alertOf(again.text), "No account was found for this login name.");
    const known = await browser.submit(again, "/ui/login/loginname", { loginName: "alice" });
    assert.match(known.text, /<h1 id="page-title">Enter your password<\/h1>/);
  };

  it("gives a wrong password, an unknown login name (by default: ignore_unknown_usernames on) and a locked-out account the same message", async () => {
    await addHuman(platform, "carol", PASSWORD);
    const browser = new HttpBrowser(platform.url);
    const unknown = await signIn(browser, (await createAuthRequest(platform)).id, "nobody-here", WRONG);
    const wrong = await signIn(browser, (await createAuthRequest(platform)).id, "carol", WRONG);
    assert.equal(unknown.status, 200);
    assert.equal(wrong.status, 200);
    assert.equal(alertOf(unknown.text), "The login name or password is wrong.");
    assert.equal(alertOf(wrong.text), alertOf(unknown.text));
    assert.match(wrong.text, /aria-invalid="true" aria-describedby="form-error"/);

    // the third failure (PLATFORM_MAX_PASSWORD_ATTEMPTS=3) locks the password checks out for a while:
    // the page says nothing else, even to the right password (src/login/password.test.ts has every case)
    const authRequest = await createAuthRequest(platform);
    let page = await signIn(browser, authRequest.id, "carol", WRONG);
    assert.equal(alertOf(page.text), "The login name or password is wrong.");
    page = await browser.submit(page, "/ui/login/password", { password: WRONG });
    assert.equal(alertOf(page.text), "The login name or password is wrong.");
    page = await browser.submit(page, "/ui/login/password", { password: PASSWORD });
    assert.equal(alertOf(page.text), "The login name or password is wrong.");
    assert.equal(platform.completer.completionOf(authRequest.id), undefined);
  });

  it("refuses form posts without this browser's CSRF token, storing nothing", async () => {
    const browser = new HttpBrowser(platform.url);
    const other = new HttpBrowser(platform.url);
    const authRequest = await createAuthRequest(platform);
    const loginPage = await browser.follow(`/ui/login?authRequest=${authRequest.id}`);
    const otherPage = await other.follow("/ui/login/loginname");
    const fields = formOf(loginPage.text, "/ui/login/loginname");
    const before = await eventCount(platform);
    const attempts: Record<string, string>[] = [
      { ...fields, csrf: "" },
      { ...fields, csrf: formOf(otherPage.text, "/ui/login/loginname").csrf },
      { authRequest: authRequest.id },
    ];
    for (const form of attempts) {
      const answer = await browser.post("/ui/login/loginname", { ...form, loginName: "alice" });
      assert.equal(answer.status, 403);
      assert.match(alertOf(answer.text) ?? "", /form has expired or was sent from another site/);
    }
    const noCookie = new HttpBrowser(platform.url);
    const answer = await noCookie.post("/ui/login/password", { ...fields, password: PASSWORD });
    assert.equal(answer.status, 403);
    // a body the UI cannot read: a page, not JSON
    const unreadable = await noCookie.post("/ui/login/password", {}, { "content-type": "application/xml" });
    assert.equal(unreadable.status, 415);
    assert.match(unreadable.headers.get("content-type") ?? "", /^text\/html/);
    assert.match(alertOf(unreadable.text) ?? "", /could not be read/);
    const stored = await platform.login.authRequests.find(instanceId, authRequest.id);
    assert.equal(stored?.loginName, undefined, "the login name was not stored");
    assert.equal(await eventCount(platform), before);
  });

  it("answers every POST with 303 and sends the security headers with every page", async () => {
    const browser = new HttpBrowser(platform.url);
    const authRequest = await createAuthRequest(platform, { redirectUri: "com.example.app:/callback" });
    const pages = [await browser.follow(`/ui/login?authRequest=${authRequest.id}`)];
    const posted = await browser.post("/ui/login/loginname", {
      ...formOf(pages[0].text, "/ui/login/loginname"),
      loginName: "alice",
    });
    assert.equal(posted.status, 303);
    assert.doesNotMatch(posted.location ?? "", /alice|csrf/, "no form values in the URL");
    pages.push(await browser.follow(posted.location!));
    pages.push(await browser.follow("/ui/login/register"));
    pages.push(await browser.follow("/ui/login/signedout"));
    pages.push(await browser.follow("/ui/login/nowhere"));
    pages.push(await browser.follow("/ui/login?authRequest=123"));
    for (const page of pages) {
      assert.match(page.headers.get("content-type") ?? "", /^text\/html; charset=utf-8/);
      assert.equal(page.headers.get("x-frame-options"), "DENY");
      assert.equal(page.headers.get("referrer-policy"), "no-referrer");
      assert.equal(page.headers.get("cache-control"), "no-store");
      const csp = page.headers.get("content-security-policy") ?? "";
      assert.match(csp, /frame-ancestors 'none'/);
      assert.match(csp, /default-src 'none'/);
      assert.doesNotMatch(csp, /unsafe-inline/);
      // no inline script: at most the served WebAuthn script (the login-name page's passkey autofill)
      const scripts = [...page.text.matchAll(/<script[^>]*>/g)].map((m) => m[0]);
      for (const script of scripts)
        assert.match(script, /^<script src="\/ui\/assets\/webauthn\.[0-9a-f]{16}\.js" defer>$/);
      assert.equal(/script-src/.test(csp), scripts.length > 0, "a script only where the CSP allows it");
      if (scripts.length) assert.match(csp, /script-src 'self'(;|$)/);
    }
    // the client's custom scheme may receive the redirect after a form post
    assert.match(
      pages[1].headers.get("content-security-policy") ?? "",
      /form-action 'self' com\.example\.app:;/,
    );
    assert.equal(pages[3].status, 200);
    assert.equal(pages[4].status, 404);
    assert.equal(pages[5].status, 404);

    const css = /href="(\/ui\/assets\/login\.[0-9a-f]+\.css)"/.exec(pages[0].text)?.[1];
    const stylesheet = await browser.get(css!);
    assert.equal(stylesheet.status, 200);
    assert.match(stylesheet.headers.get("content-type") ?? "", /^text\/css/);
    assert.equal(stylesheet.headers.get("cache-control"), "public, max-age=31536000, immutable");
    assert.equal((await browser.get("/ui/assets/login.0000000000000000.css")).status, 404);
  });

  it("sets the user-agent cookie HttpOnly, SameSite=Lax, Path=/, and Secure on https", async () => {
    const browser = new HttpBrowser(platform.url);
    await browser.follow("/ui/login/loginname");
    const [cookie] = browser.setCookieHeaders;
    assert.match(cookie, /^platform_ua=[A-Za-z0-9_-]{43}; /);
    assert.match(cookie, /; HttpOnly/);
    assert.match(cookie, /; SameSite=Lax/);
    assert.match(cookie, /; Path=\//);
    assert.doesNotMatch(cookie, /Secure/);

    const secure = await startLoginPlatform({ PLATFORM_EXTERNAL_SECURE: "true" });
    try {
      const https = new HttpBrowser(secure.url);
      await https.follow("/ui/login/loginname");
      assert.match(https.setCookieHeaders[0], /; Secure/);
    } finally {
      await secure.stop();
    }
  });

  it("chooses the language from ui_locales, Accept-Language and the language settings", async () => {
    const german = await createAuthRequest(platform, { uiLocales: ["de-CH", "en"] });
    let page = await new HttpBrowser(platform.url).follow(`/ui/login?authRequest=${german.id}`);
    assert.match(page.text, /<html lang="de">/);
    assert.match(page.text, /<h1 id="page-title">Anmelden<\/h1>/);
    assert.match(page.text, />Weiter</);

    page = await new HttpBrowser(platform.url, { "accept-language": "fr-FR, en;q=0.5" }).follow(
      "/ui/login/loginname",
    );
    assert.match(page.text, /<html lang="fr">/);
    assert.match(page.text, /Se connecter/);

    // restricted to English and Italian, Italian by default: German asked for, Italian shown
    const instance = { type: 2 as const, id: instanceId };
    const change = { category: LANGUAGE, owner: instance, instanceId, creator: "test", reset: [] };
    await changeSettings(platform.eventStore, {
      ...change,
      set: { restricted_languages: ["en", "it"], default_language: "it" },
    });
    try {
      page = await new HttpBrowser(platform.url, { "accept-language": "de" }).follow("/ui/login/loginname");
      assert.match(page.text, /<html lang="it">/);
      assert.match(page.text, /<h1 id="page-title">Accedi<\/h1>/);
      page = await new HttpBrowser(platform.url, { "accept-language": "de, en;q=0.9" }).follow(
        "/ui/login/loginname",
      );
      assert.match(page.text, /<html lang="en">/);
    } finally {
      await changeSettings(platform.eventStore, {
        ...change,
        set: {},
        reset: ["restricted_languages", "default_language"],
      });
    }
  });

  it("GET / answers API clients with JSON, browsers with the account page or the login, and signs out", async () => {
    for (const headers of [{}, { accept: "application/json" }, { accept: "*/*" }]) {
      const response = await fetch(`${platform.url}/`, { headers });
      assert.equal(response.status, 200);
      assert.match(response.headers.get("content-type") ?? "", /^application\/json/);
      const body = (await response.json()) as Record<string, string>;
      assert.equal(body.discovery, "/.well-known/openid-configuration");
      assert.equal(body.docs, "/docs");
    }
    const browser = new HttpBrowser(platform.url);
    const anonymous = await browser.get("/");
    assert.equal(anonymous.status, 302);
    assert.equal(anonymous.location, "/ui/login/loginname");

    // the UI's own sign-in (no application) ends on the account page
    const loginPage = await browser.follow("/ui/login/loginname");
    const passwordPage = await browser.submit(loginPage, "/ui/login/loginname", { loginName: "alice" });
    const account = await browser.submit(passwordPage, "/ui/login/password", { password: PASSWORD });
    assert.equal(account.status, 200, account.text);
    assert.match(account.text, /<h1 id="page-title">Your account<\/h1>/);
    assert.match(account.text, /Alice Example/);
    assert.match(account.text, /alice@example\.com/);
    assert.match(account.text, /alice@platform\.localhost/);

    const uaHash = createHash("sha256").update(browser.cookies.get("platform_ua")!).digest("base64url");
    const sessionsOf = async () =>
      (
        await platform.db.query("SELECT id FROM sessions WHERE instance_id = $1 AND user_agent_hash = $2", [
          instanceId,
          uaHash,
        ])
      ).length;
    assert.equal(await sessionsOf(), 1);
    const signedOut = await browser.submit(account, "/ui/login/signout", {});
    assert.equal(signedOut.status, 200);
    assert.match(signedOut.text, /You are signed out/);
    assert.equal(await sessionsOf(), 0, "the sessions ended");
    assert.equal(browser.cookies.has("platform_ua"), false, "the cookie is cleared");
    assert.equal((await browser.get("/")).status, 302);
  });

  it("refuses unknown, expired, completed and other browsers' auth requests with a page saying so", async () => {
    const browser = new HttpBrowser(platform.url);
    let page = await browser.follow("/ui/login?authRequest=99999");
    assert.equal(page.status, 404);
    assert.match(alertOf(page.text) ?? "", /sign-in link is not valid/);

    const expiring = await createAuthRequest(platform);
    await platform.db.query(
      "UPDATE auth_requests SET expires_at = now() - interval '1 second' WHERE id = $1",
      [expiring.id],
    );
    page = await browser.follow(`/ui/login?authRequest=${expiring.id}`);
    assert.equal(page.status, 400);
    assert.match(alertOf(page.text) ?? "", /expired/);

    const claimed = await createAuthRequest(platform);
    await browser.follow(`/ui/login?authRequest=${claimed.id}`);
    page = await new HttpBrowser(platform.url).follow(`/ui/login?authRequest=${claimed.id}`);
    assert.equal(page.status, 403);
    assert.match(alertOf(page.text) ?? "", /started in another browser/);

    const done = await createAuthRequest(platform);
    assertCompleted(platform, await signIn(browser, done.id, "bob"), done.id);
    page = await browser.follow(`/ui/login/complete?authRequest=${done.id}`);
    assert.equal(page.status, 400);
    assert.match(alertOf(page.text) ?? "", /already complete/);
    assert.equal(
      platform.completer.completions.filter((c) => c.authRequest.id === done.id).length,
      1,
      "handed over once",
    );
  });

  it("prompt=none: login_required, the session, or interaction_required at the redirect URI", async () => {
    const browser = new HttpBrowser(platform.url);
    const silent = () => createAuthRequest(platform, { prompt: ["none"] });
    let request = await silent();
    const answer = await browser.get(`/ui/login?authRequest=${request.id}`);
    assert.equal(answer.status, 302);
    let url = new URL(answer.location!);
    assert.equal(url.searchParams.get("error"), "login_required");
    assert.equal(url.searchParams.get("state"), request.state);

    await signIn(browser, (await createAuthRequest(platform)).id, "alice");
    request = await silent();
    assertCompleted(platform, await browser.get(`/ui/login?authRequest=${request.id}`), request.id);

    // max_age exceeded (0): the password would be needed
    request = await createAuthRequest(platform, { prompt: ["none"], maxAge: 0 });
    await new Promise((resolve) => setTimeout(resolve, 1100));
    url = new URL((await browser.get(`/ui/login?authRequest=${request.id}`)).location!);
    assert.equal(url.searchParams.get("error"), "login_required");

    // a second account through the picker's "Use another account"
    const another = await createAuthRequest(platform, { prompt: ["select_account"] });
    const picker = await browser.follow(`/ui/login?authRequest=${another.id}`);
    assert.match(picker.text, /Choose an account/);
    const otherAccount = /href="([^"]+)">Use another account</.exec(picker.text)![1].replaceAll("&amp;", "&");
    const passwordPage = await browser.submit(await browser.follow(otherAccount), "/ui/login/loginname", {
      loginName: "bob",
    });
    assertCompleted(
      platform,
      await browser.submit(passwordPage, "/ui/login/password", { password: PASSWORD }),
      another.id,
    );
    request = await silent();
    url = new URL((await browser.get(`/ui/login?authRequest=${request.id}`)).location!);
    assert.equal(url.searchParams.get("error"), "interaction_required");
  });

  it("prompt=login asks for the password again and renews auth_time on the same session", async () => {
    const browser = new HttpBrowser(platform.url);
    const first = await createAuthRequest(platform);
    const session = assertCompleted(platform, await signIn(browser, first.id, "alice"), first.id).session;
    const again = await createAuthRequest(platform, { prompt: ["login"] });
    const page = await browser.follow(`/ui/login?authRequest=${again.id}`);
    assert.match(page.text, /Enter your password/);
    assert.match(page.text, /please enter your password again/);
    assert.match(page.text, /Alice Example/);
    const answer = await browser.submit(page, "/ui/login/password", { password: PASSWORD });
    const renewed = assertCompleted(platform, answer, again.id).session;
    assert.equal(renewed.id, session.id, "the same session");
    assert.ok(renewed.authTime! > session.authTime!, "a new auth_time");
  });

  it("does not let a browser pick another browser's session", async () => {
    const owner = new HttpBrowser(platform.url);
    const first = await createAuthRequest(platform);
    const session = assertCompleted(platform, await signIn(owner, first.id, "alice"), first.id).session;

    const thief = new HttpBrowser(platform.url);
    const request = await createAuthRequest(platform, { prompt: ["select_account"] });
    const page = await thief.follow(`/ui/login?authRequest=${request.id}`);
    assert.match(page.text, /<h1 id="page-title">Sign in<\/h1>/, "no sessions to pick: the login");
    const answer = await thief.post("/ui/login/select", {
      ...formOf(page.text, "/ui/login/loginname"),
      sessionId: session.id,
    });
    assert.equal(answer.status, 303);
    assert.equal(answer.location, `/ui/login/select?authRequest=${request.id}`);
    const stored = await platform.login.authRequests.find(instanceId, request.id);
    assert.equal(stored?.sessionId, undefined);
    assert.equal((await thief.get(`/ui/login/complete?authRequest=${request.id}`)).status, 302);
    assert.equal(platform.completer.completionOf(request.id), undefined);
  });

  it("registers with prompt=create: errors keep the values, a taken username is refused, the setting switches it off", async () => {
    const browser = new HttpBrowser(platform.url);
    const request = await createAuthRequest(platform, { prompt: ["create"] });
    let page = await browser.follow(`/ui/login?authRequest=${request.id}`);
    assert.match(page.text, /Create your account/);
    assert.match(page.text, /at least 8 characters/);
    const before = await eventCount(platform);
    page = await browser.submit(page, "/ui/login/register", {
      username: "dana smith",
      givenName: "Dana",
      familyName: "",
      email: "not-an-email",
      password: "short",
      passwordConfirm: "other",
    });
    assert.equal(await eventCount(platform), before, "nothing stored");
    assert.equal(alertOf(page.text), "Please correct the marked fields.");
    assert.match(page.text, /A username cannot contain spaces/);
    assert.match(page.text, /This field is required/);
    assert.match(page.text, /Enter an e-mail address such as/);
    assert.match(page.text, /The password does not meet the requirements/);
    assert.match(page.text, /The passwords do not match/);
    assert.match(page.text, /value="Dana"/, "values kept");
    assert.doesNotMatch(page.text, /value="short"/, "passwords are never kept");

    page = await browser.submit(page, "/ui/login/register", {
      username: "alice",
      givenName: "Dana",
      familyName: "Smith",
      email: "dana@example.com",
      password: PASSWORD,
      passwordConfirm: PASSWORD,
    });
    assert.match(page.text, /This username is taken/);

    const verify = await browser.submit(page, "/ui/login/register", {
      username: "dana",
      givenName: "Dana",
      familyName: "Smith",
      email: "dana@example.com",
      password: PASSWORD,
      passwordConfirm: PASSWORD,
    });
    // the e-mail's code next (none is sent here: no SMTP provider is active), which may be skipped
    assert.match(verify.text, /Verify your e-mail address/);
    assert.match(alertOf(verify.text) ?? "", /could not be sent/);
    assert.match(verify.text, /Skip for now/);
    const done = await browser.get(`/ui/login/complete?authRequest=${request.id}`);
    const completion = assertCompleted(platform, done, request.id);
    const [user] = await platform.db.query<{ id: string; email_verified: boolean; org_id: string }>(
      "SELECT id, email_verified, org_id FROM users WHERE instance_id = $1 AND username = 'dana'",
      [instanceId],
    );
    assert.equal(completion.session.userId, user.id);
    assert.equal(user.email_verified, false, "completes without e-mail verification");
    assert.equal(user.org_id, platform.bootstrapResult!.orgId, "the instance's default organization");

    const owner = { type: 2 as const, id: instanceId };
    await changeSettings(platform.eventStore, {
      category: LOGIN,
      owner,
      instanceId,
      creator: "test",
      set: { allow_register: false },
      reset: [],
    });
    try {
      const off = await createAuthRequest(platform, { prompt: ["create"] });
      const fresh = new HttpBrowser(platform.url);
      page = await fresh.follow(`/ui/login?authRequest=${off.id}`);
      assert.match(page.text, /<h1 id="page-title">Sign in<\/h1>/, "the login instead");
      assert.doesNotMatch(page.text, /Create an account/);
      page = await fresh.follow(`/ui/login/register?authRequest=${off.id}`);
      assert.equal(page.status, 403);
      assert.match(alertOf(page.text) ?? "", /cannot create an account here/);
    } finally {
      await changeSettings(platform.eventStore, {
        category: LOGIN,
        owner,
        instanceId,
        creator: "test",
        set: {},
        reset: ["allow_register"],
      });
    }
  });

  it("posts the answer with response_mode=form_post, allowing exactly its script", async () => {
    const browser = new HttpBrowser(platform.url);
    const request = await createAuthRequest(platform, { responseMode: "form_post" });
    const page = await signIn(browser, request.id, "bob");
    assert.equal(page.status, 200);
    assert.match(page.text, new RegExp(`<form method="post" action="${REDIRECT_URI}" id="form-post">`));
    assert.match(page.text, new RegExp(`name="code" value="${TestCompleter.codeFor(request.id)}"`));
    assert.match(page.text, /<button class="button" type="submit">Continue<\/button>/);
    const script = /<script>([^<]*)<\/script>/.exec(page.text)?.[1] ?? "";
    const hash = createHash("sha256").update(script).digest("base64");
    const csp = page.headers.get("content-security-policy") ?? "";
    assert.match(csp, new RegExp(`script-src 'sha256-${hash.replace(/[+/]/g, "\\$&")}'`));
    assert.match(csp, /form-action 'self' http:\/\/app\.test/);
    assert.match(csp, /frame-ancestors 'none'/);
  });
});

describe("login UI rate limits", () => {
  let platform: LoginTestPlatform;

  before(async () => {
    platform = await startLoginPlatform({
      PLATFORM_LOGIN_ATTEMPTS_PER_NAME: "2",
      PLATFORM_LOGIN_ATTEMPTS_PER_IP: "4",
    });
    await addHuman(platform, "erin", PASSWORD);
    await addHuman(platform, "someone-else", PASSWORD);
  });
  after(() => platform.stop());

  it("answers a friendly 429 page per login name, then per IP", async () => {
    const browser = new HttpBrowser(platform.url);
    let page = await signIn(browser, (await createAuthRequest(platform)).id, "erin", WRONG);
    page = await browser.submit(page, "/ui/login/password", { password: WRONG });
    const events = await eventCount(platform);
    const limited = await browser.post("/ui/login/password", {
      ...formOf(page.text, "/ui/login/password"),
      password: PASSWORD,
    });
    assert.equal(limited.status, 429);
    assert.match(limited.text, /Too many attempts/);
    assert.ok(Number(limited.headers.get("retry-after")) > 0);
    // the refused post checks nothing, not even after its answer (a right password signed in unseen before)
    await new Promise((resolve) => setTimeout(resolve, 1500));
    assert.equal(await eventCount(platform), events, "nothing checked or stored");

    // another name passes the name limit, until the IP's 4 attempts are used up
    page = await signIn(browser, (await createAuthRequest(platform)).id, "someone-else", WRONG);
    assert.equal(page.status, 200);
    const byIp = await browser.post("/ui/login/password", {
      ...formOf(page.text, "/ui/login/password"),
      password: WRONG,
    });
    assert.equal(byIp.status, 429);
  });
});
