/**
 * Request validation from the `platform.validate.v1` options declared in the protos
 * (proto/platform/validate/v1/validate.proto). One rule set per field, enforced for every protocol by the
 * interceptor of src/api/interceptors.ts (REST goes through the same interceptor chain).
 *
 * Rules apply to a field only when it is set (a present message or `optional` field, a selected oneof
 * member, a non-zero implicit scalar, a non-empty list or map); `required` is the rule that fails on an
 * unset field. The first violation, depth-first in field order, throws an `InvalidArgumentError` whose
 * message starts with the dotted snake_case path of the field, e.g.
 * `settings.default_language.key: must match ^[a-z]{2}$` or `filters[1].name.name: must be at most 200
 * characters`; list elements are addressed as `[index]`, map entries as `["key"]`, an unset required oneof
 * by the oneof name.
 */
import {
  type DescEnum,
  type DescField,
  type DescMessage,
  type DescOneof,
  getOption,
  hasOption,
  type MessageShape,
  ScalarType,
} from "@bufbuild/protobuf";
import { type ReflectList, type ReflectMap, type ReflectMessage, reflect } from "@bufbuild/protobuf/reflect";
import { InvalidArgumentError } from "../errors.ts";
import {
  type FieldRules,
  field as fieldRulesExt,
  oneof_required,
} from "../gen/platform/validate/v1/validate_pb.ts";

/** Scalar rules compiled once per field. */
interface ValueRules {
  minLen?: number;
  maxLen?: number;
  pattern?: { source: string; re: RegExp };
  uri: boolean;
  definedOnly?: Set<number>;
  constTrue: boolean;
  gte?: bigint;
  lte?: bigint;
}

interface FieldPlan {
  field: DescField;
  required: boolean;
  minItems?: number;
  maxItems?: number;
  unique: boolean;
  /** Rules for the value, or for each element of a list / each value of a map. */
  value?: ValueRules;
  /** Extra rules for each element of a list (`items`). */
  items?: ValueRules;
  /** The (element) message type has rules somewhere below it. */
  visit: boolean;
}

interface MessagePlan {
  fields: FieldPlan[];
  requiredOneofs: DescOneof[];
}

const plans = new WeakMap<DescMessage, MessagePlan>();
const hasRulesCache = new WeakMap<DescMessage, boolean>();

/**
 * Validates `message` (of type `schema`) recursively against the declared rules.
 * @throws InvalidArgumentError naming the first violating field.
 */
export function validate<Desc extends DescMessage>(schema: Desc, message: MessageShape<Desc>): void {
  if (!hasRules(schema)) return;
  validateMessage(reflect(schema, message), "");
}

/**
 * Rejects a NUL character (U+0000) in any string of `message`: fields, list elements, map keys and values,
 * oneof members, at any depth (google.protobuf.Struct values included). PostgreSQL cannot store NUL in
 * text or jsonb, and no name, ID or URL needs it, so it is refused for every field.
 * @throws InvalidArgumentError `<field path>: must not contain NUL (U+0000)`, the first such string
 * depth-first in field order (a map key is reported at its map field).
 */
export function rejectNul<Desc extends DescMessage>(schema: Desc, message: MessageShape<Desc>): void {
  if (hasStrings(schema)) rejectNulIn(reflect(schema, message), "");
}

const NUL_MESSAGE = "must not contain NUL (U+0000)";
const hasStringsCache = new WeakMap<DescMessage, boolean>();

/** Whether a message type has a string field (or map key), itself or in a message type below it. */
function hasStrings(desc: DescMessage, visiting: Set<DescMessage> = new Set()): boolean {
  const cached = hasStringsCache.get(desc);
  if (cached !== undefined) return cached;
  if (visiting.has(desc)) return false;
  visiting.add(desc);
  let result = false;
  for (const f of desc.fields) {
    const child = messageOf(f);
    if (
      scalarOf(f) === ScalarType.STRING ||
      (f.fieldKind === "map" && f.mapKey === ScalarType.STRING) ||
      (child !== undefined && hasStrings(child, visiting))
    ) {
      result = true;
      break;
    }
  }
  visiting.delete(desc);
  if (result || visiting.size === 0) hasStringsCache.set(desc, result);
  return result;
}

function rejectNulIn(msg: ReflectMessage, prefix: string): void {
  for (const f of msg.fields) {
    if (!msg.isSet(f)) continue;
    const path = join(prefix, f.name);
    switch (f.fieldKind) {
      case "scalar":
        if (f.scalar === ScalarType.STRING) rejectNulValue(msg.get(f), path);
        break;
      case "message":
        if (hasStrings(f.message)) rejectNulIn(msg.get(f), path);
        break;
      case "list": {
        if (f.listKind === "enum" || (f.listKind === "scalar" && f.scalar !== ScalarType.STRING)) break;
        if (f.listKind === "message" && !hasStrings(f.message)) break;
        let i = 0;
        for (const item of msg.get(f) as ReflectList) rejectNulElement(item, `${path}[${i++}]`);
        break;
      }
      case "map":
        for (const [key, value] of msg.get(f) as ReflectMap) {
          if (typeof key === "string" && key.includes("\0")) fail(path, NUL_MESSAGE);
          rejectNulElement(value, `${path}[${JSON.stringify(String(key))}]`);
        }
        break;
    }
  }
}

