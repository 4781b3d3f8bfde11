/**
 * Whether a text is an SVG document: well-formed XML (elements, attributes, character and the five
 * predefined entity references, comments, CDATA, processing instructions) whose root element is `svg` in
 * the SVG namespace. A DOCTYPE is refused: without it there are no entity definitions to expand (no
 * "billion laughs"), and an SVG needs none. Only the structure is checked; the content is not sanitized: the
 * image is shown through `<img>` and served with a sandboxing CSP (src/login/branding-assets.ts), where
 * scripts never run.
 */

const NAME = /[A-Za-z_:][A-Za-z0-9_.:-]*/y;
const SPACE = /[ \t\r\n]*/y;
const REFERENCE = /&(?:amp|lt|gt|quot|apos|#[0-9]+|#x[0-9a-fA-F]+);/y;
const SVG_NAMESPACE = "http://www.w3.org/2000/svg";

class Reader {
  pos = 0;
  constructor(readonly text: string) {}

  match(pattern: RegExp): string | undefined {
    pattern.lastIndex = this.pos;
    const found = pattern.exec(this.text);
    if (!found) return undefined;
    this.pos = pattern.lastIndex;
    return found[0];
  }

  skipSpace(): boolean {
    const before = this.pos;
    this.match(SPACE);
    return this.pos > before;
  }

  startsWith(prefix: string): boolean {
    return this.text.startsWith(prefix, this.pos);
  }

  /** Skips past `end`; false when it never comes. */
  skipPast(end: string): string | undefined {
    const at = this.text.indexOf(end, this.pos);
    if (at < 0) return undefined;
    const skipped = this.text.slice(this.pos, at);
    this.pos = at + end.length;
    return skipped;
  }
}

/** Text between markup: no `<`, every `&` a valid reference. */
function validText(text: string): boolean {
  for (let i = text.indexOf("&"); i >= 0; i = text.indexOf("&", i + 1)) {
    REFERENCE.lastIndex = i;
    if (!REFERENCE.test(text)) return false;
  }
  return !text.includes("<");
}

/** A comment, processing instruction or CDATA section at the reader; undefined: none there, false: bad. */
function misc(reader: Reader, inContent: boolean): boolean | undefined {
  if (reader.startsWith("<!--")) {
    reader.pos += 4;
    const body = reader.skipPast("-->");
    return body !== undefined && !body.includes("--");
  }
  if (reader.startsWith("<?")) {
    reader.pos += 2;
    const target = reader.match(NAME);
    if (!target || target.toLowerCase() === "xml") return false;
    return reader.skipPast("?>") !== undefined;
  }
  if (inContent && reader.startsWith("<![CDATA[")) {
    reader.pos += 9;
    return reader.skipPast("]]>") !== undefined;
  }
  return undefined;
}

/** A start tag's attributes up to `>` or `/>`; undefined when malformed. */
function attributes(reader: Reader): { values: Map<string, string>; empty: boolean } | undefined {
  const values = new Map<string, string>();
  for (;;) {
    const spaced = reader.skipSpace();
    if (reader.startsWith("/>")) {
      reader.pos += 2;
      return { values, empty: true };
    }
    if (reader.startsWith(">")) {
      reader.pos += 1;
      return { values, empty: false };
    }
    if (!spaced) return undefined;
    const name = reader.match(NAME);
    if (!name || values.has(name)) return undefined;
    reader.skipSpace();
    if (!reader.startsWith("=")) return undefined;
    reader.pos += 1;
    reader.skipSpace();
    const quote = reader.text[reader.pos];
    if (quote !== '"' && quote !== "'") return undefined;
    reader.pos += 1;
    const value = reader.skipPast(quote);
    if (value === undefined || !validText(value)) return undefined;
    values.set(name, value);
  }
}

export function isSvgDocument(input: string): boolean {
  const reader = new Reader(input.startsWith("\uFEFF") ? input.slice(1) : input);
  if (reader.startsWith("<?xml")) {
    if (reader.skipPast("?>") === undefined) return false;
  }
  // prolog: space, comments, processing instructions (a DOCTYPE is refused)
  for (;;) {
    reader.skipSpace();
    const found = misc(reader, false);
    if (found === false) return false;
    if (found === undefined) break;
  }
  const stack: string[] = [];
  let root = true;
  while (reader.pos < reader.text.length) {
    if (stack.length === 0 && !root) {
      // after the root element: space and misc only
      reader.skipSpace();
      if (reader.pos >= reader.text.length) break;
      if (misc(reader, false) !== true) return false;
      continue;
    }
    if (!reader.startsWith("<")) {
      if (stack.length === 0) return false;
      const next = reader.text.indexOf("<", reader.pos);
      const end = next < 0 ? reader.text.length : next;
      if (!validText(reader.text.slice(reader.pos, end))) return false;
      reader.pos = end;
      continue;
    }
    if (stack.length > 0) {
      const found = misc(reader, true);
      if (found === false) return false;
      if (found) continue;
    }
    if (reader.startsWith("</")) {
      reader.pos += 2;
      const name = reader.match(NAME);
      reader.skipSpace();
      if (!name || name !== stack.pop() || !reader.startsWith(">")) return false;
      reader.pos += 1;
      continue;
    }
    reader.pos += 1;
    const name = reader.match(NAME);
    if (!name) return false;
    const attrs = attributes(reader);
    if (!attrs) return false;
    if (root) {
      if (name !== "svg" || attrs.values.get("xmlns") !== SVG_NAMESPACE) return false;
      root = false;
    }
    if (!attrs.empty) stack.push(name);
  }
  return !root && stack.length === 0;
}
