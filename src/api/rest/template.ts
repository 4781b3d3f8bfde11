/**
 * google.api.http path templates → Fastify route paths.
 *
 * Template grammar (google/api/http.proto):
 *   Template = "/" Segments [ Verb ] ; Segments = Segment { "/" Segment } ;
 *   Segment  = "*" | "**" | LITERAL | Variable ; Variable = "{" FieldPath [ "=" Segments ] "}" ;
 *   Verb     = ":" LITERAL ;
 *
 * `{id}` / `{id=*}` become a Fastify parameter (`:p0`; field paths contain dots, which Fastify parameter
 * names cannot), a trailing `**` becomes Fastify's wildcard `*`, literal colons are escaped (`::`). A
 * variable over several segments (`{name=things/*}`) is rebuilt from its literals and parameters. Fastify
 * (find-my-way) percent-decodes parameter values after matching, so an ID with percent-encoded slashes
 * (`/things/a%2Fb`) matches one segment and arrives as `a/b`.
 */

export type VariablePart = { literal: string } | { param: string };

export interface PathVariable {
  /** Field path of the bound field, as written in the template (proto names, dotted). */
  fieldPath: string[];
  /** How to rebuild the value from the matched parameters. */
  parts: VariablePart[];
}

export interface ParsedTemplate {
  /** The Fastify route path. */
  path: string;
  variables: PathVariable[];
}

/** Parses a path template; throws on templates Fastify cannot express. */
export function parsePathTemplate(template: string): ParsedTemplate {
  if (!template.startsWith("/")) throw new Error(`path template ${template}: must start with "/"`);
  const { segments, verb } = splitTemplate(template);
  const variables: PathVariable[] = [];
  const out: string[] = [];
  let paramCount = 0;
  let anonCount = 0;
  let sawWildcard = false;

  const convert = (seg: string, isLast: boolean, parts: VariablePart[] | undefined): string => {
    if (sawWildcard) throw new Error(`path template ${template}: "**" must be the last segment`);
    if (seg === "**") {
      if (!isLast) throw new Error(`path template ${template}: "**" must be the last segment`);
      sawWildcard = true;
      parts?.push({ param: "*" });
      return "*";
    }
    if (seg === "*") {
      const name = parts ? `p${paramCount++}` : `_a${anonCount++}`;
      parts?.push({ param: name });
      return `:${name}`;
    }
    if (seg === "" || /[{}*]/.test(seg))
      throw new Error(`path template ${template}: invalid segment "${seg}"`);
    parts?.push({ literal: seg });
    return seg.replaceAll(":", "::");
  };

  segments.forEach((seg, i) => {
    const isLast = i === segments.length - 1;
    if (seg.startsWith("{")) {
      if (!seg.endsWith("}")) throw new Error(`path template ${template}: invalid variable "${seg}"`);
      const inner = seg.slice(1, -1);
      const eq = inner.indexOf("=");
      const fieldPath = (eq < 0 ? inner : inner.slice(0, eq)).trim();
      if (!/^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$/.test(fieldPath)) {
        throw new Error(`path template ${template}: invalid field path "${fieldPath}"`);
      }
      const sub = eq < 0 ? ["*"] : inner.slice(eq + 1).split("/");
      const parts: VariablePart[] = [];
      sub.forEach((s, j) => {
        out.push(convert(s, isLast && j === sub.length - 1, parts));
      });
      variables.push({ fieldPath: fieldPath.split("."), parts });
    } else {
      out.push(convert(seg, isLast, undefined));
    }
  });

  let path = `/${out.join("/")}`;
  if (verb !== undefined) {
    const last = segments[segments.length - 1];
    if (last === undefined || last.startsWith("{") || last === "*" || last === "**") {
      throw new Error(`path template ${template}: a verb is only supported after a literal segment`);
    }
    path += `::${verb}`;
  }
  return { path, variables };
}

/** Splits the template into top-level segments (variables kept whole) and the verb. */
function splitTemplate(template: string): { segments: string[]; verb?: string } {
  const segments: string[] = [];
  let depth = 0;
  let cur = "";
  let verb: string | undefined;
  for (let i = 1; i < template.length; i++) {
    const c = template[i];
    if (c === "{") depth++;
    if (c === "}") depth--;
    if (depth < 0 || depth > 1) throw new Error(`path template ${template}: unbalanced braces`);
    if (depth === 0 && c === "/") {
      segments.push(cur);
      cur = "";
    } else if (depth === 0 && c === ":") {
      verb = template.slice(i + 1);
      if (!/^[A-Za-z0-9_.~-]+$/.test(verb)) throw new Error(`path template ${template}: invalid verb`);
      break;
    } else {
      cur += c;
    }
  }
  if (depth !== 0) throw new Error(`path template ${template}: unbalanced braces`);
  segments.push(cur);
  return { segments, verb };
}

/** The value of a variable from Fastify's (decoded) route parameters. */
export function variableValue(v: PathVariable, params: Record<string, string | undefined>): string {
  return v.parts.map((p) => ("literal" in p ? p.literal : (params[p.param] ?? ""))).join("/");
}
