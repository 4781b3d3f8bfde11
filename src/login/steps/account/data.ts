/**
 * POST /ui/login/account/data: the signed-in person's custom data (docs/user-schemas.md "The account
 * page"), rate-limited per IP. The form is drawn from the user's schema as the `self` field permissions
 * allow (`schemaProperties`): what the user may write is an input, what it may only read is text, the rest
 * is not shown. A post becomes a JSON merge patch of the document, decided exactly as PatchUser decides the
 * user's own `data` (`decideUserData` with the role `self`, `userDataEvents`): the same permission check,
 * then the same schema check. A refused patch stores nothing; its error names a JSON pointer, shown at the
 * field of that property (or its nearest shown ancestor).
 *
 * Form fields are named by the property's JSON pointer (`/address/zip`). A field naming a property the
 * user may not write (a forged post) goes into the patch like any other and is refused by the permission
 * check. An unchecked box is absent from a post: a writable boolean shown as a checkbox is false then.
 * An empty input removes an optional property, and the schema's `required` refuses it otherwise; an input
 * for a property the user may write but not read (no current value shown) changes nothing when left empty.
 */
import type { FastifyInstance } from "fastify";
import { foldUser, requireHuman, userDataEvents } from "../../../domain/user/commands.ts";
import { USER } from "../../../domain/user/events.ts";
import { type SchemaProperty, sameJson, schemaProperties } from "../../../domain/user-schema/field-access.ts";
import { decideUserData } from "../../../domain/user-schema/user-data.ts";
import { NotFoundError, PlatformError } from "../../../errors.ts";
import { getUserSchema } from "../../../query/user-schemas.ts";
import type { Queryable } from "../../../storage/database.ts";
import type { Translator } from "../../i18n.ts";
import type { Body, StepKit } from "../kit.ts";
import { accountPost, redirectWithOutcome } from "./kit.ts";

type Json = Record<string, unknown>;

/** The user's schema and data, when it has a schema. */
export interface AccountData {
  schema: Json;
  data: Json;
}

export async function readAccountData(
  db: Queryable,
  instanceId: string,
  userId: string,
): Promise<AccountData | undefined> {
  const [row] = await db.query<{ schema_id: string | null; data: Json | null }>(
    "SELECT schema_id, data FROM users WHERE instance_id = $1 AND id = $2",
    [instanceId, userId],
  );
  if (!row?.schema_id) return undefined;
  const schema = await getUserSchema(db, instanceId, row.schema_id);
  return schema ? { schema: schema.schema, data: row.data ?? {} } : undefined;
}

const isObject = (value: unknown): value is Json =>
  value !== null && typeof value === "object" && !Array.isArray(value);

/** How a property is edited; `text` for anything the form cannot edit (shown read-only as JSON). */
type Control = "string" | "number" | "integer" | "boolean" | "enum" | "object" | "other";

function controlOf(property: SchemaProperty): Control {
  if (property.enum) return "enum";
  if (property.properties) return "object";
  const type = property.type;
  if (type === "string" || type === "number" || type === "integer" || type === "boolean") return type;
  return "other";
}

/** The JSON pointer's tokens (RFC 6901). */
function tokensOf(pointer: string): string[] {
  return pointer
    .split("/")
    .slice(1)
    .map((t) => t.replaceAll("~1", "/").replaceAll("~0", "~"));
}

/** The sub-schema of the property at `pointer`, through nested `properties`. */
function subSchema(schema: Json, pointer: string): Json {
  let node: Json = schema;
  for (const token of tokensOf(pointer)) {
    const next = isObject(node.properties) ? (node.properties as Json)[token] : undefined;
    node = isObject(next) ? next : {};
  }
  return node;
}

/** Shown in a form field: strings as they are, anything else as JSON. */
const asText = (value: unknown) =>
  value === undefined ? "" : typeof value === "string" ? value : JSON.stringify(value);

/** An HTML `pattern` only for an anchored expression that the browser reads the same way (`v` flag). */
function simplePattern(pattern: unknown): string | undefined {
  if (typeof pattern !== "string" || !/^\^[^|]*\$$/.test(pattern)) return undefined;
  try {
    new RegExp(pattern, "v");
    return pattern;
  } catch {
    return undefined;
  }
}

/** One node of the section's form, for ../account/data-field.eta. */
interface DataField {
  id: string;
  name: string;
  label: string;
  help?: string;
  control: Control;
  writable: boolean;
  required: boolean;
  /** A write-only property: its value is not shown, an empty input keeps it. */
  hidden: boolean;
  value: string;
  checked?: boolean;
  text?: string;
  options?: { value: string; label: string; selected: boolean }[];
  attributes?: { maxLength?: number; minLength?: number; pattern?: string; min?: number; max?: number };
  error?: string;
  describedBy: string[];
  autofocus?: boolean;
  children?: DataField[];
}

/**
 * The section's fields for the page: the user's values, or those typed with their errors (`fieldErrors`
 * keyed by JSON pointer, already translated).
 */
