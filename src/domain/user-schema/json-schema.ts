/**
 * JSON Schema (draft 2020-12) of user schemas, with ajv: checking a schema before it is stored, and
 * checking users' data against it. A schema may refer only to itself (`$ref` starting with `#`): nothing is
 * ever fetched. `format` is an annotation, as draft 2020-12 defines it by default (not checked).
 * Compiled validators are kept per (instance, schema ID, revision): a revision never changes.
 *
 * `pattern` and `patternProperties` run on RE2 (re2js, pure JavaScript), whose time is linear in the length
 * of the value whatever the expression: on the backtracking RegExp, a pattern like `^(a+)+$` takes time
 * exponential in the value's length and blocks the whole server for one request. RE2 has no backreferences
 * and no lookaround: a schema using them is refused when it is stored (docs/user-schemas.md "Patterns").
 */
import { Ajv2020, type ErrorObject, type ValidateFunction } from "ajv/dist/2020.js";
import { RE2JS } from "re2js";
import { InvalidArgumentError } from "../../errors.ts";

/** The keyword of field permissions (./field-access.ts). */
export const PERMISSION_KEYWORD = "urn:platform:schema:permission";
export const DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema";
/** Bounds of a schema and of one user's data, as compact JSON in UTF-8. */
export const MAX_SCHEMA_BYTES = 64 * 1024;
export const MAX_DATA_BYTES = 64 * 1024;

const ACCESS = { enum: ["rw", "r", "w", ""] };

/**
 * Whether an ECMA-262 pattern holds a backreference (`\1`…`\9`, `\k<name>`): RE2 has none, and re2js's
 * translation would read `\k<name>` as the literal text `k<name>` instead of refusing it.
 */
function hasBackreference(pattern: string): boolean {
  for (let i = 0; i < pattern.length; i++) {
    if (pattern[i] !== "\\") continue;
    const next = pattern[i + 1] ?? "";
    if (next === "k" || (next >= "1" && next <= "9")) return true;
    i++; // the escaped character
  }
  return false;
}

/**
 * ajv's regular-expression engine for user schemas (`code.regExp`): a pattern must be an ECMA-262 regular
 * expression in Unicode mode (JSON Schema's dialect, as the login UI's browsers read it) that RE2 can run;
 * it is matched by RE2 only.
 */
export const linearRegExp = Object.assign(
  (pattern: string) => {
    try {
      new RegExp(pattern, "u"); // the syntax check only: nothing is matched with it
    } catch (error) {
      throw new Error(`pattern ${JSON.stringify(pattern)} is invalid: ${(error as Error).message}`);
    }
    const unsupported = (why: string) =>
      new Error(
        `pattern ${JSON.stringify(pattern)} is not supported (patterns run on a linear-time engine, without backreferences or lookaround): ${why}`,
      );
    if (hasBackreference(pattern)) throw unsupported("it holds a backreference");
    let re2: RE2JS;
    try {
      re2 = RE2JS.compile(RE2JS.translateRegExp(pattern));
    } catch (error) {
      throw unsupported((error as Error).message);
    }
    // toString: ajv shares compiled patterns by it
    return { test: (value: string) => re2.test(value), toString: () => `re2:${pattern}` };
  },
  { code: "linearRegExp" },
);

function newAjv() {
  const ajv = new Ajv2020({
    // user schemas may carry annotations ajv does not know (`x-…`, `examples` of other vocabularies)
    strict: false,
    allErrors: false,
    validateFormats: false,
    // user schemas never join ajv's registry: their `$id`s must not meet across instances
    addUsedSchema: false,
    logger: false,
    code: { regExp: linearRegExp },
    // no loadSchema: a reference ajv cannot resolve within the schema fails the compilation
  });
  ajv.addKeyword({
    keyword: PERMISSION_KEYWORD,
    metaSchema: { type: "object", properties: { owner: ACCESS, self: ACCESS }, additionalProperties: false },
  });
  return ajv;
}

const ajv = newAjv();

/** `/a/b` of a JSON pointer token list; `""` is the whole document (RFC 6901). */
export function pointer(tokens: readonly string[]): string {
  return tokens.map((t) => `/${t.replaceAll("~", "~0").replaceAll("/", "~1")}`).join("");
}

const at = (path: string) => (path === "" ? "at the root" : `at ${path}`);

function byteLength(value: unknown): number {
  return Buffer.byteLength(JSON.stringify(value), "utf8");
}

