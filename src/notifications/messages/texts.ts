/**
 * The texts of the messages: ICU message catalogues per language (./locales/<lang>.json, formatted with
 * @formatjs/intl like the login UI's), the choice of language, and the texts that override the catalogue.
 *
 * Overridden texts cannot inject anything: a text is an ICU message whose arguments may only be the
 * placeholders of its message type (./types.ts), as text or in a `select`. A text naming any other
 * argument, or one that does not parse, is refused by `textProblem` (the check a text-settings API runs
 * before it stores a text); should one reach `formatText` anyway (stored before a placeholder was
 * withdrawn, say) it is ignored and the catalogue's text is used. Markup is never interpreted
 * (`ignoreTag`): `<b>` is literal text and the HTML part escapes it. Values are arguments, never parsed as
 * messages themselves.
 *
 * ICU quoting: an ASCII apostrophe before `{` or `}` quotes it, so the catalogues use ’ in e-mail texts.
 * SMS texts use ASCII apostrophes (never before a brace): ’ is not in the GSM 7-bit alphabet, though
 * ./render.ts replaces such look-alikes in any case.
 *
 * Adding a language: ./locales/<lang>.json with every key of en.json (a test checks this), and the
 * language in `supportedLanguages` (src/domain/settings/languages.ts), which the login UI shares.
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import { createFormatters, createIntlCache } from "@formatjs/intl";
import { defaultLanguage, supportedLanguages } from "../../domain/settings/languages.ts";
import { MESSAGES, type Placeholder, parseKey } from "./types.ts";

const localesDir = path.join(import.meta.dirname, "locales");

/** The catalogues, by language: key → ICU message. */
export const catalogues: Readonly<Record<string, Readonly<Record<string, string>>>> = Object.fromEntries(
  supportedLanguages.map((lang) => [
    lang,
    JSON.parse(readFileSync(path.join(localesDir, `${lang}.json`), "utf8")) as Record<string, string>,
  ]),
);

export interface LanguageChoice {
  /** The recipient's preferred language (the user's profile), if any; region subtags are dropped. */
  preferred?: string | null;
  /** The instance's (or organization's) default language. */
  defaultLanguage: string;
  /** The languages the language settings allow; every supported language when absent. */
  allowed?: readonly string[];
}

const primary = (tag: string | null | undefined) => tag?.trim().split(/[-_]/, 1)[0]?.toLowerCase();

/** The recipient's preferred language if there are texts in it, else the default, else English. */
export function messageLanguage(choice: LanguageChoice): string {
  const allowed = choice.allowed?.map(primary);
  const usable = (lang: string | undefined): lang is string =>
    lang !== undefined && Object.hasOwn(catalogues, lang) && (!allowed || allowed.includes(lang));
  const preferred = primary(choice.preferred);
  if (usable(preferred)) return preferred;
  const fallback = primary(choice.defaultLanguage);
  if (usable(fallback)) return fallback;
  return allowed?.find(usable) ?? defaultLanguage;
}

/** An administrator's text for `key` in the message's language; undefined: the catalogue's. */
export type TextLookup = (language: string, key: string) => string | undefined;

/** The values of a message's placeholders (a text using one that is absent fails to format). */
export type PlaceholderValues = Readonly<Partial<Record<Placeholder, string>>>;

type Formatters = ReturnType<typeof createFormatters>;
type MessageFormat = ReturnType<Formatters["getMessageFormat"]>;
type MessageElement = ReturnType<MessageFormat["getAst"]>[number];

/** The catalogue's messages, compiled once; overrides get formatters of their own per message (below). */
const catalogueFormatters = createFormatters(createIntlCache());

function compile(formatters: Formatters, text: string, lang: string): MessageFormat {
  return formatters.getMessageFormat(text, lang, undefined, { ignoreTag: true });
}

function format(message: MessageFormat, values: PlaceholderValues): string {
  const out = message.format(values);
  return Array.isArray(out) ? out.join("") : String(out);
}

/**
 * The argument names of a parsed message, in every branch of its selects, and whether it formats one as
 * a number, date, time or plural: every placeholder is text, which those would misread.
 */
function argumentsOf(
  elements: readonly MessageElement[],
  found = { names: new Set<string>(), formatted: new Set<string>() },
) {
  for (const element of elements) {
    // Element types of @formatjs/icu-messageformat-parser: 0 literal (its value is text), 1 argument,
    // 2 number, 3 date, 4 time, 5 select, 6 plural, 7 `#`, 8 tag (none: tags are parsed as text).
    if (element.type !== 0 && element.type !== 7 && "value" in element) {
      found.names.add(String(element.value));
      if (element.type !== 1 && element.type !== 5) found.formatted.add(String(element.value));
    }
    if ("options" in element)
      for (const option of Object.values(element.options)) argumentsOf(option.value, found);
    if ("children" in element) argumentsOf(element.children, found);
  }
  return found;
}

