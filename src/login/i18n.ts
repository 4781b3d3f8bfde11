/**
 * Texts of the login UI: ICU message catalogues per language (./locales/<lang>.json, formatted with
 * @formatjs/intl) and the choice of language for a request.
 *
 * The language is the one picked on the pages (the `platform_lang` cookie, ./language-picker.ts), else
 * the first of `ui_locales` (the auth request's), then of `Accept-Language` (by q-value), that the
 * context's restricted languages allow (language settings, src/services/settings/
 * languages.ts), else the context's default language. Region subtags fall back to their language
 * (`de-CH` → `de`).
 *
 * Adding a language: add ./locales/<lang>.json with every key of en.json (a test checks this) and the
 * language to `supportedLanguages` (src/domain/settings/languages.ts).
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import { createFormatters, createIntl, createIntlCache, type IntlShape } from "@formatjs/intl";
import type { ResolvedContext } from "../auth/caller.ts";
import { defaultLanguage, LANGUAGE, supportedLanguages } from "../domain/settings/languages.ts";
import { resolveSetting, type SettingsLayer } from "../query/settings.ts";

const localesDir = path.join(import.meta.dirname, "locales");

/** The catalogues, by language: message key → ICU message. */
export const catalogues: Record<string, Record<string, string>> = Object.fromEntries(
  supportedLanguages.map((lang) => [
    lang,
    JSON.parse(readFileSync(path.join(localesDir, `${lang}.json`), "utf8")) as Record<string, string>,
  ]),
);

export type MessageValues = Record<string, string | number>;

/** Formats the texts of one language. */
export interface Translator {
  /** The language (`<html lang>`). */
  lang: string;
  /** The message `key` with `values` filled in (throws for an unknown key: every text is in the catalogue). */
  t(key: string, values?: MessageValues): string;
  /** A date and time in the language's format. */
  dateTime(date: Date): string;
}

const cache = createIntlCache();
type MessageFormat = ReturnType<ReturnType<typeof createFormatters>["getMessageFormat"]>;

function formatted(message: MessageFormat, values: MessageValues | undefined): string {
  const out = message.format(values);
  return Array.isArray(out) ? out.join("") : String(out);
}
const translators = new Map<string, Translator>();

export function translator(lang: string): Translator {
  const known = translators.get(lang);
  if (known) return known;
  const messages = catalogues[lang] ?? catalogues[defaultLanguage];
  const intl: IntlShape<string> = createIntl(
    {
      locale: lang,
      messages,
      onError: (error) => {
        throw error;
      },
    },
    cache,
  );
  // Each message compiled once and formatted directly: intl.formatMessage costs some 13 µs a call (a page
  // makes several), a compiled message's format well under 1 µs. Errors (a missing value) still throw.
  const formatters = createFormatters(cache);
  const compiled = new Map<string, MessageFormat>();
  const made: Translator = {
    lang,
    t(key, values) {
      let message = compiled.get(key);
      if (!message) {
        if (!Object.hasOwn(messages, key)) throw new Error(`login UI: no message "${key}" in ${lang}`);
        message = formatters.getMessageFormat(messages[key], lang);
        compiled.set(key, message);
      }
      return formatted(message, values);
    },
    dateTime: (date) => intl.formatDate(date, { dateStyle: "medium", timeStyle: "short" }),
  };
  translators.set(lang, made);
  return made;
}

/**
 * `base` with administrators' texts (catalogue key → ICU message; src/texts/overrides.ts): each compiled
 * once, when first used, with markup off (a `<b>` in a text is text, escaped like every value). A text
 * that cannot be formatted with the page's values gives way to the catalogue's.
 */
export function withOverrides(base: Translator, overrides: Readonly<Record<string, string>>): Translator {
  const formatters = createFormatters(createIntlCache());
  const compiled = new Map<string, MessageFormat>();
  return {
    lang: base.lang,
    dateTime: base.dateTime,
    t(key, values) {
      const override = Object.hasOwn(overrides, key) ? overrides[key] : undefined;
      if (override === undefined) return base.t(key, values);
      try {
        let message = compiled.get(key);
        if (!message) {
          message = formatters.getMessageFormat(override, base.lang, undefined, { ignoreTag: true });
          compiled.set(key, message);
        }
        return formatted(message, values);
      } catch {
        return base.t(key, values);
      }
    },
  };
}

/** The effective language settings of an instance (or of an organization in it). */
export interface LanguageChoice {
  defaultLanguage: string;
  /** The languages the UI may use, in the settings' order. */
  allowed: string[];
}

export async function languageSettings(
  layersOf: (category: string, context: ResolvedContext) => Promise<SettingsLayer[]>,
  instanceId: string,
  orgId?: string,
): Promise<LanguageChoice> {
  const context = orgId
    ? { type: "org" as const, instanceId, orgId }
    : { type: "instance" as const, instanceId };
  const layers = await layersOf(LANGUAGE, context);
  const owner = orgId ? { type: 3 as const, id: orgId } : { type: 2 as const, id: instanceId };
  const restricted = resolveSetting<string[]>(layers, "restricted_languages", owner, [
    ...supportedLanguages,
  ]).value;
  const allowed = restricted.filter((lang) => lang in catalogues);
  return {
    defaultLanguage: resolveSetting<string>(layers, "default_language", owner, defaultLanguage).value,
    allowed: allowed.length ? allowed : [defaultLanguage],
  };
}

/** `de-CH;q=0.8` → `de`; undefined for `*` and malformed tags. */
function primaryLanguage(tag: string): string | undefined {
  const lang = tag.trim().split(/[-_]/, 1)[0]?.toLowerCase();
  return lang && /^[a-z]{2,3}$/.test(lang) ? lang : undefined;
}

/** The languages of an Accept-Language header, best first (q=0 dropped). */
export function acceptedLanguages(header: string | undefined): string[] {
  if (!header) return [];
  return header
    .split(",")
    .map((part, index) => {
      const [tag, ...params] = part.split(";");
      const q = params.map((p) => p.trim()).find((p) => p.startsWith("q="));
      const quality = q ? Number(q.slice(2)) : 1;
      return { lang: primaryLanguage(tag), quality: Number.isFinite(quality) ? quality : 0, index };
    })
    .filter((entry) => entry.lang !== undefined && entry.quality > 0)
    .sort((a, b) => b.quality - a.quality || a.index - b.index)
    .map((entry) => entry.lang!);
}

/**
 * The language for a request: the language picked on the pages (`picked`, the cookie), then ui_locales,
 * then Accept-Language, then the default, within `allowed`.
 */
export function chooseLanguage(
  choice: LanguageChoice,
  uiLocales: readonly string[],
  acceptLanguage: string | undefined,
  picked?: string,
): string {
  const allowed = new Set(choice.allowed);
  const wanted = [
    ...(picked ? [primaryLanguage(picked)] : []),
    ...uiLocales.map(primaryLanguage),
    ...acceptedLanguages(acceptLanguage),
  ];
  const match = wanted.find((lang) => lang !== undefined && allowed.has(lang));
  if (match) return match;
  return allowed.has(choice.defaultLanguage) ? choice.defaultLanguage : choice.allowed[0];
}
