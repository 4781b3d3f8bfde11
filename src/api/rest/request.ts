/**
 * Builds the request message of a REST call the way grpc-gateway does (docs/api.md "REST"):
 * the JSON body is the value of the field named in `body` (`*`: the whole message; a repeated field: a JSON
 * array; an empty body: not set), path variables fill their fields, every other field may come from query
 * parameters with dotted names (`query.limit=10&ctx.org_id=1`, snake_case or lowerCamelCase), enums by name
 * or number, repeated fields as repeated parameters, bools as true/false/1/0.
 *
 * Everything is merged into one proto3 JSON object and parsed with `fromJson`, so type errors, unknown
 * fields and oneof conflicts all become INVALID_ARGUMENT naming the problem.
 */
import {
  create,
  type DescField,
  type DescMessage,
  fromJson,
  type JsonValue,
  type Message,
  type Registry,
  ScalarType,
} from "@bufbuild/protobuf";
import { reflect } from "@bufbuild/protobuf/reflect";
import { FieldMaskSchema } from "@bufbuild/protobuf/wkt";
import { InvalidArgumentError } from "../../errors.ts";
import { type PathVariable, variableValue } from "./template.ts";

export interface RequestBinding {
  schema: DescMessage;
  /** "" (no body), "*" (whole message) or the proto name of the body field. */
  body: string;
  variables: PathVariable[];
  /** The HTTP method: a PATCH fills an absent `update_mask` from its JSON body. */
  httpMethod?: string;
}

type JsonObject = { [k: string]: JsonValue };

/** Field lookup by proto name or JSON (lowerCamelCase) name. */
const fieldIndex = new WeakMap<DescMessage, Map<string, DescField>>();
export function findField(desc: DescMessage, name: string): DescField | undefined {
  let idx = fieldIndex.get(desc);
  if (!idx) {
    idx = new Map();
    for (const f of desc.fields) {
      idx.set(f.jsonName, f);
      idx.set(f.name, f);
    }
    fieldIndex.set(desc, idx);
  }
  return idx.get(name);
}

/** Resolves a dotted name to fields; undefined when a segment is unknown or not a singular message. */
function resolvePath(desc: DescMessage, names: string[]): DescField[] | undefined {
  const out: DescField[] = [];
  let cur: DescMessage | undefined = desc;
  for (const [i, n] of names.entries()) {
    if (!cur) return undefined;
    const f = findField(cur, n);
    if (!f) return undefined;
    out.push(f);
    if (i < names.length - 1) {
      if (f.fieldKind !== "message") return undefined;
      cur = f.message;
    }
  }
  return out;
}

export function parseJsonBody(raw: string | undefined): JsonValue | undefined {
  if (raw === undefined || raw.trim() === "") return undefined;
  try {
    return JSON.parse(raw) as JsonValue;
  } catch (e) {
    throw new InvalidArgumentError(`invalid JSON body: ${(e as Error).message}`);
  }
}

