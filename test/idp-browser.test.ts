/**
 * Sign-in with external identity providers in Debian's Chromium (playwright-core). The external provider is
 * a real OpenID Connect provider: a second Platform instance on the same server (domain 127.0.0.1, its own
 * issuer, users and login UI) with an OIDC app registered there through the apps API. The Platform under
 * test (localhost) signs people in for its own application "shop", offering "Continue with <provider>".
 * The server listens on a port chosen beforehand so that PLATFORM_IDP_CODEHOST_B_ISSUER can name the
 * second instance's issuer (the codehost_b test). The setup is test/idp-federation.ts (shared with
 * `npm run screenshots`).
 *
 * Needs Chromium (`apt-get install -y chromium`, or CHROMIUM_PATH).
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { generate } from "otplib";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { addOrg, type Json, restClient, type TestPlatform } from "./helpers.ts";
import { type Federation, startFederation } from "./idp-federation.ts";
import { addHuman } from "./login.ts";
import {
  axeViolations,
  type ClientApp,
  keyboardOrder,
  launchChromium,
  PASSWORD,
  startClientApp,
  watchProblems,
} from "./login-browser.ts";
import { startSmtpReceiver } from "./smtp-receiver.ts";
import { testTime } from "./time.ts";

let federation: Federation;
let platform: TestPlatform;
let browser: Browser;
let app: ClientApp;
let orgId: string;
/** The external provider: the second instance. */
let upstream: Federation["upstream"];

const USERS = "/resources/v3alpha/users";
const nowSeconds = () => Math.floor(Date.now() / 1000);

before(async () => {
  [browser, federation] = await Promise.all([
    launchChromium(),
    startClientApp().then((started) => {
      app = started;
      return startFederation(started);
    }),
  ]);
  ({ platform, orgId, upstream } = federation);
});

after(async () => {
  await browser?.close();
  await app?.close();
  await federation?.platform.stop();
});

const addUpstreamHuman: Federation["addUpstreamHuman"] = (...args) => federation.addUpstreamHuman(...args);
const addProvider: Federation["addProvider"] = (...args) => federation.addProvider(...args);
const authorization: Federation["authorization"] = (...args) => federation.authorization(...args);
const signInUpstream: Federation["signInUpstream"] = (...args) => federation.signInUpstream(...args);

async function newPage() {
  const context: BrowserContext = await browser.newContext();
  const page = await context.newPage();
  return { context, page, problems: watchProblems(page) };
}

const heading = async (page: Page) => ((await page.locator("h1").textContent()) ?? "")?.trim();

/** Axe-core's findings on the page, light and dark; Tab follows the document order with visible focus. */
async function accessibility(page: Page, name: string): Promise<string[]> {
  const failures: string[] = [];
  for (const colorScheme of ["dark", "light"] as const) {
    await page.emulateMedia({ colorScheme });
    for (const v of await axeViolations(page))
      failures.push(`${name} (${colorScheme}): ${v.id} [${v.impact}] ${v.help} — ${v.targets.join(", ")}`);
  }
  const order = await keyboardOrder(page);
  if (order.tabbed.map((stop) => stop.element).join() !== order.document.join())
    failures.push(`${name}: Tab does not follow the document order`);
  for (const stop of order.tabbed)
    if (!stop.visible) failures.push(`${name}: ${stop.element} shows no focus`);
  return failures;
}

const rest = () => federation.rest;

async function linksOf(userId: string): Promise<Json[]> {
  const listed = await rest()("GET", `${USERS}/${userId}/links`);
  assert.equal(listed.status, 200, listed.text);
  return listed.json.links ?? [];
}

