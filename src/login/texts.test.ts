/**
 * Administrators' texts where people see them (the API itself: src/services/settings/texts.test.ts): the
 * login pages of an organization's sign-in and of the instance, escaped and never interpreted, changed
 * at the next page; a message received by a real SMTP server with the subject of the user's organization
 * in the user's language; and the language picker (links, cookie, return target).
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { addOrg, restClient } from "../../test/helpers.ts";
import {
  addHuman,
  createAuthRequest,
  HttpBrowser,
  type LoginTestPlatform,
  startLoginPlatform,
} from "../../test/login.ts";
import { type SmtpReceiver, startSmtpReceiver } from "../../test/smtp-receiver.ts";
import { testTime } from "../../test/time.ts";
import { changeSettings } from "../domain/settings/commands.ts";
import { LANGUAGE } from "../domain/settings/languages.ts";
import { addCallers } from "../services/actions/testing.ts";

const TEXTS = "/settings/v3alpha/texts";

describe("login UI and messages: administrators' texts, language picker", () => {
  let platform: LoginTestPlatform;
  let smtp: SmtpReceiver;
  let callers: Awaited<ReturnType<typeof addCallers>>;
  let instanceId: string;
  let orgId: string;
  const rest = restClient(
    () => platform,
    () => callers.owner,
  );
  const setTexts = async (language: string, texts: Record<string, unknown>, query = "") => {
    const response = await rest("PATCH", `${TEXTS}/${language}${query}`, { json: { texts } });
    assert.equal(response.status, 200, response.text);
  };
  const PASSWORD = "Correct-horse-1";
  const title = (html: string) => /<h1 id="page-title">([^<]*)<\/h1>/.exec(html)?.[1];
  const intro = (html: string) => /<p class="intro">([^<]*)<\/p>/.exec(html)?.[1];

  before(async () => {
    smtp = await startSmtpReceiver({});
    platform = await startLoginPlatform();
    instanceId = platform.bootstrapResult!.instanceId;
    callers = await addCallers(platform);
    orgId = await addOrg(platform, "Texts Org");
    const SMTP = "/resources/v3alpha/smtp_providers";
    const provider = await rest("POST", SMTP, {
      json: { description: "mail", sender_address: "noreply@example.com", host: `127.0.0.1:${smtp.port}` },
    });
    assert.equal(provider.status, 201, provider.text);
    assert.equal((await rest("POST", `${SMTP}/${provider.json.details.id}/_activate`)).status, 200);
  });
  after(async () => {
    await platform.stop();
    await smtp.close();
  });

  it("shows the organization's texts for its sign-in, else the instance's, escaped, at the next page", async () => {
    const instancePage = async () =>
      (await new HttpBrowser(platform.url, { "accept-language": "en" }).follow("/ui/login/loginname")).text;
    const orgPage = async (language = "en") => {
      const request = await createAuthRequest(platform, {
        orgId,
        scope: ["openid", `urn:platform:iam:org:id:${orgId}`],
        uiLocales: [language],
      });
      return (await new HttpBrowser(platform.url).follow(`/ui/login?authRequest=${request.id}`)).text;
    };
    assert.equal(title(await orgPage()), "Sign in");

    await setTexts("en", { "login.loginname.title": { set: "Welcome to the instance" } });
    assert.equal(title(await instancePage()), "Welcome to the instance", "the next page has it");
    assert.equal(title(await orgPage()), "Welcome to the instance", "the organization inherits it");

    const evil = `<script>alert("x")</script> {count} it's #1 '{'`;
    await setTexts(
      "en",
      {
        "login.loginname.title": { set: "Acme & Co sign-in" },
        "login.loginname.intro": { set: `${evil} at {{.Instance}}` },
      },
      `?ctx.org_id=${orgId}`,
    );
    let page = await orgPage();
    assert.equal(title(page), "Acme &amp; Co sign-in");
    assert.match(page, /<title>Acme &amp; Co sign-in · /);
    const instanceName = (await platform.instances.byId(instanceId))!.name;
    assert.equal(
      intro(page),
      `&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; {count} it&#39;s #1 &#39;{&#39; at ${instanceName}`,
    );
    assert.doesNotMatch(page, /<script>alert/);
    assert.equal(title(await instancePage()), "Welcome to the instance", "the instance keeps its own");
    // another language of the organization: its built-in texts
    page = await orgPage("de");
    assert.equal(title(page), "Anmelden");

    await setTexts("en", { "login.loginname.title": { reset: true } }, `?ctx.org_id=${orgId}`);
    assert.equal(title(await orgPage()), "Welcome to the instance");
    await setTexts("en", { "login.loginname.title": { reset: true } });
    assert.equal(title(await orgPage()), "Sign in");
  });

  it("once the user is known, its organization's texts apply where the auth request names none", async () => {
    await addHuman(platform, "tess", PASSWORD, { orgId });
    await setTexts("en", { "login.account.title": { set: "Texts Org account" } }, `?ctx.org_id=${orgId}`);
    const browser = new HttpBrowser(platform.url, { "accept-language": "en" });
    const loginPage = await browser.follow("/ui/login/loginname");
    assert.equal(title(loginPage.text), "Sign in", "no user yet: the instance's texts");
    // a typed name is not looked up for its texts (that would tell which names exist)
    const passwordPage = await browser.submit(loginPage, "/ui/login/loginname", { loginName: "tess" });
    assert.equal(title(passwordPage.text), "Enter your password");
    const account = await browser.submit(passwordPage, "/ui/login/password", { password: PASSWORD });
    assert.equal(title(account.text), "Texts Org account");
    await setTexts("en", { "login.account.title": { reset: true } }, `?ctx.org_id=${orgId}`);
    const again = await browser.follow("/");
    assert.equal(title(again.text), "Your account");
  });

  it("sends a message with the subject of the user's organization in the user's language", async () => {
    const created = await rest("POST", `/resources/v3alpha/users?ctx.org_id=${orgId}`, {
      json: {
        username: "greta",
        human: {
          profile: { given_name: "Greta", family_name: "Beispiel", preferred_language: "de" },
          email: { address: "greta@example.com", is_verified: true },
        },
      },
    });
    assert.equal(created.status, 201, created.text);
    const userId = created.json.details.id as string;
    await setTexts("de", { "message.password_reset.subject": { set: "Instanz: Kennwort" } });
    await setTexts(
      "de",
      { "message.password_reset.subject": { set: "Neues Kennwort für {{.DisplayName}} <b>&" } },
      `?ctx.org_id=${orgId}`,
    );
    await setTexts(
      "en",
      { "message.password_reset.subject": { set: "English subject" } },
      `?ctx.org_id=${orgId}`,
    );
    const sent = await rest("POST", `/resources/v3alpha/users/${userId}/password/_request_reset`, {
      json: {},
    });
    assert.equal(sent.status, 200, sent.text);
    let mail: SmtpReceiver["received"][number] | undefined;
    for (let i = 0; i < testTime(400) && !mail; i++) {
      mail = smtp.received.find((m) => m.envelope.to.includes("greta@example.com"));
      if (!mail) await new Promise((r) => setTimeout(r, 25));
    }
    assert.ok(mail, "the message arrived");
    assert.equal(mail.mail.subject, "Neues Kennwort für Greta Beispiel <b>&");
    // the rest of the message is the built-in German text
    assert.match(mail.mail.text ?? "", /Hallo Greta Beispiel/);
  });

  it("the language picker keeps the choice in a cookie that wins over ui_locales and Accept-Language", async () => {
    const request = await createAuthRequest(platform, { uiLocales: ["en"] });
    const browser = new HttpBrowser(platform.url, { "accept-language": "fr" });
    // the entry shows the login-name page itself: the picker returns to the entry
    const path = `/ui/login?authRequest=${request.id}`;
    let page = await browser.follow(path);
    assert.match(page.text, /<html lang="en">/);
    const nav = /<nav class="languages" aria-label="Language">([\s\S]*?)<\/nav>/.exec(page.text)?.[1] ?? "";
    assert.match(nav, /<span aria-current="true">English<\/span>/);
    const links = [...nav.matchAll(/<a href="([^"]+)" hreflang="(\w+)">([^<]+)<\/a>/g)].map((m) => ({
      url: m[1].replaceAll("&amp;", "&"),
      lang: m[2],
      label: m[3],
    }));
    assert.deepEqual(
      links.map((l) => `${l.lang} ${l.label}`),
      ["de Deutsch", "fr Français", "it Italiano"],
    );
    const german = links.find((l) => l.lang === "de")!;
    assert.equal(new URL(german.url, platform.url).searchParams.get("return"), path);

    const picked = await browser.get(german.url);
    assert.equal(picked.status, 302);
    assert.equal(picked.location, path);
    const cookie = browser.setCookieHeaders.find((h) => h.startsWith("platform_lang="))!;
    assert.match(cookie, /^platform_lang=de;/);
    assert.match(cookie, /Max-Age=31536000/);
    assert.match(cookie, /Path=\//);
    assert.match(cookie, /SameSite=Lax/);
    page = await browser.get(path);
    assert.match(page.text, /<html lang="de">/, "the choice wins over ui_locales and Accept-Language");
    assert.equal(title(page.text), "Anmelden");
    assert.match(page.text, /<nav class="languages" aria-label="Sprache">/);
    // the account page too
    assert.match((await browser.follow("/")).text, /<html lang="de">/);

    // never to another site; unsupported languages are not kept
    for (const target of [
      "//evil.example/x",
      "https://evil.example/",
      "/\\evil.example",
      "/oauth/v2/token",
    ]) {
      const answer = await browser.get(`/ui/login/language?lang=it&return=${encodeURIComponent(target)}`);
      assert.equal(answer.status, 302);
      assert.equal(answer.location, "/ui/login/loginname", target);
    }
    await browser.get(`/ui/login/language?lang=xx&return=${encodeURIComponent(path)}`);
    assert.equal(browser.cookies.get("platform_lang"), "it");

    // a language the settings do not allow (any more) is ignored; the picker offers the allowed ones
    const instance = { type: 2 as const, id: instanceId };
    const change = { category: LANGUAGE, owner: instance, instanceId, creator: "test", reset: [] };
    await changeSettings(platform.eventStore, { ...change, set: { restricted_languages: ["en", "de"] } });
    try {
      page = await browser.get(path);
      assert.match(page.text, /<html lang="en">/);
      assert.deepEqual(
        [...page.text.matchAll(/hreflang="(\w+)"/g)].map((m) => m[1]),
        ["de"],
        "English is the page's",
      );
    } finally {
      await changeSettings(platform.eventStore, { ...change, set: {}, reset: ["restricted_languages"] });
    }
  });
});