/** Builds and parses the request message. */
export function buildRequestMessage(
  binding: RequestBinding,
  params: Record<string, string | undefined>,
  rawQuery: string,
  rawBody: string | undefined,
  registry: Registry | undefined,
): Message {
  const { schema } = binding;
  let json: JsonObject = {};
  const bound: DescField[][] = [];

  // 1. body
  const body = binding.body === "" ? undefined : parseJsonBody(rawBody);
  if (binding.body === "*") {
    if (body !== undefined && body !== null) {
      if (typeof body !== "object" || Array.isArray(body)) {
        throw new InvalidArgumentError("invalid JSON body: expected a JSON object");
      }
      json = body;
    }
  } else if (binding.body !== "") {
    const f = findField(schema, binding.body);
    if (!f) throw new Error(`body field ${binding.body} not found in ${schema.typeName}`);
    bound.push([f]);
    if (body !== undefined && body !== null) json[f.name] = body;
  }

  // 2. path variables (override the body)
  for (const v of binding.variables) {
    const path = resolvePath(schema, v.fieldPath);
    if (!path) throw new Error(`path variable ${v.fieldPath.join(".")} not found in ${schema.typeName}`);
    bound.push(path);
    const name = v.fieldPath.join(".");
    setAt(json, path, [convertScalar(path[path.length - 1], variableValue(v, params), name)], name);
  }

  // 3. query parameters: every field not bound by body or path
  if (binding.body !== "*" && rawQuery !== "") {
    const grouped = new Map<string, string[]>();
    for (const [k, val] of new URLSearchParams(rawQuery)) {
      const list = grouped.get(k);
      if (list) list.push(val);
      else grouped.set(k, [val]);
    }
    for (const [name, values] of grouped) {
      const path = resolvePath(schema, name.split("."));
      if (!path) throw new InvalidArgumentError(`unknown query parameter "${name}"`);
      if (bound.some((b) => b.every((f, i) => path[i] === f))) continue; // set by body or path, ignored
      const leaf = path[path.length - 1];
      if (leaf.fieldKind === "map") {
        throw new InvalidArgumentError(`query parameter "${name}": map fields cannot be set from the query`);
      }
      if (leaf.fieldKind !== "list" && values.length > 1) {
        throw new InvalidArgumentError(`query parameter "${name}": given more than once`);
      }
      setAt(
        json,
        path,
        values.map((s) => convertScalar(leaf, s, name)),
        name,
      );
    }
  }

  let message: Message;
  try {
    message = fromJson(schema, json, { ignoreUnknownFields: false, registry });
  } catch (e) {
    // fromJson names the enum type, not the field, for an unknown enum value: find the field.
    const badEnum = findUnknownEnum(schema, json, "");
    if (badEnum)
      throw new InvalidArgumentError(`unknown value ${JSON.stringify(badEnum.value)}`, badEnum.path);
    const located = locateJsonError(schema, json, "", registry);
    if (located) throw new InvalidArgumentError(located.reason, located.path);
    throw new InvalidArgumentError((e as Error).message);
  }
  const mask = binding.httpMethod === "PATCH" ? updateMaskOf(binding) : undefined;
  if (mask && keyOf(json, mask.field) === undefined) {
    const paths: string[] = [];
    bodyPaths(mask.body, json[mask.bodyField.name] ?? null, "", paths);
    if (paths.length)
      reflect(schema, message).set(mask.field, reflect(FieldMaskSchema, create(FieldMaskSchema, { paths })));
  }
  return message;
}

/**
 * The `update_mask` (google.protobuf.FieldMask) of a request whose body is one message field, as
 * grpc-gateway fills it for PATCH: its paths are relative to the body message.
 */
function updateMaskOf(
  binding: RequestBinding,
): { field: DescField; bodyField: DescField; body: DescMessage } | undefined {
  const field = findField(binding.schema, "update_mask");
  const bodyField =
    binding.body === "" || binding.body === "*" ? undefined : findField(binding.schema, binding.body);
  if (field?.fieldKind !== "message" || field.message.typeName !== "google.protobuf.FieldMask")
    return undefined;
  if (bodyField?.fieldKind !== "message") return undefined;
  return { field, bodyField, body: bodyField.message };
}

/**
 * The dotted proto paths of the fields a JSON object gives, as grpc-gateway derives a PATCH's field mask:
 * a list, map, scalar or well-known type is one path; a nested object gives the paths of its fields. Unlike
 * grpc-gateway, `null` and an empty object `{}` name nothing: in proto3 JSON they set no value.
 */
function bodyPaths(desc: DescMessage, json: JsonValue, prefix: string, out: string[]): void {
  if (typeof json !== "object" || json === null || Array.isArray(json)) return;
  for (const [key, value] of Object.entries(json)) {
    const f = findField(desc, key);
    if (!f || value === null) continue;
    const path = prefix === "" ? f.name : `${prefix}.${f.name}`;
    const nested =
      f.fieldKind === "message" &&
      !f.message.file.name.startsWith("google/protobuf/") &&
      typeof value === "object" &&
      !Array.isArray(value);
    if (nested) bodyPaths(f.message, value, path, out);
    else out.push(path);
  }
}

/**
 * The field (dotted snake_case path, list items as `[i]`) whose JSON value `fromJson` refuses, and why: it
 * names fields by their full proto name and well-known types not at all, while clients need the path.
 */
