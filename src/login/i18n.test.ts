import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { supportedLanguages } from "../domain/settings/languages.ts";
import { acceptedLanguages, catalogues, chooseLanguage, translator } from "./i18n.ts";

/** The argument names of an ICU message: `{name}`, `{name, plural, ...}`. */
function argumentsOf(message: string): string[] {
  return [...new Set([...message.matchAll(/\{\s*([A-Za-z_]\w*)\s*[,}]/g)].map((m) => m[1]))].sort();
}

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

  it("formats messages, plurals and refuses unknown keys", () => {
    assert.equal(translator("en").t("policy.length", { min: 8 }), "at least 8 characters");
    assert.equal(translator("de").t("policy.length", { min: 1 }), "mindestens 1 Zeichen");
    assert.equal(translator("fr").t("error.tooManyAttempts", { seconds: 1 }).includes("1 seconde"), true);
    assert.throws(() => translator("it").t("no.such.key"), /no message "no.such.key"/);
  });
});

describe("language choice", () => {
  const all = { defaultLanguage: "en", allowed: ["en", "de", "fr", "it"] };

  it("reads Accept-Language by q-value, dropping q=0 and regions", () => {
    assert.deepEqual(acceptedLanguages("fr-CH, fr;q=0.9, en;q=0.8, de;q=0.7, *;q=0.5"), [
      "fr",
      "fr",
      "en",
      "de",
    ]);
    assert.deepEqual(acceptedLanguages("en;q=0.2, it"), ["it", "en"]);
    assert.deepEqual(acceptedLanguages("de;q=0"), []);
    assert.deepEqual(acceptedLanguages(undefined), []);
  });

  it("ui_locales first, then Accept-Language, then the default, within the allowed languages", () => {
    assert.equal(chooseLanguage(all, ["de-CH", "en"], "fr"), "de");
    assert.equal(chooseLanguage(all, ["es"], "it, en;q=0.5"), "it");
    assert.equal(chooseLanguage(all, [], undefined), "en");
    const restricted = { defaultLanguage: "it", allowed: ["en", "it"] };
    assert.equal(chooseLanguage(restricted, ["de"], "fr"), "it");
    assert.equal(chooseLanguage({ defaultLanguage: "de", allowed: ["fr"] }, [], "de"), "fr");
  });
});