function rejectNulElement(item: unknown, path: string): void {
  if (isReflectMessage(item)) rejectNulIn(item, path);
  else rejectNulValue(item, path);
}

function rejectNulValue(value: unknown, path: string): void {
  if (typeof value === "string" && value.includes("\0")) fail(path, NUL_MESSAGE);
}

/** Whether a message type declares any rule, itself or in a message type below it. */
export function hasRules(desc: DescMessage, visiting: Set<DescMessage> = new Set()): boolean {
  const cached = hasRulesCache.get(desc);
  if (cached !== undefined) return cached;
  if (visiting.has(desc)) return false; // a cycle adds nothing new; the answer comes from the other fields
  visiting.add(desc);
  let result = false;
  if (!desc.file.name.startsWith("google/protobuf/")) {
    for (const oneof of desc.oneofs) {
      if (hasOption(oneof, oneof_required)) result = true;
    }
    for (const f of desc.fields) {
      if (result) break;
      if (hasOption(f, fieldRulesExt)) result = true;
      else {
        const child = messageOf(f);
        if (child && hasRules(child, visiting)) result = true;
      }
    }
  }
  visiting.delete(desc);
  // Only cache definite answers made outside a cycle (a `false` inside a cycle may be incomplete).
  if (result || visiting.size === 0) hasRulesCache.set(desc, result);
  return result;
}

function messageOf(f: DescField): DescMessage | undefined {
  switch (f.fieldKind) {
    case "message":
      return f.message;
    case "list":
      return f.listKind === "message" ? f.message : undefined;
    case "map":
      return f.mapKind === "message" ? f.message : undefined;
    default:
      return undefined;
  }
}

function enumOf(f: DescField): DescEnum | undefined {
  switch (f.fieldKind) {
    case "enum":
      return f.enum;
    case "list":
      return f.listKind === "enum" ? f.enum : undefined;
    case "map":
      return f.mapKind === "enum" ? f.enum : undefined;
    default:
      return undefined;
  }
}

function compileValueRules(r: FieldRules, en: DescEnum | undefined, where: string): ValueRules | undefined {
  const v: ValueRules = { uri: r.uri, constTrue: r.constTrue };
  let any = r.uri || r.constTrue;
  if (r.minLen !== undefined) {
    v.minLen = Number(r.minLen);
    any = true;
  }
  if (r.maxLen !== undefined) {
    v.maxLen = Number(r.maxLen);
    any = true;
  }
  if (r.pattern !== undefined) {
    try {
      v.pattern = { source: r.pattern, re: new RegExp(r.pattern, "u") };
    } catch (e) {
      throw new Error(`invalid validation pattern on ${where}: ${(e as Error).message}`);
    }
    any = true;
  }
  if (r.definedOnly && en) {
    v.definedOnly = new Set(en.values.map((x) => x.number));
    any = true;
  }
  if (r.gte !== undefined) {
    v.gte = r.gte;
    any = true;
  }
  if (r.lte !== undefined) {
    v.lte = r.lte;
    any = true;
  }
  return any ? v : undefined;
}

function planFor(desc: DescMessage): MessagePlan {
  let plan = plans.get(desc);
  if (plan) return plan;
  plan = { fields: [], requiredOneofs: desc.oneofs.filter((o) => getOption(o, oneof_required)) };
  for (const f of desc.fields) {
    const child = messageOf(f);
    const visit = child !== undefined && hasRules(child);
    const fp: FieldPlan = { field: f, required: false, unique: false, visit };
    if (hasOption(f, fieldRulesExt)) {
      const r = getOption(f, fieldRulesExt);
      const en = enumOf(f);
      fp.required = r.required;
      fp.unique = r.unique;
      if (r.minItems !== undefined) fp.minItems = Number(r.minItems);
      if (r.maxItems !== undefined) fp.maxItems = Number(r.maxItems);
      fp.value = compileValueRules(r, en, f.toString());
      if (r.items) fp.items = compileValueRules(r.items, en, f.toString());
    }
    if (
      fp.visit ||
      fp.required ||
      fp.unique ||
      fp.value ||
      fp.items ||
      fp.minItems !== undefined ||
      fp.maxItems !== undefined
    ) {
      plan.fields.push(fp);
    }
  }
  plans.set(desc, plan);
  return plan;
}

function join(prefix: string, name: string): string {
  return prefix === "" ? name : `${prefix}.${name}`;
}

function fail(path: string, message: string): never {
  throw new InvalidArgumentError(message, path);
}

