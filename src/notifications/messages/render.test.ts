import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { supportedLanguages } from "../../domain/settings/languages.ts";
import { contrast } from "./layout.ts";
import { inviteUrl, LOGIN_PATHS, passwordResetUrl } from "./links.ts";
import {
  gsmLookalikes,
  type MessageInput,
  type RenderedEmail,
  type RenderedSms,
  renderMessage,
} from "./render.ts";
import { MESSAGE_TYPES, MESSAGES, type MessageType, PLACEHOLDERS, textKeys } from "./types.ts";

const ORIGIN = "https://id.acme.example.com";
const USER_ID = "312345678901234567";
const CODE = "482913";

function input(type: MessageType, overrides: Partial<MessageInput<"INIT">> = {}): MessageInput<"INIT"> {
  return {
    language: { preferred: "en", defaultLanguage: "en" },
    origin: ORIGIN,
    recipient: {
      userId: USER_ID,
      displayName: "Ada Lovelace",
      firstName: "Ada",
      lastName: "Lovelace",
      loginName: "ada@acme.example.com",
    },
    orgName: "ACME Corporation",
    instanceName: "ACME Identity",
    ...(MESSAGES[type].code ? { code: CODE, expiresIn: 600 } : {}),
    ...overrides,
  } as MessageInput<"INIT">;
}

/** Renders any type (the input type of each is checked where the types are named literally). */
const render = (type: MessageType, overrides: Partial<MessageInput<"INIT">> = {}) =>
  renderMessage(type as "INIT", input(type, overrides)) as RenderedEmail | RenderedSms;

const EMAIL_TYPES = MESSAGE_TYPES.filter((t) => MESSAGES[t].channel === "EMAIL");
const SMS_TYPES = MESSAGE_TYPES.filter((t) => MESSAGES[t].channel === "SMS");

/** The hrefs of an HTML part, unescaped. */
const hrefs = (html: string) =>
  [...html.matchAll(/href="([^"]*)"/g)].map((m) => m[1].replaceAll("&amp;", "&"));

/** The GSM 03.38 alphabet: its basic set, and the extension table whose characters take two septets. */
const GSM_BASIC =
  "@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !\"#¤%&'()*+,-./0123456789:;<=>?¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà";
const GSM_EXTENDED = "^{}\\[~]|€\f";

/** The length of a text in GSM 7-bit septets; undefined when a character is not in the alphabet. */
function gsmLength(text: string): number | undefined {
  let septets = 0;
  for (const char of text) {
    if (GSM_BASIC.includes(char)) septets += 1;
    else if (GSM_EXTENDED.includes(char)) septets += 2;
    else return undefined;
  }
  return septets;
}

