/**
 * The texts API's format and the ICU messages the renderers format (the login UI's translator,
 * src/login/i18n.ts, and the messages, src/notifications/messages/texts.ts).
 *
 * An administrator writes plain text with placeholders `{{.Name}}` (spaces inside the braces allowed:
 * `{{ .Name }}`). Everything else is literal: on the way to ICU, apostrophes are doubled and every run of
 * `{`, `}`, `<`, `>` is quoted, so ICU syntax (`{x}`, `{n, plural, …}`, `'`, `#`, tags) in a text is shown
 * as typed and never interpreted. Anything between `{{` and `}}` that is not one of the key's placeholders
 * (`{{.Evil}}`, `{{ }}`, `{{ printf "x" }}`), and a `{{` never closed, is refused: an attempt at a
 * template, not text.
 *
 * Built-in texts go the other way for display (`fromIcu`): arguments become `{{.Name}}`; a plural or
 * select shows its `other` form, the plural's number (`#`) as its placeholder.
 */
import { createFormatters, createIntlCache } from "@formatjs/intl";

export type TextPart = { literal: string } | { placeholder: string };

const PLACEHOLDER = /^\s*\.([A-Za-z][A-Za-z0-9_]*)\s*$/;

/** `{{.Name}}`: a placeholder as written in a text. */
export const placeholderOf = (name: string): string => `{{.${name}}}`;

/**
 * The literal runs and placeholders of a text, or why it is not one: a `{{` without its `}}`, or
 * something between them that is not a placeholder among `allowed`.
 */
export function parseText(text: string, allowed: readonly string[]): TextPart[] | { problem: string } {
  const parts: TextPart[] = [];
  let literal = "";
  let at = 0;
  while (at < text.length) {
    const open = text.indexOf("{{", at);
    if (open < 0) {
      literal += text.slice(at);
      break;
    }
    literal += text.slice(at, open);
    const close = text.indexOf("}}", open + 2);
    if (close < 0) return { problem: `"{{" is never closed by "}}"; placeholders are written {{.Name}}` };
    const inner = text.slice(open + 2, close);
    const name = PLACEHOLDER.exec(inner)?.[1];
    if (name === undefined || !allowed.includes(name)) {
      const list = allowed.map(placeholderOf).join(", ") || "none";
      return { problem: `"{{${inner}}}" is not a placeholder of this text (allowed: ${list})` };
    }
    if (literal) parts.push({ literal });
    literal = "";
    parts.push({ placeholder: name });
    at = close + 2;
  }
  if (literal) parts.push({ literal });
  return parts;
}

/** Literal text as ICU: apostrophes doubled, runs of ICU syntax characters quoted. */
export function escapeIcu(literal: string): string {
  return literal.replace(/'/g, "''").replace(/[{}<>]+/g, (run) => `'${run}'`);
}

/** The ICU message of a parsed text; `argumentOf` names the ICU argument of each placeholder. */
export function toIcu(parts: readonly TextPart[], argumentOf: (placeholder: string) => string): string {
  return parts
    .map((part) => ("literal" in part ? escapeIcu(part.literal) : `{${argumentOf(part.placeholder)}}`))
    .join("");
}

const parsing = createFormatters(createIntlCache());
type MessageElement = ReturnType<ReturnType<typeof parsing.getMessageFormat>["getAst"]>[number];

/**
 * A built-in ICU message in the API's format; `placeholderOf` names the placeholder of each ICU argument
 * (the login UI's `{instance}` is `Instance`).
 */
export function fromIcu(message: string, placeholderName: (argument: string) => string): string {
  const ast = parsing.getMessageFormat(message, "en", undefined, { ignoreTag: true }).getAst();
  const render = (elements: readonly MessageElement[], pound?: string): string =>
    elements
      .map((element) => {
        // Element types of @formatjs/icu-messageformat-parser: 0 literal, 1 argument, 2 number, 3 date,
        // 4 time, 5 select, 6 plural, 7 `#` (the plural's number), 8 tag (none: parsed as text).
        switch (element.type) {
          case 0:
            return element.value;
          case 1:
          case 2:
          case 3:
          case 4:
            return placeholderOf(placeholderName(element.value));
          case 5:
          case 6: {
            const option = element.options.other ?? Object.values(element.options)[0];
            const name = placeholderOf(placeholderName(element.value));
            return option ? render(option.value, element.type === 6 ? name : pound) : "";
          }
          case 7:
            return pound ?? "#";
          default:
            return "";
        }
      })
      .join("");
  return render(ast);
}

/** The ICU arguments a message uses, in order of appearance (in every branch of its plurals and selects). */
export function argumentsOf(message: string): string[] {
  const ast = parsing.getMessageFormat(message, "en", undefined, { ignoreTag: true }).getAst();
  const names: string[] = [];
  const walk = (elements: readonly MessageElement[]) => {
    for (const element of elements) {
      if (element.type >= 1 && element.type <= 6 && "value" in element) {
        const name = String(element.value);
        if (!names.includes(name)) names.push(name);
      }
      if (element.type === 5 || element.type === 6)
        for (const option of Object.values(element.options)) walk(option.value);
    }
  };
  walk(ast);
  return names;
}
