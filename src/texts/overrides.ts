/**
 * Administrators' texts: checking one before it is stored, and turning the settings layers of a language
 * (src/query/settings.ts, inherited system → instance → organization) into what the renderers take: the
 * login UI's override messages by catalogue key, the messages' `TextLookup`.
 */
import type { ResolvedContext } from "../auth/caller.ts";
import { textsCategory } from "../domain/settings/texts.ts";
import { textProblem as messageTextProblem, type TextLookup } from "../notifications/messages/index.ts";
import type { SettingsLayer } from "../query/settings.ts";
import { parseText, toIcu } from "./format.ts";
import { TEXT_KEYS, type TextKeyInfo } from "./keys.ts";

/**
 * Why `text` cannot be the text of `key` in `language`, or undefined when it can: the key must be known,
 * the text not blank, its placeholders the key's (./format.ts), and a message's text must keep what its
 * message needs (a code-only message's text must show `{{.Code}}`).
 */
export function textProblem(key: string, text: string, language: string): string | undefined {
  const info = TEXT_KEYS.get(key);
  if (!info) return `unknown text key "${key}" (GET /settings/v3alpha/texts/_keys lists them)`;
  if (!text.trim()) return "the text is empty; reset it to use the inherited text";
  const parts = parseText(text, info.placeholders);
  if ("problem" in parts) return parts.problem;
  if (info.kind === "message") {
    const problem = messageTextProblem(key, toIcu(parts, info.argumentOf), language);
    // its wording names ICU arguments (`{Code}`): the API writes them {{.Code}}
    if (problem) return problem.replace(/\{([A-Za-z]+)\}/g, "{{.$1}}");
  }
  return undefined;
}

/** The ICU message of a stored text, or undefined when it does not pass (any more). */
function icuOf(info: TextKeyInfo, text: unknown): string | undefined {
  if (typeof text !== "string" || !text.trim()) return undefined;
  const parts = parseText(text, info.placeholders);
  return "problem" in parts ? undefined : toIcu(parts, info.argumentOf);
}

/** The most specific text of each key the layers set. */
function effectiveTexts(layers: readonly SettingsLayer[]): Map<string, unknown> {
  const texts = new Map<string, unknown>();
  for (const layer of layers) for (const [key, value] of Object.entries(layer.values)) texts.set(key, value);
  return texts;
}

/** The login UI's overrides in one language: catalogue key → ICU message (empty when nobody set any). */
export function loginOverrides(layers: readonly SettingsLayer[]): Record<string, string> {
  const overrides: Record<string, string> = {};
  for (const [key, text] of effectiveTexts(layers)) {
    const info = TEXT_KEYS.get(key);
    if (info?.kind !== "login") continue;
    const icu = icuOf(info, text);
    if (icu !== undefined) overrides[info.catalogueKey] = icu;
  }
  return overrides;
}

/** The messages' overrides in one language (undefined when nobody set any). */
export function messageTexts(layers: readonly SettingsLayer[], language: string): TextLookup | undefined {
  const overrides = new Map<string, string>();
  for (const [key, text] of effectiveTexts(layers)) {
    const info = TEXT_KEYS.get(key);
    if (info?.kind !== "message") continue;
    const icu = icuOf(info, text);
    if (icu !== undefined) overrides.set(key, icu);
  }
  if (overrides.size === 0) return undefined;
  return (lang, key) => (lang === language ? overrides.get(key) : undefined);
}

/**
 * The messages' texts by organization and language, for the outbox's worker: read at most every `ttlMs`
 * per organization and language, and again after `forget` (any settings event).
 */
export class MessageTextCache {
  private readonly entries = new Map<string, { value: TextLookup | undefined; until: number }>();

  constructor(
    private readonly layersOf: (category: string, context: ResolvedContext) => Promise<SettingsLayer[]>,
    private readonly ttlMs = 5_000,
  ) {}

  /** The texts of the organization (`orgId`; else the instance) in `language`. */
  async lookup(instanceId: string, orgId: string | undefined, language: string) {
    const key = `${instanceId}\u0000${orgId ?? ""}\u0000${language}`;
    const cached = this.entries.get(key);
    if (cached && cached.until >= Date.now()) return cached.value;
    if (this.entries.size > 10_000) this.entries.clear();
    const context: ResolvedContext = orgId
      ? { type: "org", instanceId, orgId }
      : { type: "instance", instanceId };
    const value = messageTexts(await this.layersOf(textsCategory(language), context), language);
    this.entries.set(key, { value, until: Date.now() + this.ttlMs });
    return value;
  }

  forget(): void {
    this.entries.clear();
  }
}