function validateMessage(msg: ReflectMessage, prefix: string): void {
  const plan = planFor(msg.desc);
  for (const oneof of plan.requiredOneofs) {
    if (msg.oneofCase(oneof) === undefined) {
      fail(join(prefix, oneof.name), `one of ${oneof.fields.map((f) => f.name).join(", ")} must be set`);
    }
  }
  for (const fp of plan.fields) {
    const f = fp.field;
    const path = join(prefix, f.name);
    if (!msg.isSet(f)) {
      if (fp.required) fail(path, "is required");
      continue;
    }
    switch (f.fieldKind) {
      case "list": {
        const list = msg.get(f) as ReflectList;
        checkCount(fp, list.size, path);
        const seen = fp.unique ? new Set<string>() : undefined;
        let i = 0;
        for (const item of list) {
          const p = `${path}[${i++}]`;
          if (seen) {
            const key = uniqueKey(item);
            if (seen.has(key)) fail(p, "must be unique");
            seen.add(key);
          }
          checkElement(fp, item, p);
        }
        break;
      }
      case "map": {
        const map = msg.get(f) as ReflectMap;
        checkCount(fp, map.size, path);
        for (const [k, v] of map) checkElement(fp, v, `${path}[${JSON.stringify(String(k))}]`);
        break;
      }
      case "message":
        if (fp.visit) validateMessage(msg.get(f), path);
        break;
      default:
        if (fp.value) checkValue(fp.value, f, msg.get(f), path);
    }
  }
}

function checkCount(fp: FieldPlan, size: number, path: string): void {
  if (fp.minItems !== undefined && size < fp.minItems) fail(path, `must have at least ${fp.minItems} items`);
  if (fp.maxItems !== undefined && size > fp.maxItems) fail(path, `must have at most ${fp.maxItems} items`);
}

function checkElement(fp: FieldPlan, item: unknown, path: string): void {
  if (isReflectMessage(item)) {
    if (fp.visit) validateMessage(item, path);
    return;
  }
  if (fp.value) checkValue(fp.value, fp.field, item, path);
  if (fp.items) checkValue(fp.items, fp.field, item, path);
}

function isReflectMessage(v: unknown): v is ReflectMessage {
  return typeof v === "object" && v !== null && "desc" in v && "message" in v && "oneofCase" in v;
}

function uniqueKey(item: unknown): string {
  if (isReflectMessage(item)) {
    return JSON.stringify(item.message, (_k, v) =>
      typeof v === "bigint" ? v.toString() : v instanceof Uint8Array ? Array.from(v) : v,
    );
  }
  if (item instanceof Uint8Array) return `b:${Array.from(item).join(",")}`;
  return `${typeof item}:${String(item)}`;
}

function scalarOf(f: DescField): ScalarType | undefined {
  if (f.fieldKind === "scalar") return f.scalar;
  if (f.fieldKind === "list" && f.listKind === "scalar") return f.scalar;
  if (f.fieldKind === "map" && f.mapKind === "scalar") return f.scalar;
  return undefined;
}

function checkValue(r: ValueRules, f: DescField, value: unknown, path: string): void {
  if (r.definedOnly && typeof value === "number" && !r.definedOnly.has(value)) {
    fail(path, "must be a defined value");
  }
  const scalar = scalarOf(f);
  if (scalar === ScalarType.STRING && typeof value === "string") {
    if (r.minLen !== undefined || r.maxLen !== undefined) {
      const len = codePoints(value);
      if (r.minLen !== undefined && len < r.minLen) {
        fail(path, r.minLen === 1 ? "must not be empty" : `must be at least ${r.minLen} characters`);
      }
      if (r.maxLen !== undefined && len > r.maxLen) fail(path, `must be at most ${r.maxLen} characters`);
    }
    if (r.pattern && !r.pattern.re.test(value)) fail(path, `must match ${r.pattern.source}`);
    if (r.uri && !isUri(value)) fail(path, "must be a URI");
    return;
  }
  if (scalar === ScalarType.BYTES && value instanceof Uint8Array) {
    if (r.minLen !== undefined && value.length < r.minLen) fail(path, `must be at least ${r.minLen} bytes`);
    if (r.maxLen !== undefined && value.length > r.maxLen) fail(path, `must be at most ${r.maxLen} bytes`);
    return;
  }
  if (scalar === ScalarType.BOOL) {
    if (r.constTrue && value !== true) fail(path, "must be true");
    return;
  }
  if (typeof value === "number" || typeof value === "bigint") {
    if (r.gte !== undefined && below(value, r.gte)) fail(path, `must be greater than or equal to ${r.gte}`);
    if (r.lte !== undefined && below(r.lte, value)) fail(path, `must be less than or equal to ${r.lte}`);
  }
}

/** a < b for mixed number / bigint. */
function below(a: number | bigint, b: number | bigint): boolean {
  return a < b;
}

function codePoints(s: string): number {
  let n = 0;
  for (const _ of s) n++;
  return n;
}

/** An absolute URI without whitespace; http(s) URIs need a host. */
export function isUri(s: string): boolean {
  if (s === "" || /\s/.test(s) || !/^[a-zA-Z][a-zA-Z0-9+.-]*:/.test(s)) return false;
  let u: URL;
  try {
    u = new URL(s);
  } catch {
    return false;
  }
  if ((u.protocol === "http:" || u.protocol === "https:") && u.hostname === "") return false;
  return true;
}
