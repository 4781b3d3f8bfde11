import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { supportedLanguages } from "../../domain/settings/languages.ts";
import { catalogues, formatExpiry, formatText, messageLanguage, textProblem } from "./texts.ts";
import { LINK_HINT_KEY, MESSAGE_TYPES, MESSAGES, textKeys } from "./types.ts";

/** The argument names of an ICU message: `{name}`, `{name, plural, ...}`. */
function argumentsOf(message: string): string[] {
  return [...new Set([...message.matchAll(/\{\s*([A-Za-z_]\w*)\s*[,}]/g)].map((m) => m[1]))].sort();
}

const SMS_KEYS = MESSAGE_TYPES.filter((t) => MESSAGES[t].channel === "SMS").map(
  (t) => `message.${t.toLowerCase()}.text`,
);

describe("message catalogues", () => {
  it("every language has every key of en.json with the same arguments, and nothing else", () => {
    const en = catalogues.en;
    for (const lang of supportedLanguages) {
      const catalogue = catalogues[lang];
      assert.ok(catalogue, `catalogue ${lang}`);
      assert.deepEqual(Object.keys(catalogue).sort(), Object.keys(en).sort(), `keys of ${lang}.json`);
      for (const [key, message] of Object.entries(en)) {
        assert.deepEqual(argumentsOf(catalogue[key]), argumentsOf(message), `arguments of ${lang} ${key}`);
        assert.ok(catalogue[key].trim().length > 0, `${lang} ${key} is empty`);
      }
    }
  });

  it("en.json has exactly the keys of the message types, and each text passes the check of overrides", () => {
    const keys = new Set(MESSAGE_TYPES.flatMap((type) => textKeys(type).map((k) => k.key)));
    assert.deepEqual(Object.keys(catalogues.en).sort(), [...keys].sort());
    for (const lang of supportedLanguages) {
      for (const [key, text] of Object.entries(catalogues[lang])) {
        assert.equal(textProblem(key, text, lang), undefined, `${lang} ${key}`);
      }
    }
  });

  it("e-mail texts use ’ (an ASCII apostrophe can quote braces); render.test.ts checks the SMS alphabet", () => {
    for (const lang of supportedLanguages) {
      for (const [key, text] of Object.entries(catalogues[lang])) {
        if (!SMS_KEYS.includes(key)) assert.ok(!text.includes("'"), `${lang} ${key} has an ASCII apostrophe`);
      }
    }
  });
});

describe("overridden texts", () => {
  const key = "message.password_reset.text";
  const values = { DisplayName: "Ada", LoginName: "ada@example.com", Code: "123456", Expiry: "1 hour" };

  it("replace the catalogue's text, in the language they are given for", () => {
    const texts = (lang: string, k: string) =>
      lang === "de" && k === key ? "Code {Code} für {LoginName}, gültig {Expiry}." : undefined;
    assert.equal(formatText("de", key, values, texts), "Code 123456 für ada@example.com, gültig 1 hour.");
    assert.equal(
      formatText("en", key, { ...values, URL: "u", OrgName: "o" }, texts),
      formatText("en", key, { ...values, URL: "u", OrgName: "o" }),
    );
  });

  it("may use an ICU select over their placeholders", () => {
    assert.equal(textProblem(key, "{FirstName, select, Ada {Hi Ada} other {Hello}}, code {Code}"), undefined);
  });

  it("are refused with an unknown placeholder, even in a branch, and then never formatted", () => {
    for (const text of [
      "Your code: {Code}. {Password}",
      "{Code} {FirstName, select, Ada {{Secret}} other {x}}",
      "{Code} {constructor}",
    ]) {
      assert.match(textProblem(key, text) ?? "", /unknown placeholder/, text);
    }
    assert.match(textProblem("message.otp_sms.text", "{URL} {Code}") ?? "", /unknown placeholder \{URL\}/);
    // At render time the catalogue's text stands in for it: nothing but the listed values is ever filled in.
    const texts = () => "Your code: {Code}. {Password}";
    assert.equal(
      formatText("en", key, { ...values, URL: "u", OrgName: "o" }, texts),
      catalogueText("en", key),
    );
  });

  function catalogueText(lang: string, k: string) {
    return formatText(lang, k, { ...values, URL: "u", OrgName: "o" });
  }

  it("are refused when they do not parse, are empty, too long, lack a required code or name no text", () => {
    assert.match(textProblem(key, "Code {Code") ?? "", /not a valid message/);
    assert.match(textProblem(key, "  ") ?? "", /empty/);
    assert.match(textProblem(key, `{Code} ${"x".repeat(2000)}`) ?? "", /longer than 2000/);
    assert.match(
      textProblem("message.otp_sms.text", "Your sign-in code is on its way") ?? "",
      /must contain \{Code\}/,
    );
    assert.equal(textProblem("message.password_reset.text", "Choose a new password."), undefined);
    assert.match(textProblem("message.otp_sms.subject", "x") ?? "", /unknown text key/);
    assert.match(
      textProblem("message.password_changed.button", "{Code}") ?? "",
      /unknown placeholder \{Code\}/,
    );
    assert.match(textProblem(LINK_HINT_KEY, "Open {URL}") ?? "", /allowed: none/);
    for (const format of ["number", "date", "time", "plural, other {#}"]) {
      assert.match(textProblem(key, `{Code, ${format}}`) ?? "", /placeholders are text: \{Code\}/, format);
    }
  });

  it("treat markup and quoted braces as literal text", () => {
    const texts = () => "<b>{Code}</b> '{Code}'";
    assert.equal(formatText("en", "message.otp_sms.text", values, texts), "<b>123456</b> {Code}");
  });
});

describe("language", () => {
  it("is the preferred language with texts, else the default, within the allowed ones", () => {
    assert.equal(messageLanguage({ preferred: "de-CH", defaultLanguage: "en" }), "de");
    assert.equal(messageLanguage({ preferred: "es", defaultLanguage: "fr" }), "fr");
    assert.equal(messageLanguage({ preferred: null, defaultLanguage: "it" }), "it");
    assert.equal(messageLanguage({ preferred: "es", defaultLanguage: "pt" }), "en");
    assert.equal(messageLanguage({ preferred: "de", defaultLanguage: "it", allowed: ["en", "it"] }), "it");
    assert.equal(messageLanguage({ preferred: "de", defaultLanguage: "es", allowed: ["fr"] }), "fr");
    assert.equal(messageLanguage({ preferred: "constructor", defaultLanguage: "__proto__" }), "en");
    assert.throws(() => formatText("en", "constructor", {}), /no text "constructor"/);
  });

  it("writes the expiry in words of the language", () => {
    assert.equal(formatExpiry(600, "en"), "10 minutes");
    assert.equal(formatExpiry(3600, "de"), "1 Stunde");
    // French puts a no-break space between number and unit.
    assert.equal(formatExpiry(259_200, "fr"), "3\u00a0jours");
    assert.equal(formatExpiry(90, "it"), "2 minuti");
    assert.throws(() => formatExpiry(0, "en"), /expiry/);
  });
});