describe("renderMessage", () => {
  it("renders every type in every language with every placeholder filled in", () => {
    for (const type of MESSAGE_TYPES) {
      for (const lang of supportedLanguages) {
        const message = render(type, { language: { preferred: lang, defaultLanguage: "en" } });
        const where = `${type} ${lang}`;
        assert.equal(message.language, lang, where);
        assert.equal(message.channel, MESSAGES[type].channel, where);
        const parts =
          message.channel === "EMAIL" ? [message.subject, message.html, message.text] : [message.text];
        for (const part of parts) assert.doesNotMatch(part, /[{}]/, `${where}: a placeholder left`);
        if (MESSAGES[type].code) assert.ok(message.text.includes(CODE), `${where}: the code`);
        if (message.channel === "EMAIL") {
          assert.ok(message.subject.length > 0 && !/[\r\n]/.test(message.subject), where);
          assert.match(message.html, new RegExp(`^<!doctype html>\\n<html lang="${lang}"`), where);
          assert.ok(message.html.includes("Ada Lovelace") && message.text.includes("Ada Lovelace"), where);
          assert.doesNotMatch(message.text, /<\/?[a-z][^>]*>/i, `${where}: HTML in the plain text`);
        }
      }
    }
  });

  it("fills in each placeholder a type lists, in an overridden text", () => {
    for (const type of MESSAGE_TYPES) {
      const { placeholders } = MESSAGES[type];
      const all = placeholders.map((name) => `${name}=[{${name}}]`).join(" ");
      const message = render(type, {
        texts: (_lang, key) => (key === `message.${type.toLowerCase()}.text` ? all : undefined),
      });
      const expected: Record<string, string> = {
        DisplayName: "Ada Lovelace",
        FirstName: "Ada",
        LastName: "Lovelace",
        LoginName: "ada@acme.example.com",
        OrgName: "ACME Corporation",
        InstanceName: "ACME Identity",
        Code: CODE,
        Expiry: "10 minutes",
        URL:
          type === "PASSWORD_CHANGED" || type === "EMAIL_CHANGED"
            ? `${ORIGIN}${LOGIN_PATHS.signIn}`
            : `${ORIGIN}${{ INIT: LOGIN_PATHS.invite, VERIFY_EMAIL: LOGIN_PATHS.verifyEmail, PASSWORD_RESET: LOGIN_PATHS.passwordReset }[type as "INIT"]}?userID=${USER_ID}&code=${CODE}`,
      };
      for (const name of placeholders) {
        assert.ok(message.text.includes(`${name}=[${expected[name]}]`), `${type} ${name}: ${message.text}`);
      }
      assert.ok(placeholders.every((name) => PLACEHOLDERS.includes(name)));
    }
  });

  it("escapes every value in the HTML part", () => {
    const hostile = `<script>alert(1)</script> "&'`;
    const escaped = "&lt;script&gt;alert(1)&lt;/script&gt; &quot;&amp;&#39;";
    for (const type of EMAIL_TYPES) {
      const message = render(type, {
        recipient: {
          userId: USER_ID,
          displayName: hostile,
          firstName: "a",
          lastName: "b",
          loginName: `${hostile}@x`,
        },
        orgName: hostile,
        instanceName: hostile,
        texts: (_lang, key) =>
          key.endsWith(".footer") ? `<img src=x onerror=alert(1)> {OrgName}` : undefined,
      }) as RenderedEmail;
      assert.doesNotMatch(message.html, /<script|<img/, type);
      assert.ok(message.html.includes(`${escaped},`), `${type}: the greeting`);
      assert.ok(
        message.html.includes(`&lt;img src=x onerror=alert(1)&gt; ${escaped}`),
        `${type}: the footer`,
      );
      assert.ok(message.html.includes(`alt="${escaped}"`) || message.html.includes(`>${escaped}</p>`), type);
      // The plain text is text: it carries the name as it is.
      assert.ok(message.text.includes(`${hostile},`), type);
    }
  });

  it("links only to the login UI on the instance's origin, carrying the user's ID and the code alone", () => {
    const code = "a&b c/=?#é";
    const userId = "1&x=2";
    for (const type of EMAIL_TYPES) {
      const message = render(type, {
        recipient: { ...input(type).recipient, userId },
        ...(MESSAGES[type].code ? { code } : {}),
      }) as RenderedEmail;
      const links = hrefs(message.html);
      assert.equal(links.length, MESSAGES[type].link ? 2 : 0, type);
      for (const link of links) {
        const url = new URL(link);
        assert.equal(url.origin, ORIGIN, type);
        assert.ok(url.pathname.startsWith("/ui/login/"), type);
        assert.equal(url.hash, "", type);
        if (MESSAGES[type].code) {
          assert.deepEqual([...url.searchParams.keys()], ["userID", "code"], type);
          assert.equal(url.searchParams.get("userID"), userId, type);
          assert.equal(url.searchParams.get("code"), code, type);
        } else {
          assert.equal(url.search, "", type);
        }
        assert.ok(message.text.includes(link), `${type}: the link in the plain text`);
      }
    }
    assert.equal(
      passwordResetUrl(ORIGIN, "1", "x y"),
      "https://id.acme.example.com/ui/login/password-reset?userID=1&code=x%20y",
    );
    assert.equal(
      inviteUrl("http://localhost:8080", "1", "c"),
      "http://localhost:8080/ui/login/invite?userID=1&code=c",
    );
  });

  it("refuses an origin that is not one, and a code-bearing type without its code", () => {
    for (const origin of [
      "https://id.example.com/",
      "https://id.example.com/ui",
      "https://id.example.com?x=1",
      "javascript:alert(1)",
      "ftp://id.example.com",
      "id.example.com",
    ]) {
      assert.throws(() => render("PASSWORD_RESET", { origin }), /origin/, origin);
    }
    assert.throws(() => render("OTP_SMS", { code: "" }), /needs the code/);
    // The input's type says so too (tsc checks these lines).
    const { code: _code, expiresIn: _expiresIn, ...withoutCode } = input("OTP_SMS");
    // @ts-expect-error: a code-bearing message needs its code
    assert.throws(() => renderMessage("OTP_SMS", withoutCode), /needs the code/);
    const withCode = { ...withoutCode, code: "1", expiresIn: 9 };
    // @ts-expect-error: PASSWORD_CHANGED carries no code
    assert.equal(renderMessage("PASSWORD_CHANGED", withCode).channel, "EMAIL");
    assert.throws(() => render("INIT", { expiresIn: 0 }), /needs the code/);
    assert.throws(() => render("constructor" as MessageType), /unknown message type/);
  });

  it("keeps SMS to one GSM 7-bit part: at most 160 characters for a realistic code, in every language", () => {
    for (const type of SMS_TYPES) {
      for (const lang of supportedLanguages) {
        // French writes "3 jours" with a no-break space, "10 minutes" with a plain one.
        for (const expiresIn of [600, 3600, 259_200]) {
          const { text } = render(type, { language: { preferred: lang, defaultLanguage: "en" }, expiresIn });
          const length = gsmLength(text);
          assert.notEqual(length, undefined, `${type} ${lang} is not GSM 7-bit: ${JSON.stringify(text)}`);
          assert.ok(length! <= 160, `${type} ${lang}: ${length} septets: ${text}`);
        }
      }
    }
    const en = render("OTP_SMS");
    assert.equal(
      en.text,
      "482913 is your ACME Identity sign-in code. It expires in 10 minutes. Never share it with anyone.",
    );
    assert.equal(gsmLookalikes("l’heure\u00a0: 3\u202fjours – “ok”…"), 'l\'heure : 3 jours - "ok"...');
  });

  it("uses an overridden text instead of the catalogue's, and the catalogue's for a refused one", () => {
    const overrides: Record<string, string> = {
      "en message.password_reset.subject": "Password help for {DisplayName}",
      "en message.password_reset.text": "Use {Code}. {Secret}",
      "de message.otp_sms.text": "Code: {Code}",
    };
    const texts = (lang: string, key: string) => overrides[`${lang} ${key}`];
    const email = render("PASSWORD_RESET", { texts }) as RenderedEmail;
    assert.equal(email.subject, "Password help for Ada Lovelace");
    assert.ok(email.text.includes("Someone asked to reset the password"), "the refused text is not used");
    assert.ok(!email.text.includes("Secret") && !email.html.includes("Secret"));
    const sms = render("OTP_SMS", { language: { preferred: "de", defaultLanguage: "en" }, texts });
    assert.equal(sms.text, "Code: 482913");
  });

  it("sets a paragraph that is just the code large, escaped like any value", () => {
    const message = render("OTP_EMAIL", { code: "<b>1</b>" }) as RenderedEmail;
    assert.match(message.html, /letter-spacing:4px;color:#111827;">&lt;b&gt;1&lt;\/b&gt;<\/p>/);
    assert.ok(message.text.includes("\n\n<b>1</b>\n\n"));
  });

  it("keeps the subject on one line whatever the values hold", () => {
    const message = render("PASSWORD_RESET", {
      recipient: { ...input("PASSWORD_RESET").recipient, displayName: "Ada\r\nBcc: eve@example.com" },
      texts: (_lang, key) => (key.endsWith(".subject") ? "Hello {DisplayName}" : undefined),
    }) as RenderedEmail;
    assert.equal(message.subject, "Hello Ada Bcc: eve@example.com");
  });

  it("speaks the default language when there are no texts in the preferred one", () => {
    const message = render("VERIFY_EMAIL", {
      language: { preferred: "es", defaultLanguage: "de" },
    }) as RenderedEmail;
    assert.equal(message.language, "de");
    assert.equal(message.subject, "Bestätigen Sie Ihre E-Mail-Adresse");
  });

  it("names the recipient by first and last name, else login name, without a display name", () => {
    const named = render("OTP_EMAIL", { recipient: { ...input("OTP_EMAIL").recipient, displayName: "" } });
    assert.ok(named.text.startsWith("Hello Ada Lovelace,"));
    const bare = render("OTP_EMAIL", {
      recipient: { userId: USER_ID, firstName: "", lastName: "", loginName: "ada@acme.example.com" },
    });
    assert.ok(bare.text.startsWith("Hello ada@acme.example.com,"));
  });

  it("lists the keys of each type's texts with their placeholders", () => {
    assert.deepEqual(
      textKeys("PASSWORD_RESET").map((k) => k.key),
      [
        "message.password_reset.subject",
        "message.password_reset.title",
        "message.password_reset.greeting",
        "message.password_reset.text",
        "message.password_reset.button",
        "message.password_reset.footer",
        "message.layout.link_hint",
      ],
    );
    assert.deepEqual(textKeys("OTP_SMS"), [
      {
        key: "message.otp_sms.text",
        placeholders: [
          "DisplayName",
          "FirstName",
          "LastName",
          "LoginName",
          "OrgName",
          "InstanceName",
          "Code",
          "Expiry",
        ],
      },
    ]);
  });
});

describe("branding", () => {
  it("takes the organization's colours and logo", () => {
    const message = render("PASSWORD_RESET", {
      branding: {
        primaryColor: "#FC0",
        backgroundColor: "#fafafa",
        fontColor: "#202020",
        logoUrl: "https://cdn.example.com/l.png",
      },
    }) as RenderedEmail;
    assert.ok(message.html.includes('bgcolor="#ffcc00"'));
    // Dark text on the yellow button, and the written-out link in the text colour (yellow would not read).
    assert.match(message.html, /color:#111827;text-decoration:none/);
    assert.match(message.html, /color:#202020;text-decoration:underline/);
    assert.ok(message.html.includes("background-color:#fafafa"));
    assert.ok(message.html.includes('<img src="https://cdn.example.com/l.png" alt="ACME Identity"'));
  });

  it("falls back to the defaults for anything but a hex colour and an http(s) logo", () => {
    const message = render("PASSWORD_RESET", {
      branding: {
        primaryColor: "red;background:url(https://evil.example/x)",
        fontColor: "expression(alert(1))",
        logoUrl: "javascript:alert(1)",
      },
    }) as RenderedEmail;
    assert.doesNotMatch(message.html, /evil|expression|javascript|<img/);
    assert.ok(message.html.includes('bgcolor="#2553d8"'));
    assert.match(
      message.html,
      /font-weight:600;color:#111827;">ACME Identity<\/p>/,
      "the name instead of a logo",
    );
    assert.ok(contrast("#2553d8", "#ffffff") >= 4.5, "the default button reads");
  });
});
