/**
 * Proto comments for the OpenAPI document.
 *
 * The descriptors embedded in the generated code (src/gen) carry no source info (protoc-gen-es strips it),
 * so comments are read from a `buf build` image at generation time (`extractComments`, used by
 * scripts/gen-openapi.ts) and committed as ./comments.json next to docs/openapi.json; the server builds the
 * same document from the generated descriptors plus that file (`bundledComments`).
 *
 * Keys are the fully qualified proto names: `pkg.Message`, `pkg.Enum`, `pkg.Service`, and for members
 * `<parent>.<name>`: fields and oneofs (`pkg.Message.field`), methods (`pkg.Service.Method`) and enum
 * values (`pkg.Enum.VALUE`, scoped by the enum, unlike protobuf's own value names).
 *
 * Tags: a comment line starting with `@name` starts a tag that runs to the next tag or the end of the
 * comment; tags are not part of the description. Supported by the builder: `@example <JSON>` on a method
 * (the request body example), a message or a field.
 */
import type {
  DescEnum,
  DescEnumValue,
  DescField,
  DescMessage,
  DescMethod,
  DescOneof,
  DescService,
} from "@bufbuild/protobuf";
import type { DescriptorProto, EnumDescriptorProto, FileDescriptorSet } from "@bufbuild/protobuf/wkt";
import bundled from "./comments.json" with { type: "json" };

/** Comment text by key (see the module comment). */
export type Comments = Readonly<Record<string, string>>;

/** The comments committed with the generated code (written by `npm run generate`). */
export const bundledComments: Comments = bundled;

export type CommentedDesc =
  | DescMessage
  | DescEnum
  | DescEnumValue
  | DescField
  | DescOneof
  | DescService
  | DescMethod;

/** The comments.json key of a descriptor. */
export function commentKey(desc: CommentedDesc): string {
  switch (desc.kind) {
    case "message":
    case "enum":
    case "service":
      return desc.typeName;
    case "field":
    case "oneof":
    case "enum_value":
    case "rpc":
      return `${desc.parent.typeName}.${desc.name}`;
  }
}

/**
 * The leading (else trailing) comments of every message, enum, enum value, field, oneof, service and
 * method declared in the named files of a FileDescriptorSet that includes source info, keys sorted.
 */
export function extractComments(
  set: FileDescriptorSet,
  fileNames: ReadonlySet<string>,
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const file of set.file) {
    if (!fileNames.has(file.name)) continue;
    const keys = new Map<string, string>();
    const prefix = file.package === "" ? "" : `${file.package}.`;
    const addEnum = (e: EnumDescriptorProto, path: number[], scope: string) => {
      const name = scope + e.name;
      keys.set(path.join(","), name);
      for (const [i, v] of e.value.entries()) keys.set([...path, 2, i].join(","), `${name}.${v.name}`);
    };
    const addMessage = (m: DescriptorProto, path: number[], scope: string) => {
      const name = scope + m.name;
      keys.set(path.join(","), name);
      for (const [i, f] of m.field.entries()) keys.set([...path, 2, i].join(","), `${name}.${f.name}`);
      for (const [i, o] of m.oneofDecl.entries()) keys.set([...path, 8, i].join(","), `${name}.${o.name}`);
      for (const [i, n] of m.nestedType.entries()) addMessage(n, [...path, 3, i], `${name}.`);
      for (const [i, e] of m.enumType.entries()) addEnum(e, [...path, 4, i], `${name}.`);
    };
    for (const [i, m] of file.messageType.entries()) addMessage(m, [4, i], prefix);
    for (const [i, e] of file.enumType.entries()) addEnum(e, [5, i], prefix);
    for (const [i, s] of file.service.entries()) {
      const name = prefix + s.name;
      keys.set(`6,${i}`, name);
      for (const [j, m] of s.method.entries()) keys.set(`6,${i},2,${j}`, `${name}.${m.name}`);
    }
    for (const loc of file.sourceCodeInfo?.location ?? []) {
      const key = keys.get(loc.path.join(","));
      if (key === undefined) continue;
      const text = cleanComment(loc.leadingComments ?? "") || cleanComment(loc.trailingComments ?? "");
      if (text !== "") out[key] = text;
    }
  }
  return Object.fromEntries(Object.entries(out).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

/** Removes the one space after `//` of every line, trailing blanks and leading/trailing empty lines. */
export function cleanComment(raw: string): string {
  const lines = raw.split("\n").map((l) => (l.startsWith(" ") ? l.slice(1) : l).trimEnd());
  while (lines.length > 0 && lines[0] === "") lines.shift();
  while (lines.length > 0 && lines[lines.length - 1] === "") lines.pop();
  return lines.join("\n");
}

export interface ParsedComment {
  /** The comment without its tags. */
  text: string;
  /** Tag name (without `@`) → value (the rest of the tag's first line and the following lines). */
  tags: Map<string, string>;
}

/** Splits a comment into its description and its `@tags`. */
export function parseComment(comment: string | undefined): ParsedComment {
  const tags = new Map<string, string>();
  const text: string[] = [];
  let tag: { name: string; lines: string[] } | undefined;
  const flush = () => {
    if (tag) tags.set(tag.name, tag.lines.join("\n").trim());
  };
  for (const line of (comment ?? "").split("\n")) {
    const m = /^@([A-Za-z][\w-]*)(?:\s+(.*))?$/.exec(line.trim());
    if (m) {
      flush();
      tag = { name: m[1], lines: [m[2] ?? ""] };
    } else if (tag) {
      tag.lines.push(line);
    } else {
      text.push(line);
    }
  }
  flush();
  return { text: text.join("\n").trim(), tags };
}

/** The first sentence of a comment (up to a period followed by an upper-case word, or the first paragraph). */
export function firstSentence(text: string): string {
  const para = (text.split(/\n\s*\n/)[0] ?? "").replace(/\s+/g, " ").trim();
  const m = /^(.*?[.!?])(?=\s+[A-Z]|$)/.exec(para);
  return (m ? m[1] : para).trim();
}