/** References to other documents (remote `$ref`, `$dynamicRef`), and keywords ajv cannot be told about. */
function referenceProblem(node: unknown, path: string[]): string | undefined {
  if (Array.isArray(node)) {
    for (const [i, item] of node.entries()) {
      const problem = referenceProblem(item, [...path, String(i)]);
      if (problem) return problem;
    }
    return undefined;
  }
  if (node === null || typeof node !== "object") return undefined;
  for (const [key, value] of Object.entries(node)) {
    if ((key === "$ref" || key === "$dynamicRef") && typeof value === "string" && !value.startsWith("#"))
      return `${at(pointer([...path, key]))}: ${key} ${JSON.stringify(value)} refers to another document; only references within the schema (starting with #) are allowed`;
    // enum and const hold data, not schemas
    if (key === "enum" || key === "const") continue;
    const problem = referenceProblem(value, [...path, key]);
    if (problem) return problem;
  }
  return undefined;
}

function firstError(errors: ErrorObject[] | null | undefined): ErrorObject | undefined {
  return errors?.[0];
}

/**
 * Throws INVALID_ARGUMENT on `field` naming the first problem when `schema` is not a JSON Schema of draft
 * 2020-12 Platform can use: larger than MAX_SCHEMA_BYTES, another `$schema`, a reference to another document,
 * a keyword with an invalid value (meta-schema), or one ajv cannot compile (an invalid `pattern` or one RE2
 * cannot run, an unresolvable `#` reference).
 */
export function checkSchema(schema: Record<string, unknown>, field: string): void {
  const size = byteLength(schema);
  if (size > MAX_SCHEMA_BYTES)
    throw new InvalidArgumentError(`must be at most ${MAX_SCHEMA_BYTES} bytes as JSON (is ${size})`, field);
  if (schema.$schema !== undefined && schema.$schema !== DRAFT_2020_12)
    throw new InvalidArgumentError(
      `at /$schema: must be ${DRAFT_2020_12} (the draft Platform supports) or absent`,
      field,
    );
  const reference = referenceProblem(schema, []);
  if (reference) throw new InvalidArgumentError(reference, field);
  if (!ajv.validateSchema(schema)) {
    const error = firstError(ajv.errors);
    throw new InvalidArgumentError(
      `is not a valid JSON Schema (draft 2020-12): ${at(error?.instancePath ?? "")}: ${error?.message ?? "invalid"}`,
      field,
    );
  }
  try {
    ajv.compile(schema);
  } catch (error) {
    throw new InvalidArgumentError(
      `is not a usable JSON Schema: ${(error as Error).message.split("\n")[0]}`,
      field,
    );
  } finally {
    ajv.removeSchema(schema);
  }
}

/** Compiled validators by `instance/schema/revision` (a revision's schema never changes). */
const compiled = new Map<string, ValidateFunction>();
const CACHE_SIZE = 500;

/** The validator of a schema's revision, compiled once per process. */
export function validatorOf(
  key: { instanceId: string; schemaId: string; revision: number },
  schema: Record<string, unknown>,
): ValidateFunction {
  const cacheKey = `${key.instanceId}/${key.schemaId}/${key.revision}`;
  const cached = compiled.get(cacheKey);
  if (cached) return cached;
  let validate: ValidateFunction;
  try {
    validate = ajv.compile(schema);
  } finally {
    ajv.removeSchema(schema);
  }
  // the oldest entry goes first (a Map iterates in insertion order)
  if (compiled.size >= CACHE_SIZE) compiled.delete(compiled.keys().next().value!);
  compiled.set(cacheKey, validate);
  return validate;
}

/** How many validators are cached (tests: proof of compiling once). */
export function compiledValidators(): number {
  return compiled.size;
}

/**
 * Throws INVALID_ARGUMENT on `field` naming the JSON pointer of the first problem when `data` is larger
 * than MAX_DATA_BYTES or does not match the schema.
 */
export function checkData(validate: ValidateFunction, data: Record<string, unknown>, field: string): void {
  const size = byteLength(data);
  if (size > MAX_DATA_BYTES)
    throw new InvalidArgumentError(`must be at most ${MAX_DATA_BYTES} bytes as JSON (is ${size})`, field);
  if (validate(data)) return;
  const error = firstError(validate.errors);
  if (!error) throw new InvalidArgumentError("does not match the schema", field);
  let path = error.instancePath;
  let message = error.message ?? "does not match the schema";
  if (error.keyword === "required") {
    path += pointer([String(error.params.missingProperty)]);
    message = "is required";
  } else if (error.keyword === "additionalProperties" || error.keyword === "unevaluatedProperties") {
    path += pointer([String(error.params.additionalProperty ?? error.params.unevaluatedProperty)]);
    message = "is not allowed by the schema";
  }
  throw new InvalidArgumentError(`${at(path)}: ${message}`, field);
}
