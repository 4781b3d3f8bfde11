/**
 * Field permissions of user schemas (docs/user-schemas.md "Field permissions"). A property of the schema
 * may carry `"urn:platform:schema:permission": {"owner": "rw"|"r"|"w"|"", "self": "rw"|"r"|"w"|""}`:
 * `owner` applies to the administrators of the user's organization, `self` to the user itself. A property
 * without the annotation has the permission of the nearest enclosing property that has one, and at the top
 * `{owner: "rw", self: "r"}` (ZITADEL's default); a role missing from an annotation has no access.
 * Annotations are read from `properties` of the root schema and of nested object schemas (not through
 * `$ref`, `allOf` and the like): data the schema does not describe has its enclosing permission.
 */
import { PERMISSION_KEYWORD, pointer } from "./json-schema.ts";

/** Whose view: an administrator of the user's organization (`owner`), or the user itself (`self`). */
export type Role = "owner" | "self";
export interface Access {
  read: boolean;
  write: boolean;
}
type Permission = Record<Role, Access>;
type Json = Record<string, unknown>;

const access = (value: unknown): Access => ({
  read: typeof value === "string" && value.includes("r"),
  write: typeof value === "string" && value.includes("w"),
});

/** The permission when no annotation applies. */
export const DEFAULT_PERMISSION: Permission = { owner: access("rw"), self: access("r") };

const isObject = (value: unknown): value is Json =>
  value !== null && typeof value === "object" && !Array.isArray(value);

/** The sub-schema of property `key` of an object schema, if it declares one. */
function propertySchema(schema: unknown, key: string): Json | undefined {
  if (!isObject(schema) || !isObject(schema.properties)) return undefined;
  const sub = (schema.properties as Json)[key];
  return isObject(sub) ? sub : undefined;
}

function permissionOf(schema: Json | undefined, inherited: Permission): Permission {
  const annotation = schema?.[PERMISSION_KEYWORD];
  if (!isObject(annotation)) return inherited;
  return { owner: access(annotation.owner), self: access(annotation.self) };
}

/** `data` without what `role` may not read. */
export function readableData(schema: Json, data: Json, role: Role): Json {
  const filter = (node: Json | undefined, value: Json, inherited: Permission): Json => {
    const out: Json = {};
    for (const [key, item] of Object.entries(value)) {
      const sub = propertySchema(node, key);
      const permission = permissionOf(sub, inherited);
      if (!permission[role].read) continue;
      out[key] = isObject(item) ? filter(sub, item, permission) : item;
    }
    return out;
  };
  return filter(schema, data, DEFAULT_PERMISSION);
}

/** Whether two JSON values are equal (object members in any order: jsonb does not keep it). */
export function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== typeof b || a === null || b === null || typeof a !== "object") return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const ka = Object.keys(a as Json);
  const kb = Object.keys(b as Json);
  return ka.length === kb.length && ka.every((k) => sameJson((a as Json)[k], (b as Json)[k]));
}

/**
 * The JSON pointer of the first property whose value differs between `before` and `after` (added, changed
 * or removed) that `role` may not write under `schema`; undefined when `role` may make the change.
 */
export function unwritableChange(
  schema: Json,
  before: Json | undefined,
  after: Json | undefined,
  role: Role,
): string | undefined {
  const walk = (
    node: Json | undefined,
    a: Json | undefined,
    b: Json | undefined,
    inherited: Permission,
    path: string[],
  ): string | undefined => {
    for (const key of new Set([...Object.keys(a ?? {}), ...Object.keys(b ?? {})])) {
      const x = a?.[key];
      const y = b?.[key];
      if (sameJson(x, y)) continue;
      const sub = propertySchema(node, key);
      const permission = permissionOf(sub, inherited);
      const here = [...path, key];
      if (!permission[role].write) return pointer(here);
      // an inner property may be less writable than its parent
      if (isObject(x) || isObject(y)) {
        const inner = walk(sub, isObject(x) ? x : undefined, isObject(y) ? y : undefined, permission, here);
        if (inner) return inner;
      }
    }
    return undefined;
  };
  return walk(schema, before, after, DEFAULT_PERMISSION, []);
}

/** RFC 7396 JSON merge patch: `patch`'s members replace those of `target`, `null` removes one. */
export function mergePatch(target: Json, patch: Json): Json {
  const out: Json = { ...target };
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete out[key];
    else if (isObject(value)) out[key] = mergePatch(isObject(out[key]) ? (out[key] as Json) : {}, value);
    else out[key] = value;
  }
  return out;
}

/** A property of a user's schema as a form shows it (the account page). */
export interface SchemaProperty {
  name: string;
  /** JSON pointer of the property in the data. */
  pointer: string;
  /** The schema's `type` (a list when it allows several); undefined when it declares none. */
  type?: string | string[];
  title?: string;
  description?: string;
  enum?: unknown[];
  required: boolean;
  readable: boolean;
  writable: boolean;
  /** The current value, when readable and set. */
  value?: unknown;
  /** The properties of an object property. */
  properties?: SchemaProperty[];
}

/**
 * The properties of `schema` that `role` may read or write, in the schema's order, with their type, title,
 * enum and nested object properties, and the values of `data` that `role` may read: what a form of the
 * user's custom data shows.
 */
export function schemaProperties(
  schema: Json,
  data: Json | undefined,
  role: Role = "self",
): SchemaProperty[] {
  const describe = (node: Json, value: Json | undefined, inherited: Permission, path: string[]) => {
    const out: SchemaProperty[] = [];
    const properties = isObject(node.properties) ? (node.properties as Json) : {};
    const required = Array.isArray(node.required) ? (node.required as unknown[]) : [];
    for (const [name, raw] of Object.entries(properties)) {
      const sub = isObject(raw) ? raw : {};
      const permission = permissionOf(sub, inherited);
      const { read, write } = permission[role];
      if (!read && !write) continue;
      const here = [...path, name];
      const current = value?.[name];
      const property: SchemaProperty = {
        name,
        pointer: pointer(here),
        required: required.includes(name),
        readable: read,
        writable: write,
      };
      if (typeof sub.type === "string" || Array.isArray(sub.type))
        property.type = sub.type as string | string[];
      if (typeof sub.title === "string") property.title = sub.title;
      if (typeof sub.description === "string") property.description = sub.description;
      if (Array.isArray(sub.enum)) property.enum = sub.enum;
      if (isObject(sub.properties))
        property.properties = describe(sub, isObject(current) ? current : undefined, permission, here);
      else if (read && current !== undefined) property.value = current;
      out.push(property);
    }
    return out;
  };
  return describe(schema, data, DEFAULT_PERMISSION, []);
}