function locateJsonError(
  desc: DescMessage,
  json: JsonValue,
  prefix: string,
  registry: Registry | undefined,
): { path: string; reason: string } | undefined {
  if (typeof json !== "object" || json === null || Array.isArray(json)) return undefined;
  const parses = (d: DescMessage, value: JsonValue): string | undefined => {
    try {
      fromJson(d, value, { ignoreUnknownFields: false, registry });
      return undefined;
    } catch (e) {
      return (e as Error).message;
    }
  };
  for (const [key, value] of Object.entries(json)) {
    const f = findField(desc, key);
    if (!f) return undefined; // fromJson's own message names an unknown field
    const error = parses(desc, { [key]: value });
    if (error === undefined) continue;
    const path = prefix === "" ? f.name : `${prefix}.${f.name}`;
    const child =
      f.fieldKind === "message" ||
      (f.fieldKind === "list" && f.listKind === "message") ||
      (f.fieldKind === "map" && f.mapKind === "message")
        ? f.message
        : undefined;
    const nested = child && !child.file.name.startsWith("google/protobuf/");
    if (nested && f.fieldKind === "message") {
      const inner = locateJsonError(child, value, path, registry);
      if (inner) return inner;
    }
    if (Array.isArray(value)) {
      for (const [i, item] of value.entries()) {
        const itemPath = `${path}[${i}]`;
        const itemError = parses(desc, { [key]: [item] });
        if (itemError === undefined) continue;
        const inner = nested ? locateJsonError(child, item, itemPath, registry) : undefined;
        return inner ?? { path: itemPath, reason: reasonOf(itemError) };
      }
    }
    return { path, reason: reasonOf(error) };
  }
  return undefined;
}