/** Values for trying a text: every placeholder, shaped like the real ones. */
const SAMPLE: PlaceholderValues = {
  DisplayName: "Ada Lovelace",
  FirstName: "Ada",
  LastName: "Lovelace",
  LoginName: "ada@example.com",
  OrgName: "Example",
  InstanceName: "Example ID",
  Code: "123456",
  URL: "https://id.example.com/ui/login",
  Expiry: "1 hour",
};

/** The longest text accepted: a paragraph or two, not a document. */
export const MAX_TEXT_LENGTH = 2000;

/** An override compiled, or why it cannot be the text of `key`. */
function checked(key: string, text: string, lang: string): { message: MessageFormat } | { problem: string } {
  const target = parseKey(key);
  if (!target) return { problem: `unknown text key "${key}"` };
  if (!text.trim()) return { problem: "the text is empty" };
  if (text.length > MAX_TEXT_LENGTH)
    return { problem: `the text is longer than ${MAX_TEXT_LENGTH} characters` };
  let message: MessageFormat;
  try {
    // Formatters of its own: administrators' texts would otherwise pile up in the module's cache.
    message = compile(createFormatters(createIntlCache()), text, lang);
  } catch (error) {
    return { problem: `the text is not a valid message: ${(error as Error).message}` };
  }
  const { names: used, formatted } = argumentsOf(message.getAst());
  const allowed = new Set<string>(target.placeholders);
  const unknown = [...used].filter((name) => !allowed.has(name));
  const list = (names: readonly string[]) => names.map((n) => `{${n}}`).join(", ") || "none";
  if (unknown.length) {
    return { problem: `unknown placeholder ${list(unknown)}; allowed: ${list(target.placeholders)}` };
  }
  if (formatted.size) {
    return {
      problem: `placeholders are text: ${list([...formatted])} may not be a number, date, time or plural`,
    };
  }
  if (target.type && target.part === "text") {
    const missing = MESSAGES[target.type].required.filter((name) => !used.has(name));
    if (missing.length)
      return { problem: `the text must contain ${missing.map((n) => `{${n}}`).join(", ")}` };
  }
  try {
    format(message, SAMPLE);
  } catch (error) {
    return { problem: `the text cannot be formatted: ${(error as Error).message}` };
  }
  return { message };
}

/**
 * Why `text` cannot be the text of `key`, or undefined when it can: the key must name a message's text
 * (./types.ts), the text must parse as an ICU message, use only the message's placeholders (as text, or
 * in a `select`), contain the required ones and format.
 */
export function textProblem(key: string, text: string, lang: string = defaultLanguage): string | undefined {
  const result = checked(key, text, lang);
  return "problem" in result ? result.problem : undefined;
}

/**
 * The text of `key` in `lang` with `values` filled in: the override `texts` gives, if it passes
 * `textProblem` and formats, else the catalogue's (an unknown key throws: every text is in the catalogue).
 */
export function formatText(lang: string, key: string, values: PlaceholderValues, texts?: TextLookup): string {
  const override = texts?.(lang, key);
  if (override !== undefined) {
    const result = checked(key, override, lang);
    if ("message" in result) {
      try {
        return format(result.message, values);
      } catch {
        // A value it cannot take (`{Code, number}` with a code of letters): the catalogue's text instead.
      }
    }
  }
  const catalogue = Object.hasOwn(catalogues, lang) ? catalogues[lang] : undefined;
  const message = catalogue && Object.hasOwn(catalogue, key) ? catalogue[key] : undefined;
  if (message === undefined) throw new Error(`messages: no text "${key}" in ${lang}`);
  return format(compile(catalogueFormatters, message, lang), values);
}

/**
 * How long a code stays valid, in words: whole days or hours when it is a whole number of them, else
 * minutes (rounded up), e.g. "3 days", "1 hour", "10 minutes" ("3 Tage", "1 heure", "10 minuti").
 */
export function formatExpiry(seconds: number, lang: string): string {
  if (!Number.isFinite(seconds) || seconds <= 0) throw new Error(`messages: expiry of ${seconds} s`);
  const [amount, unit] =
    seconds % 86_400 === 0
      ? [seconds / 86_400, "day"]
      : seconds % 3_600 === 0
        ? [seconds / 3_600, "hour"]
        : [Math.ceil(seconds / 60), "minute"];
  const format = `${lang} ${unit}`;
  let formatter = unitFormats.get(format);
  if (!formatter) {
    formatter = new Intl.NumberFormat(lang, { style: "unit", unit, unitDisplay: "long" });
    unitFormats.set(format, formatter);
  }
  return formatter.format(amount);
}

/** Number formats by language and unit: making one costs some 30 µs, using one 1 µs. */
const unitFormats = new Map<string, Intl.NumberFormat>();