export function dataFields(
  t: Translator["t"],
  account: AccountData,
  state: { fieldErrors: Record<string, string>; values: Record<string, string> },
): DataField[] {
  const typed = Object.keys(state.values).length > 0;
  let counter = 0;
  const build = (property: SchemaProperty): DataField | undefined => {
    const control = controlOf(property);
    const id = `data-field-${++counter}`;
    const sub = subSchema(account.schema, property.pointer);
    const error = state.fieldErrors[property.pointer];
    const help = property.description;
    const field: DataField = {
      id,
      name: property.pointer,
      label: property.title || property.name,
      help,
      control,
      writable: property.writable && control !== "other",
      required: property.required,
      hidden: !property.readable,
      value: typed ? (state.values[property.pointer] ?? "") : asText(property.value),
      error,
      describedBy: [...(help ? [`${id}-help`] : []), ...(error ? [`${id}-error`] : [])],
    };
    if (control === "object") {
      field.children = (property.properties ?? []).map(build).filter((f): f is DataField => !!f);
      return field.children.length ? field : undefined;
    }
    if (!field.writable) {
      const value = property.value;
      field.text =
        value === undefined
          ? t(property.readable ? "accountData.notSet" : "accountData.hidden")
          : typeof value === "boolean"
            ? t(value ? "accountData.yes" : "accountData.no")
            : asText(value);
      return field;
    }
    if (control === "boolean" && !field.hidden)
      field.checked = typed ? field.value === "true" : property.value === true;
    if (control === "boolean" && field.hidden)
      field.options = [
        { value: "", label: t("accountData.keep"), selected: field.value === "" },
        { value: "true", label: t("accountData.yes"), selected: field.value === "true" },
        { value: "false", label: t("accountData.no"), selected: field.value === "false" },
      ];
    if (control === "enum") {
      const chosen = typed ? field.value : property.value === undefined ? "" : JSON.stringify(property.value);
      field.options = [
        ...(property.required && !field.hidden && chosen !== ""
          ? []
          : [
              {
                value: "",
                label: t(field.hidden ? "accountData.keep" : "accountData.notSet"),
                selected: chosen === "",
              },
            ]),
        ...(property.enum ?? []).map((item) => {
          const value = JSON.stringify(item);
          return { value, label: asText(item), selected: value === chosen };
        }),
      ];
    }
    if (control === "string")
      field.attributes = {
        maxLength: typeof sub.maxLength === "number" ? sub.maxLength : undefined,
        minLength: typeof sub.minLength === "number" ? sub.minLength : undefined,
        pattern: simplePattern(sub.pattern),
      };
    if (control === "number" || control === "integer")
      field.attributes = {
        min: typeof sub.minimum === "number" ? sub.minimum : undefined,
        max: typeof sub.maximum === "number" ? sub.maximum : undefined,
      };
    return field;
  };
  const fields = schemaProperties(account.schema, account.data, "self")
    .map(build)
    .filter((f): f is DataField => !!f);
  const first = (list: DataField[]): DataField | undefined => {
    for (const f of list) {
      const found = f.error && f.writable && f.control !== "object" ? f : f.children && first(f.children);
      if (found) return found;
    }
    return undefined;
  };
  const focus = first(fields);
  if (focus) focus.autofocus = true;
  return fields;
}

/** Whether the section has anything to save (a writable property at any depth). */
export function hasWritable(fields: DataField[]): boolean {
  return fields.some((f) => (f.control === "object" ? hasWritable(f.children ?? []) : f.writable));
}

const NUMBER = /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$/;

/** A posted value as JSON: null for an empty input (removes the property), the raw text when it does not parse. */
function parsed(control: Control, text: string, enumValues: unknown[] | undefined): unknown {
  if (text === "") return null;
  if (control === "number" || control === "integer") return NUMBER.test(text) ? Number(text) : text;
  if (control === "boolean") return text === "true" ? true : text === "false" ? false : text;
  if (control === "enum") {
    for (const item of enumValues ?? []) if (JSON.stringify(item) === text) return item;
    return text;
  }
  return text;
}

/** Sets `value` at `tokens` in a merge patch. */
function setAt(patch: Json, tokens: string[], value: unknown): void {
  let node = patch;
  for (const token of tokens.slice(0, -1)) {
    if (!isObject(node[token])) node[token] = {};
    node = node[token] as Json;
  }
  node[tokens[tokens.length - 1]] = value;
}

/** Whether a merge patch would leave absent `current` as it is (nothing set, only removals). */
const onlyRemovals = (patch: unknown): boolean =>
  patch === null || (isObject(patch) && Object.values(patch).every(onlyRemovals));

/**
 * The JSON merge patch of a post and the values typed (by JSON pointer). Every posted field named by a
 * JSON pointer counts, whether the form showed it or not: the permission check decides.
 */
