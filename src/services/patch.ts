/**
 * Which fields of a PATCH body change: the one rule of every patch (docs/api.md "Partial updates").
 *
 * - Without `update_mask` (or with an empty one) a field changes when it is present in the body: a proto3
 *   `optional` field or a message that is set, a selected oneof member, a non-empty list or map, and a
 *   field without presence (a plain scalar) holding a value other than its zero value. A message present
 *   changes only the fields present in it. An empty list is absent: binary protobuf cannot tell them apart.
 * - With `update_mask` exactly the fields it names change (as in Google's AIP-134): to their value in the
 *   body, or to their empty value when absent there (an empty list, false, 0, no message). A path naming a
 *   message names every field in it. Fields of the body the mask does not name are left alone.
 *
 * Over REST the transcoder fills `update_mask` from the JSON body when the query does not give it
 * (src/api/rest/request.ts), so a JSON `[]` empties a list there as it does with a mask over gRPC.
 */
import type { DescField, DescMessage, MessageShape } from "@bufbuild/protobuf";
import { type ReflectMessage, reflect } from "@bufbuild/protobuf/reflect";
import type { FieldMask } from "@bufbuild/protobuf/wkt";
import { InvalidArgumentError } from "../errors.ts";

export interface PatchFields {
  /** The field at `path` (dotted proto names below the body, e.g. `oidc.redirect_uris`) changes. */
  has(path: string): boolean;
  /** The field at `path` or a field below it changes (e.g. some field of a oneof member's message). */
  touches(path: string): boolean;
}

/** The fields of `desc` along `path`; undefined when a segment is unknown or below a list or map. */
function resolve(desc: DescMessage, path: string): DescField[] | undefined {
  const fields: DescField[] = [];
  let current: DescMessage | undefined = desc;
  for (const name of path.split(".")) {
    const field: DescField | undefined = current?.fields.find((f) => f.name === name || f.jsonName === name);
    if (!field) return undefined;
    fields.push(field);
    current = field.fieldKind === "message" ? field.message : undefined;
  }
  return fields;
}

/**
 * The fields of `body` (a message of `schema`, the request's body field named `bodyField`) that change.
 * @throws InvalidArgumentError naming `update_mask` for a path that names no field of the body.
 */
export function patchFields<Desc extends DescMessage>(
  schema: Desc,
  body: MessageShape<Desc> | undefined,
  updateMask: FieldMask | undefined,
  bodyField: string,
): PatchFields {
  // The paths as proto names (a binary client may have written the JSON names).
  const mask = (updateMask?.paths ?? []).map((path) => {
    if (path === "*")
      throw new InvalidArgumentError(
        `name the fields of ${bodyField} to change; "*" (replace everything) is not supported`,
        "update_mask",
      );
    const fields = resolve(schema, path);
    if (!fields) throw new InvalidArgumentError(`"${path}" names no field of ${bodyField}`, "update_mask");
    return fields.map((f) => f.name).join(".");
  });
  const root = body ? reflect(schema, body) : undefined;

  const checked = (path: string): DescField[] => {
    const fields = resolve(schema, path);
    if (!fields) throw new Error(`${schema.typeName} has no field ${path}`);
    return fields;
  };
  const present = (path: string): boolean => {
    let msg: ReflectMessage | undefined = root;
    for (const field of checked(path)) {
      if (!msg?.isSet(field)) return false;
      msg = field.fieldKind === "message" ? (msg.get(field) as ReflectMessage) : undefined;
    }
    return true;
  };
  const named = (path: string): boolean => mask.some((m) => m === path || path.startsWith(`${m}.`));

  if (mask.length === 0) return { has: present, touches: present };
  return {
    has: (path) => {
      checked(path);
      return named(path);
    },
    touches: (path) => {
      checked(path);
      return named(path) || mask.some((m) => m.startsWith(`${path}.`));
    },
  };
}

/**
 * A list the patch replaces that may not be emptied (the roles of grants and memberships), or undefined
 * when the patch leaves it alone.
 * @throws InvalidArgumentError naming `field` when the list is named but empty.
 */
export function nonEmptyList<T>(
  fields: PatchFields,
  path: string,
  value: T[] | undefined,
  field: string,
  instead: string,
): T[] | undefined {
  if (!fields.has(path)) return undefined;
  if (!value?.length) throw new InvalidArgumentError(`must not be empty; ${instead}`, field);
  return value;
}