/** protobuf-es's "cannot decode field x.Y.z from JSON: expected string, got 5" without the type names. */
function reasonOf(message: string): string {
  const decoded = /^cannot decode message (\S+) from JSON: (.*)$/.exec(message);
  if (decoded) {
    const [, typeName, got] = decoded;
    return typeName.startsWith("google.protobuf.")
      ? `invalid ${typeName} value ${got}`
      : `expected a JSON object (${typeName}), got ${got}`;
  }
  const reason = message.replace(/^cannot decode field \S+ from JSON: /, "").replace(/^list item #\d+: /, "");
  return `invalid value: ${reason}`;
}

/** The first enum field (dotted snake_case path) holding a string that is not one of its value names. */
function findUnknownEnum(
  desc: DescMessage,
  json: JsonValue,
  prefix: string,
): { path: string; value: string } | undefined {
  if (typeof json !== "object" || json === null || Array.isArray(json)) return undefined;
  if (desc.file.name.startsWith("google/protobuf/")) return undefined;
  for (const [key, value] of Object.entries(json)) {
    const f = findField(desc, key);
    if (!f || value === null) continue;
    const path = prefix === "" ? f.name : `${prefix}.${f.name}`;
    const enumType =
      f.fieldKind === "enum" ? f.enum : f.fieldKind === "list" && f.listKind === "enum" ? f.enum : undefined;
    const known = (v: JsonValue) => typeof v !== "string" || enumType?.values.some((x) => x.name === v);
    if (enumType && f.fieldKind === "enum" && !known(value)) return { path, value: String(value) };
    if (enumType && Array.isArray(value)) {
      const i = value.findIndex((v) => !known(v));
      if (i >= 0) return { path: `${path}[${i}]`, value: String(value[i]) };
    }
    const child =
      f.fieldKind === "message"
        ? f.message
        : (f.fieldKind === "list" && f.listKind === "message") ||
            (f.fieldKind === "map" && f.mapKind === "message")
          ? f.message
          : undefined;
    if (!child) continue;
    if (f.fieldKind === "message") {
      const found = findUnknownEnum(child, value, path);
      if (found) return found;
    } else if (Array.isArray(value)) {
      for (const [i, item] of value.entries()) {
        const found = findUnknownEnum(child, item, `${path}[${i}]`);
        if (found) return found;
      }
    } else if (typeof value === "object") {
      for (const [k, item] of Object.entries(value)) {
        const found = findUnknownEnum(child, item, `${path}[${JSON.stringify(k)}]`);
        if (found) return found;
      }
    }
  }
  return undefined;
}

/**
 * Sets the (list of) value(s) at a field path in the JSON object, reusing an existing key of the same field
 * under either name and refusing a second member of a oneof.
 */
function setAt(json: JsonObject, path: DescField[], values: JsonValue[], name: string): void {
  let obj = json;
  for (const [i, f] of path.entries()) {
    const existing = keyOf(obj, f);
    const key = existing ?? f.name;
    if (existing === undefined && f.oneof) {
      const other = f.oneof.fields.find((m) => m !== f && keyOf(obj, m) !== undefined);
      if (other) {
        throw new InvalidArgumentError(
          `${name}: only one of ${f.oneof.fields.map((m) => m.name).join(", ")} may be set`,
        );
      }
    }
    if (i < path.length - 1) {
      const child = obj[key];
      if (typeof child !== "object" || child === null || Array.isArray(child)) obj[key] = {};
      obj = obj[key] as JsonObject;
      continue;
    }
    if (f.fieldKind === "list") {
      const prev = obj[key];
      obj[key] = [...(Array.isArray(prev) ? prev : []), ...values];
    } else {
      obj[key] = values[0];
    }
  }
}

function keyOf(obj: JsonObject, f: DescField): string | undefined {
  if (Object.hasOwn(obj, f.name)) return f.name;
  if (Object.hasOwn(obj, f.jsonName)) return f.jsonName;
  return undefined;
}

const wktStringTypes = new Set([
  "google.protobuf.Timestamp",
  "google.protobuf.Duration",
  "google.protobuf.FieldMask",
  "google.protobuf.StringValue",
  "google.protobuf.BytesValue",
  "google.protobuf.Int32Value",
  "google.protobuf.UInt32Value",
  "google.protobuf.Int64Value",
  "google.protobuf.UInt64Value",
  "google.protobuf.FloatValue",
  "google.protobuf.DoubleValue",
]);

/** Converts a query / path string to the proto3 JSON value of a (repeated) scalar, enum or WKT field. */
function convertScalar(f: DescField, s: string, name: string): JsonValue {
  let kind: "scalar" | "enum" | "message";
  let scalar: ScalarType | undefined;
  let message: DescMessage | undefined;
  switch (f.fieldKind) {
    case "scalar":
      kind = "scalar";
      scalar = f.scalar;
      break;
    case "enum":
      kind = "enum";
      break;
    case "message":
      kind = "message";
      message = f.message;
      break;
    case "list":
      kind = f.listKind;
      if (f.listKind === "scalar") scalar = f.scalar;
      if (f.listKind === "message") message = f.message;
      break;
    default:
      throw new InvalidArgumentError(`${name}: map fields cannot be set from the path or query`);
  }
  if (kind === "enum") return /^-?\d+$/.test(s) ? Number(s) : s;
  if (kind === "message") {
    const typeName = message?.typeName ?? "";
    if (typeName === "google.protobuf.BoolValue") return parseBool(s, name);
    if (typeName === "google.protobuf.FieldMask") return camelCasePaths(s);
    if (wktStringTypes.has(typeName)) return s;
    throw new InvalidArgumentError(`${name}: a message cannot be set from the path or query, set its fields`);
  }
  if (scalar === ScalarType.BOOL) return parseBool(s, name);
  return s; // strings, bytes (base64) and numbers (proto3 JSON accepts numbers as strings)
}

/**
 * A field mask from a query parameter in the JSON form `fromJson` reads (lowerCamelCase paths), accepting
 * the snake_case proto names too: `oidc.post_logout_redirect_uris,name` → `oidc.postLogoutRedirectUris,name`.
 */
function camelCasePaths(s: string): string {
  return s.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());
}

function parseBool(s: string, name: string): boolean {
  switch (s) {
    case "true":
    case "True":
    case "TRUE":
    case "t":
    case "T":
    case "1":
      return true;
    case "false":
    case "False":
    case "FALSE":
    case "f":
    case "F":
    case "0":
      return false;
    default:
      throw new InvalidArgumentError(`${name}: invalid boolean "${s}"`);
  }
}