export function patchOfPost(
  account: AccountData,
  body: Body,
): { patch: Json; values: Record<string, string> } {
  const properties = new Map<string, SchemaProperty>();
  const collect = (list: SchemaProperty[]) => {
    for (const p of list) {
      properties.set(p.pointer, p);
      if (p.properties) collect(p.properties);
    }
  };
  collect(schemaProperties(account.schema, account.data, "self"));

  const patch: Json = {};
  const values: Record<string, string> = {};
  const posted = (name: string) => {
    const given = body[name];
    return ((Array.isArray(given) ? given[0] : given) ?? "").trim();
  };
  for (const name of Object.keys(body)) {
    if (!name.startsWith("/")) continue;
    const property = properties.get(name);
    const control = property ? controlOf(property) : "string";
    if (control === "object" || control === "other") {
      // not an input of the form: kept as text, so that a change is refused like any other
      setAt(patch, tokensOf(name), posted(name));
      continue;
    }
    const text = posted(name);
    values[name] = text;
    // a property the user cannot read: an empty input keeps it
    if (text === "" && property && !property.readable) continue;
    setAt(patch, tokensOf(name), parsed(control, text, property?.enum));
  }
  // unchecked boxes are not posted
  for (const [name, property] of properties)
    if (property.writable && property.readable && controlOf(property) === "boolean" && !(name in body)) {
      values[name] = "";
      setAt(patch, tokensOf(name), false);
    }
  // an object the user has not got and of which nothing is filled in stays absent
  const prune = (node: Json, current: Json | undefined) => {
    for (const [key, value] of Object.entries(node)) {
      if (!isObject(value)) continue;
      const here = current?.[key];
      if (!isObject(here) && onlyRemovals(value)) delete node[key];
      else prune(value, isObject(here) ? here : undefined);
    }
  };
  prune(patch, account.data);
  return { patch, values };
}

/** The property a refusal names, and its message key. */
function refusalOf(error: PlatformError): { pointer?: string; key: string } {
  const denied = / the caller may not write the property at (\/.*)$/.exec(error.message);
  if (denied) return { pointer: denied[1], key: "accountData.notWritable" };
  const invalid = /: at (\/.*?): (.*)$/.exec(error.message);
  if (!invalid) return { key: "accountData.invalid" };
  const [, pointer, reason] = invalid;
  const key =
    reason === "is required"
      ? "field.required"
      : reason === "must be integer"
        ? "accountData.integer"
        : reason === "must be number"
          ? "accountData.number"
          : "field.invalid";
  return { pointer, key };
}

/** The form field of a pointer: itself when shown, else its nearest shown ancestor. */
function fieldOf(account: AccountData, pointer: string): string | undefined {
  const shown = new Set<string>();
  const collect = (list: SchemaProperty[]) => {
    for (const p of list) {
      if (!p.properties) shown.add(p.pointer);
      else collect(p.properties);
    }
  };
  collect(schemaProperties(account.schema, account.data, "self"));
  const tokens = tokensOf(pointer);
  for (let n = tokens.length; n > 0; n--) {
    const candidate = `/${tokens
      .slice(0, n)
      .map((t) => t.replaceAll("~", "~0").replaceAll("/", "~1"))
      .join("/")}`;
    if (shown.has(candidate)) return candidate;
  }
  return undefined;
}

export function accountDataStep(ui: FastifyInstance, kit: StepKit): void {
  const { eventStore, db } = kit.login.deps;
  ui.post("/login/account/data", async (request, reply) => {
    const post = await accountPost(kit, request, reply);
    if (!post) return reply;
    const tooMany = await kit.limitPerIp(request, reply, undefined);
    if (tooMany) return reply;
    const { account, body } = post;
    const instanceId = kit.login.instanceId(request);
    const outcome = { session: account.id, form: "data" as const };

    const current = await readAccountData(db, instanceId, account.userId);
    if (!current)
      return redirectWithOutcome(kit, request, reply, { ...outcome, error: "accountData.noSchema" });
    const { patch, values } = patchOfPost(current, body);
    let changed = false;
    try {
      await eventStore.push({ instanceId, creator: account.userId }, async (tx) => {
        const user = foldUser(await tx.load(USER, account.userId));
        if (!user) throw new NotFoundError("user not found");
        requireHuman(user, "custom data");
        const next = await decideUserData(tx, instanceId, user.custom, { data: patch }, "self");
        changed = next !== undefined && !sameJson(next.data, user.custom.data);
        return userDataEvents(user, next);
      });
    } catch (error) {
      if (!(error instanceof PlatformError) || error instanceof NotFoundError) throw error;
      const refusal = refusalOf(error);
      const field = refusal.pointer && fieldOf(current, refusal.pointer);
      return redirectWithOutcome(kit, request, reply, {
        ...outcome,
        error: field ? "error.formInvalid" : refusal.key,
        fieldErrors: field ? { [field]: refusal.key } : undefined,
        values,
      });
    }
    return redirectWithOutcome(kit, request, reply, {
      ...outcome,
      notice: changed ? "accountData.saved" : "accountData.unchanged",
    });
  });
}