describe("signing in with an external OpenID Connect provider (a second Platform instance)", () => {
  it("auto creation: a new person continues with the provider and gets a linked user with a verified e-mail", async () => {
    const providerId = await addProvider("Upstream Auto", { isAutoCreation: true });
    const upstreamUser = await addUpstreamHuman("uma", { givenName: "Uma", familyName: "Thurman" });
    const { context, page, problems } = await newPage();
    const request = await authorization();
    await page.goto(request.url);
    assert.equal(await heading(page), "Sign in");
    const button = page.getByRole("link", { name: "Continue with Upstream Auto" });
    assert.ok(await button.isVisible());
    const failures = await accessibility(page, "login name with providers");
    await button.click();
    await signInUpstream(page, "uma");
    const { claims, userinfo } = await request.redeem(page);
    assert.equal(userinfo.preferred_username, "uma");
    assert.equal(userinfo.given_name, "Uma");
    assert.equal(userinfo.family_name, "Thurman");
    assert.equal(userinfo.email, "uma@upstream.test");
    assert.equal(userinfo.email_verified, true);
    assert.deepEqual(claims.amr, ["fed"]);
    const links = await linksOf(claims.sub);
    assert.deepEqual(
      links.map((l) => [l.idp_id, l.external_user_id, l.external_username]),
      [[providerId, upstreamUser, "uma"]],
    );
    // the sessions API shows the provider check, and no password check
    const sessions = await rest()("POST", "/resources/v3alpha/sessions/_search", {
      json: [{ user_id: { user_id: claims.sub } }],
    });
    assert.equal(sessions.status, 200, sessions.text);
    assert.equal(sessions.json.result.length, 1, sessions.text);
    const [session] = sessions.json.result;
    assert.equal(session.session.user.id, claims.sub);
    assert.equal(session.session.factors.idp.idp_id, providerId);
    assert.ok(Date.parse(session.session.factors.idp.verified_at) > 0);
    assert.equal(session.session.factors.password, undefined);

    // the next sign-in with the provider finds the link (no second user)
    const { context: second, page: again } = await newPage();
    const next = await authorization();
    await again.goto(next.url);
    await again.getByRole("link", { name: "Continue with Upstream Auto" }).click();
    await signInUpstream(again, "uma");
    assert.equal((await next.redeem(again)).claims.sub, claims.sub);
    assert.deepEqual(failures, []);
    assert.deepEqual(problems, []);
    await context.close();
    await second.close();
  });

  it("auto linking by e-mail: the matching user proves the local password, then the provider signs them in", async () => {
    const providerId = await addProvider("Upstream Linking", { autoLinking: "email" });
    const lenaId = await addHuman(platform, "lena", PASSWORD, { givenName: "Lena", familyName: "Local" });
    // the same verified address at the provider, another username there
    const upstreamUser = await addUpstreamHuman("lena.remote", {
      givenName: "Lena",
      familyName: "Remote",
      email: "lena@example.com",
    });
    const { context, page, problems } = await newPage();
    const request = await authorization();
    await page.goto(request.url);
    await page.getByRole("link", { name: "Continue with Upstream Linking" }).click();
    await signInUpstream(page, "lena.remote");
    await page.waitForURL(`${platform.url}/ui/login/idp/link?**`);
    assert.equal(await heading(page), "Link your account");
    assert.match((await page.locator(".account-chip").textContent()) ?? "", /lena/);
    const failures = await accessibility(page, "link proposal");
    // a wrong password links nothing
    await page.getByLabel("Password", { exact: true }).fill("wrong-password");
    await page.getByRole("button", { name: "Link and sign in" }).click();
    assert.match((await page.getByRole("alert").textContent()) ?? "", /login name or password is wrong/);
    assert.deepEqual(await linksOf(lenaId), []);
    await page.getByLabel("Password", { exact: true }).fill(PASSWORD);
    await page.getByRole("button", { name: "Link and sign in" }).click();
    const { claims } = await request.redeem(page);
    assert.equal(claims.sub, lenaId);
    assert.deepEqual(
      (await linksOf(lenaId)).map((l) => [l.idp_id, l.external_user_id, l.external_username]),
      [[providerId, upstreamUser, "lena.remote"]],
    );

    // next time the link signs in without a password
    const { context: second, page: again } = await newPage();
    const next = await authorization();
    await again.goto(next.url);
    await again.getByRole("link", { name: "Continue with Upstream Linking" }).click();
    await signInUpstream(again, "lena.remote");
    assert.equal((await next.redeem(again)).claims.sub, lenaId);

    // removed through the users API: the provider no longer signs her in (no creation, no linking allowed)
    const removed = await rest()("DELETE", `${USERS}/${lenaId}/links/${providerId}`);
    assert.equal(removed.status, 200, removed.text);
    assert.deepEqual(failures, []);
    assert.deepEqual(problems, []);
    await context.close();
    await second.close();
  });

  it("no prompt when several users have the e-mail address", async () => {
    await addProvider("Upstream Ambiguous", { autoLinking: "email" });
    const one = await addHuman(platform, "twin1", PASSWORD);
    const two = await addHuman(platform, "twin2", PASSWORD);
    for (const id of [one, two]) {
      const patched = await rest()("PATCH", `${USERS}/${id}`, {
        json: { human: { email: { address: "twins@example.com", is_verified: true } } },
      });
      assert.equal(patched.status, 200, patched.text);
    }
    await addUpstreamHuman("twin.remote", { givenName: "T", familyName: "Win", email: "twins@example.com" });
    const { context, page } = await newPage();
    await page.goto((await authorization()).url);
    await page.getByRole("link", { name: "Continue with Upstream Ambiguous" }).click();
    await signInUpstream(page, "twin.remote");
    await page.waitForURL(`${platform.url}/ui/login/idp/callback?**`);
    assert.match(
      (await page.getByRole("alert").textContent()) ?? "",
      /No account here is linked to your Upstream Ambiguous account/,
    );
    await context.close();
  });

  it("manual creation: the registration form is prefilled from the provider; read-only while auto creation is on", async () => {
    await addProvider("Upstream Manual", { isManualCreationAllowed: true });
    const upstreamUser = await addUpstreamHuman("mona", { givenName: "Mona", familyName: "Lisa" });
    const { context, page, problems } = await newPage();
    const request = await authorization();
    await page.goto(request.url);
    await page.getByRole("link", { name: "Continue with Upstream Manual" }).click();
    await signInUpstream(page, "mona");
    await page.waitForURL(`${platform.url}/ui/login/idp/register?**`);
    assert.equal(await heading(page), "Create your account");
    assert.equal(await page.getByLabel("Username").inputValue(), "mona");
    assert.equal(await page.getByLabel("First name").inputValue(), "Mona");
    assert.equal(await page.getByLabel("Last name").inputValue(), "Lisa");
    assert.equal(await page.getByLabel("E-mail address").inputValue(), "mona@upstream.test");
    assert.equal(
      await page.getByLabel("Username").getAttribute("readonly"),
      null,
      "editable without auto creation",
    );
    assert.equal(
      await page.getByLabel("Password", { exact: true }).count(),
      0,
      "no password: the provider signs in",
    );
    const failures = await accessibility(page, "prefilled registration");
    await page.getByLabel("Username").fill("mona.l");
    await page.getByRole("button", { name: "Create account" }).click();
    const { claims, userinfo } = await request.redeem(page);
    assert.equal(userinfo.preferred_username, "mona.l");
    assert.equal(userinfo.given_name, "Mona");
    assert.equal(userinfo.email_verified, true);
    assert.deepEqual(
      (await linksOf(claims.sub)).map((l) => l.external_user_id),
      [upstreamUser],
    );

    // auto creation on, but the provider's username is taken here: the form, with only the username editable
    await addProvider("Upstream Strict", { isAutoCreation: true, isManualCreationAllowed: true });
    await addHuman(platform, "nora", PASSWORD);
    await addUpstreamHuman("nora", { givenName: "Nora", familyName: "Remote" });
    const { context: second, page: strict } = await newPage();
    const other = await authorization();
    await strict.goto(other.url);
    await strict.getByRole("link", { name: "Continue with Upstream Strict" }).click();
    await signInUpstream(strict, "nora");
    await strict.waitForURL(`${platform.url}/ui/login/idp/register?**`);
    assert.match((await strict.locator("#username-error").textContent()) ?? "", /username is taken/);
    assert.equal(await strict.getByLabel("Username").getAttribute("readonly"), null);
    for (const label of ["First name", "Last name", "E-mail address"])
      assert.equal(await strict.getByLabel(label).getAttribute("readonly"), "", `${label} is read-only`);
    failures.push(...(await accessibility(strict, "registration with read-only fields")));
    await strict.getByLabel("Username").fill("nora.remote");
    // a read-only value changed anyway (not through the page) is ignored: the provider's value is kept
    await strict.evaluate(
      'const input = document.getElementById("familyName"); input.removeAttribute("readonly"); input.value = "Tampered";',
    );
    await strict.getByRole("button", { name: "Create account" }).click();
    const created = await other.redeem(strict);
    assert.equal(created.userinfo.preferred_username, "nora.remote");
    assert.equal(created.userinfo.family_name, "Remote");
    assert.deepEqual(failures, []);
    assert.deepEqual(problems, []);
    await context.close();
    await second.close();
  });

  it("registration with an e-mail address the provider did not verify: VERIFY_EMAIL, and its page before the sign-in completes", async () => {
    const smtp = await startSmtpReceiver({});
    const created = await rest()("POST", "/resources/v3alpha/smtp_providers", {
      json: { description: "mail", sender_address: "noreply@example.com", host: `127.0.0.1:${smtp.port}` },
    });
    assert.equal(created.status, 201, created.text);
    const smtpProvider = `/resources/v3alpha/smtp_providers/${created.json.details.id}`;
    assert.equal((await rest()("POST", `${smtpProvider}/_activate`)).status, 200);
    const codeTo = async (address: string) => {
      for (let i = 0; i < testTime(400); i++) {
        const mail = smtp.received.find((m) => m.envelope.to.includes(address));
        const code = /[?&]code=([A-Z2-9]{8})/.exec(mail?.mail.text ?? "")?.[1];
        if (code) return code;
        await new Promise((r) => setTimeout(r, 25));
      }
      assert.fail(`no code mailed to ${address}`);
    };
    try {
      await addProvider("Upstream Unverified", { isAutoCreation: true, isManualCreationAllowed: true });
      await addUpstreamHuman("vera", { givenName: "Vera", familyName: "Novak", emailVerified: false });
      const { context, page, problems } = await newPage();
      const request = await authorization();
      await page.goto(request.url);
      await page.getByRole("link", { name: "Continue with Upstream Unverified" }).click();
      await signInUpstream(page, "vera");
      // auto creation: the verification page, as after a local registration
      await page.waitForURL(`${platform.url}/ui/login/verify-email?**`);
      assert.equal(await heading(page), "Verify your e-mail address");
      assert.match(
        (await page.locator("main").textContent()) ?? "",
        /Enter the code we sent to vera@upstream\.test/,
      );
      const failures = await accessibility(page, "verification after a provider's registration");
      await page.getByLabel("Code").fill("WRONG234");
      await page.getByRole("button", { name: "Verify" }).click();
      await page.locator("#code-error").waitFor();
      await page.getByLabel("Code").fill(await codeTo("vera@upstream.test"));
      await page.getByRole("button", { name: "Verify" }).click();
      const { userinfo } = await request.redeem(page);
      assert.equal(userinfo.email, "vera@upstream.test");
      assert.equal(userinfo.email_verified, true, "verified with the code");

      // the provider's verified address, edited on the registration form: unverified here, its code sent
      await addProvider("Upstream Form", { isManualCreationAllowed: true });
      await addUpstreamHuman("wanda", { givenName: "Wanda", familyName: "Maximoff" });
      const { context: second, page: form } = await newPage();
      const other = await authorization();
      await form.goto(other.url);
      await form.getByRole("link", { name: "Continue with Upstream Form" }).click();
      await signInUpstream(form, "wanda");
      await form.waitForURL(`${platform.url}/ui/login/idp/register?**`);
      await form.getByLabel("E-mail address").fill("wanda@elsewhere.example");
      await form.getByRole("button", { name: "Create account" }).click();
      await form.waitForURL(`${platform.url}/ui/login/verify-email?**`);
      assert.ok((await codeTo("wanda@elsewhere.example")).length === 8);
      // the sign-in may go on without the code: the address stays unverified
      await form.getByRole("link", { name: "Skip for now" }).click();
      const skipped = await other.redeem(form);
      assert.equal(skipped.userinfo.email, "wanda@elsewhere.example");
      assert.equal(skipped.userinfo.email_verified, false);

      // the provider's address, asserted verified: nothing sent, no verification page
      await addUpstreamHuman("xena", { givenName: "Xena", familyName: "Warrior" });
      const { context: third, page: direct } = await newPage();
      const verified = await authorization();
      await direct.goto(verified.url);
      await direct.getByRole("link", { name: "Continue with Upstream Unverified" }).click();
      await signInUpstream(direct, "xena");
      assert.equal((await verified.redeem(direct)).userinfo.email_verified, true);
      await new Promise((r) => setTimeout(r, 700)); // what the outbox would send by now
      assert.equal(smtp.received.filter((m) => m.envelope.to.includes("xena@upstream.test")).length, 0);
      assert.deepEqual(failures, []);
      assert.deepEqual(problems, []);
      await Promise.all([context.close(), second.close(), third.close()]);
    } finally {
      await rest()("POST", `${smtpProvider}/_deactivate`);
      await smtp.close();
    }
  });

  it("auto update: names and e-mail follow the provider at each sign-in", async () => {
    await addProvider("Upstream Update", { isAutoCreation: true, isAutoUpdate: true });
    const upstreamUser = await addUpstreamHuman("ulla", { givenName: "Ulla", familyName: "Before" });
    const signIn = async () => {
      const { context, page } = await newPage();
      const request = await authorization();
      await page.goto(request.url);
      await page.getByRole("link", { name: "Continue with Upstream Update" }).click();
      await signInUpstream(page, "ulla");
      const result = await request.redeem(page);
      await context.close();
      return result;
    };
    const first = await signIn();
    assert.equal(first.userinfo.family_name, "Before");
    const upstreamRest = restClient({ url: upstream.url }, () => upstream.pat);
    const patched = await upstreamRest("PATCH", `${USERS}/${upstreamUser}`, {
      json: {
        human: {
          profile: { family_name: "After", display_name: "Ulla After" },
          email: { address: "ulla.after@upstream.test", is_verified: true },
        },
      },
    });
    assert.equal(patched.status, 200, patched.text);
    const second = await signIn();
    assert.equal(second.claims.sub, first.claims.sub);
    assert.equal(second.userinfo.family_name, "After");
    assert.equal(second.userinfo.name, "Ulla After");
    assert.equal(second.userinfo.email, "ulla.after@upstream.test");
    assert.equal(second.userinfo.email_verified, true);
    const user = await rest()("GET", `${USERS}/${first.claims.sub}`);
    assert.equal(user.json.user.human.profile.family_name, "After");
  });

  it("codehost_b through PLATFORM_IDP_CODEHOST_B_ISSUER; the idp scope goes straight to the provider", async () => {
    const providerId = await addProvider("Codehost B", { isAutoCreation: true }, { type: "codehost_b" });
    await addUpstreamHuman("cody", { givenName: "Cody", familyName: "Hostman" });
    const { context, page, problems } = await newPage();
    const request = await authorization(`urn:platform:iam:org:idp:id:${providerId}`);
    await page.goto(request.url);
    // no login-name page here: straight to the provider (the second instance, named only by the setting)
    await signInUpstream(page, "cody");
    const { claims, userinfo } = await request.redeem(page);
    assert.equal(userinfo.preferred_username, "cody");
    assert.equal((await linksOf(claims.sub))[0].idp_id, providerId);
    assert.deepEqual(problems, []);
    await context.close();
  });

  it("manual linking: the person signs in with a local account of the organization to link it", async () => {
    const providerId = await addProvider("Upstream Manual Link", { isManualLinkingAllowed: true });
    const maxId = await addHuman(platform, "max", PASSWORD, { givenName: "Max", familyName: "Local" });
    await addUpstreamHuman("maximilian", { givenName: "Max", familyName: "Remote" });
    const { context, page, problems } = await newPage();
    const request = await authorization();
    await page.goto(request.url);
    await page.getByRole("link", { name: "Continue with Upstream Manual Link" }).click();
    await signInUpstream(page, "maximilian");
    await page.waitForURL(`${platform.url}/ui/login/idp/link?**`);
    assert.equal(await page.locator(".account-chip").count(), 0, "no proposal without auto linking");
    const failures = await accessibility(page, "manual linking");
    await page.getByLabel("Login name").fill("max");
    await page.getByLabel("Password", { exact: true }).fill(PASSWORD);
    await page.getByRole("button", { name: "Link and sign in" }).click();
    const { claims } = await request.redeem(page);
    assert.equal(claims.sub, maxId);
    assert.equal((await linksOf(maxId))[0].idp_id, providerId);
    assert.deepEqual(failures, []);
    assert.deepEqual(problems, []);
    await context.close();
  });

  it("refusals: an unknown provider, an unknown state, a cancelled sign-in, a state from another browser", async () => {
    const unknown = await fetch(`${platform.url}/ui/login/idp/start?idp=nope`);
    assert.equal(unknown.status, 404);
    assert.match(await unknown.text(), /This sign-in option is not available here/);
    const bogus = await fetch(`${platform.url}/ui/login/idp/callback?state=bogus&code=x`);
    assert.equal(bogus.status, 400);
    assert.match(await bogus.text(), /has expired or was already used/);

    await addProvider("Upstream Cancel", { isAutoCreation: true });
    const { context, page } = await newPage();
    let state = "";
    page.on("request", (r) => {
      if (r.url().startsWith(`${upstream.url}/oauth/v2/authorize`))
        state = new URL(r.url()).searchParams.get("state")!;
    });
    await page.goto((await authorization()).url);
    await page.getByRole("link", { name: "Continue with Upstream Cancel" }).click();
    await page.waitForURL(`${upstream.url}/ui/login**`);
    assert.ok(state);
    // another browser (no cookie of this one) cannot use the state
    const elsewhere = await fetch(`${platform.url}/ui/login/idp/callback?state=${state}&code=x`);
    assert.equal(elsewhere.status, 400);
    // the provider answers an error: nothing is created, the state is spent
    const cancelled = await page.goto(
      `${platform.url}/ui/login/idp/callback?state=${state}&error=access_denied`,
    );
    assert.equal(cancelled?.status(), 400);
    assert.match(
      (await page.getByRole("alert").textContent()) ?? "",
      /The sign-in with Upstream Cancel was cancelled or refused/,
    );
    const again = await page.goto(`${platform.url}/ui/login/idp/callback?state=${state}&code=x`);
    assert.equal(again?.status(), 400);
    await context.close();
  });

  it("a provider at an address of PLATFORM_EXECUTION_DENY_LIST is not contacted: the sign-in stops with an error", async () => {
    const denied = upstream.url.replace("127.0.0.1", "127.0.0.2");
    // the same provider, reachable at that address (for this test's client, which has no deny list)
    const reachable = await fetch(`${denied}/.well-known/openid-configuration`);
    assert.equal(reachable.status, 200);
    assert.equal(((await reachable.json()) as { issuer: string }).issuer, denied);
    const providerId = await addProvider("Upstream Closed", { isAutoCreation: true });
    const patched = await rest()("PATCH", `/resources/v3alpha/idps/oidc/${providerId}?ctx.org_id=${orgId}`, {
      json: { config: { issuer: denied } },
    });
    assert.equal(patched.status, 200, patched.text);
    const { context, page } = await newPage();
    const contacted: string[] = [];
    page.on("request", (r) => {
      if (r.url().startsWith(denied)) contacted.push(r.url());
    });
    await page.goto((await authorization()).url);
    const [response] = await Promise.all([
      page.waitForResponse((r) => r.url().includes("/ui/login/idp/start")),
      page.getByRole("link", { name: "Continue with Upstream Closed" }).click(),
    ]);
    assert.equal(response.status(), 502);
    assert.match(
      (await page.getByRole("alert").textContent()) ?? "",
      /The sign-in with Upstream Closed did not work: the provider could not be reached/,
    );
    assert.deepEqual(contacted, [], "the browser was not sent to the provider either");
    await context.close();
  });

  it("a plain OAuth 2.0 provider: the identity comes from its user endpoint (id_attribute)", async () => {
    const providerId = await addProvider("Upstream OAuth", { isAutoCreation: true }, { type: "oauth" });
    const upstreamUser = await addUpstreamHuman("otto", { givenName: "Otto", familyName: "Auth" });
    const { context, page, problems } = await newPage();
    const request = await authorization();
    await page.goto(request.url);
    await page.getByRole("link", { name: "Continue with Upstream OAuth" }).click();
    await signInUpstream(page, "otto");
    const { claims, userinfo } = await request.redeem(page);
    assert.equal(userinfo.preferred_username, "otto");
    assert.equal(userinfo.family_name, "Auth");
    assert.deepEqual(
      (await linksOf(claims.sub)).map((l) => [l.idp_id, l.external_user_id]),
      [[providerId, upstreamUser]],
    );
    assert.deepEqual(problems, []);
    await context.close();
  });

  it("a provider deactivated in an organization is missing from its login page and present in another's", async () => {
    // an instance provider: visible in every organization, active while they inherit
    const shared = await addProvider("Upstream Shared", { isAutoCreation: true }, { ctx: "" });
    await addProvider("Upstream Default Only", { isAutoCreation: true });
    const orgB = await addOrg(platform, "Org B");
    const orgC = await addOrg(platform, "Org C");
    const deactivated = await rest()("PATCH", `/resources/v3alpha/idps/oidc/${shared}?ctx.org_id=${orgB}`, {
      json: { idp: { state_policy: "STATE_POLICY_DEACTIVATE" } },
    });
    assert.equal(deactivated.status, 200, deactivated.text);
    const buttonsOf = async (scope: string) => {
      const { context, page } = await newPage();
      await page.goto((await authorization(scope)).url);
      assert.equal(await heading(page), "Sign in");
      const names = await page.locator(".idp-list a").allTextContents();
      await context.close();
      return names.map((n) => n.trim());
    };
    const inB = await buttonsOf(`urn:platform:iam:org:id:${orgB}`);
    const inC = await buttonsOf(`urn:platform:iam:org:id:${orgC}`);
    const inDefault = await buttonsOf(""); // the shop's project's organization
    assert.ok(!inB.includes("Continue with Upstream Shared"), `org B: ${inB.join(", ")}`);
    assert.ok(inC.includes("Continue with Upstream Shared"), `org C: ${inC.join(", ")}`);
    assert.ok(inDefault.includes("Continue with Upstream Shared"), `default: ${inDefault.join(", ")}`);
    // the default organization's own providers are not offered to the others
    assert.ok(inDefault.includes("Continue with Upstream Default Only"));
    assert.ok(!inC.includes("Continue with Upstream Default Only"));

    // nor can org B reach it by the scope or a crafted link
    const { context, page } = await newPage();
    const direct = await authorization(
      `urn:platform:iam:org:id:${orgB} urn:platform:iam:org:idp:id:${shared}`,
    );
    const answer = await page.goto(direct.url);
    assert.equal(answer?.status(), 404);
    assert.match((await page.getByRole("alert").textContent()) ?? "", /not available here/);
    await context.close();

    // signing in through it in org C creates the user there
    const { context: c, page: inOrgC } = await newPage();
    await addUpstreamHuman("carla", { givenName: "Carla", familyName: "C" });
    const request = await authorization(`urn:platform:iam:org:id:${orgC}`);
    await inOrgC.goto(request.url);
    await inOrgC.getByRole("link", { name: "Continue with Upstream Shared" }).click();
    await signInUpstream(inOrgC, "carla");
    const { claims } = await request.redeem(inOrgC);
    const user = await rest()("GET", `${USERS}/${claims.sub}`);
    assert.equal(user.json.user.details.resource_owner.id, orgC);
    await c.close();

    // deleting the provider later: the link is still listed (and removable)
    const removed = await rest()("DELETE", `/resources/v3alpha/idps/${shared}`);
    assert.equal(removed.status, 200, removed.text);
    assert.deepEqual(
      (await linksOf(claims.sub)).map((l) => l.idp_id),
      [shared],
    );
    assert.equal((await rest()("DELETE", `${USERS}/${claims.sub}/links/${shared}`)).status, 200);
    assert.deepEqual(await linksOf(claims.sub), []);
  });

  it("auto linking by username proposes the user with the provider's username", async () => {
    const providerId = await addProvider("Upstream By Name", { autoLinking: "username" });
    const uweId = await addHuman(platform, "uwe", PASSWORD, { givenName: "Uwe", familyName: "Local" });
    await addUpstreamHuman("uwe", {
      givenName: "Uwe",
      familyName: "Remote",
      email: "uwe.elsewhere@upstream.test",
    });
    const { context, page } = await newPage();
    const request = await authorization();
    await page.goto(request.url);
    await page.getByRole("link", { name: "Continue with Upstream By Name" }).click();
    await signInUpstream(page, "uwe");
    await page.waitForURL(`${platform.url}/ui/login/idp/link?**`);
    assert.match((await page.locator(".account-chip").textContent()) ?? "", /uwe/);
    assert.equal(
      await page.getByLabel("Login name").count(),
      0,
      "only the proposed account (no manual linking)",
    );
    await page.getByLabel("Password", { exact: true }).fill(PASSWORD);
    await page.getByRole("button", { name: "Link and sign in" }).click();
    assert.equal((await request.redeem(page)).claims.sub, uweId);
    assert.equal((await linksOf(uweId))[0].idp_id, providerId);
    await context.close();
  });
  it("a link waits for the second factor: the password alone links nothing, with force_mfa_local_only too", async () => {
    // an organization forcing a second factor, but not after a provider (force_mfa_local_only)
    const orgMfa = await addOrg(platform, "Org Second Factor");
    const policy = await rest()("PATCH", `/settings/v3alpha/login?ctx.org_id=${orgMfa}`, {
      json: { force_mfa: { set: true }, force_mfa_local_only: { set: true } },
    });
    assert.equal(policy.status, 200, policy.text);
    const providerId = await addProvider(
      "Upstream Second Factor",
      { autoLinking: "username" },
      { ctx: `?ctx.org_id=${orgMfa}` },
    );
    // tess has an authenticator app; someone else holds the account "tess" at the provider
    const tessId = await addHuman(platform, "tess", PASSWORD, { orgId: orgMfa });
    const registered = await rest()("POST", `${USERS}/${tessId}/totp`);
    assert.equal(registered.status, 200, registered.text);
    const secret = registered.json.secret as string;
    const verified = await rest()("POST", `${USERS}/${tessId}/totp/_verify`, {
      json: { code: await generate({ secret }) },
    });
    assert.equal(verified.status, 200, verified.text);
    await addUpstreamHuman("tess", {
      givenName: "Tess",
      familyName: "Elsewhere",
      email: "tess@elsewhere.test",
    });
    const scope = `urn:platform:iam:org:id:${orgMfa}`;
    const throughProvider = async (page: Page) => {
      const request = await authorization(scope);
      await page.goto(request.url);
      await page.getByRole("link", { name: "Continue with Upstream Second Factor" }).click();
      await signInUpstream(page, "tess");
      return request;
    };

    // the password alone: the sign-in goes on to the authenticator app, and nothing is linked yet
    const { context, page, problems } = await newPage();
    await throughProvider(page);
    await page.waitForURL(`${platform.url}/ui/login/idp/link?**`);
    await page.getByLabel("Password", { exact: true }).fill(PASSWORD);
    await page.getByRole("button", { name: "Link and sign in" }).click();
    await page.waitForURL(`${platform.url}/ui/login/mfa/totp?**`);
    assert.equal(await heading(page), "Enter the code from your authenticator app");
    assert.deepEqual(await linksOf(tessId), [], "no link after the password alone");
    await context.close();

    // so the provider's account does not sign in as tess: it is asked to link again
    const { context: second, page: again } = await newPage();
    const request = await throughProvider(again);
    await again.waitForURL(`${platform.url}/ui/login/idp/link?**`);
    assert.equal(await heading(again), "Link your account");

    // with the password and the authenticator app, the link is stored
    await again.getByLabel("Password", { exact: true }).fill(PASSWORD);
    await again.getByRole("button", { name: "Link and sign in" }).click();
    await again.waitForURL(`${platform.url}/ui/login/mfa/totp?**`);
    assert.deepEqual(await linksOf(tessId), [], "not before the second factor");
    // the code of the next step (±1 step is accepted), so surely after the registration's
    await again.getByLabel("Authenticator code").fill(await generate({ secret, epoch: nowSeconds() + 30 }));
    await again.getByRole("button", { name: "Verify" }).click();
    const { claims } = await request.redeem(again);
    assert.equal(claims.sub, tessId);
    assert.deepEqual(
      (await linksOf(tessId)).map((l) => [l.idp_id, l.external_username]),
      [[providerId, "tess"]],
    );
    await second.close();

    // from then on the provider signs tess in, without a second factor (force_mfa_local_only)
    const { context: third, page: later } = await newPage();
    const next = await throughProvider(later);
    const signedIn = await next.redeem(later);
    assert.equal(signedIn.claims.sub, tessId);
    assert.deepEqual(signedIn.claims.amr, ["fed"]);
    assert.deepEqual(problems, []);
    await third.close();
  });
});
