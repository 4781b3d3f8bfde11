/**
 * OpenAPI 3.1 document of the REST mapping of the API services, built from their descriptors exactly as
 * the REST transcoder (../rest/transcoder.ts, ../rest/request.ts) serves them:
 *
 * - one operation per `google.api.http` rule (additional bindings included), `operationId` = the RPC name
 *   (`<Service>_<Method>` when two services share a method name; further bindings get `_2`, `_3`, ...),
 *   tag = the service name, summary / description from the proto comments (./comments.ts);
 * - path variables → path parameters (`{id}`; dotted field paths such as `{nested.id}` keep their name);
 * - the body field → `requestBody` (a repeated field: an array; `*`: the whole request message), with an
 *   example from an `@example` comment tag or generated from the schema;
 * - every other field → query parameters flattened with dots (`query.limit`, `ctx.org_id`), enums by name;
 *   maps and repeated messages cannot be set from the query and are left out;
 * - responses: 200, 201 for `Create*` RPCs, 200 and 201 for `Put*` RPCs (created or replaced), and the
 *   rpcStatus errors 400/401/403/404/409/429/500 (`components.responses`, schema `RpcStatus`);
 * - `components.schemas`: every message and enum the operations use, named by full proto name, in the
 *   proto3 JSON mapping (snake_case proto names, 64-bit integers as strings, Timestamp as date-time,
 *   Duration as `"12.5s"`, enums as names, oneofs described), with the `(platform.validate.v1.field)`
 *   rules as JSON Schema keywords (minLength, maxLength, pattern, format uri, minItems, maxItems, ...);
 * - a bearer security scheme applied globally.
 *
 * Output is deterministic: paths and components sorted by name, properties in declaration order.
 */
import {
  type DescEnum,
  type DescField,
  type DescMessage,
  type DescMethod,
  type DescService,
  getOption,
  hasOption,
  ScalarType,
} from "@bufbuild/protobuf";
import pkg from "../../../package.json" with { type: "json" };
import {
  type FieldRules,
  field as fieldRulesExt,
  oneof_required,
} from "../../gen/platform/validate/v1/validate_pb.ts";
import { findField } from "../rest/request.ts";
import { parsePathTemplate } from "../rest/template.ts";
import { collectRestRoutes, type RestRoute } from "../rest/transcoder.ts";
import {
  bundledComments,
  type CommentedDesc,
  type Comments,
  commentKey,
  firstSentence,
  parseComment,
} from "./comments.ts";

/** A JSON value. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
/** A JSON object (schema, operation, ...). */
export type JsonObject = { [key: string]: Json };

export interface OpenApiOptions {
  /** `info.title`. */
  title: string;
  /** `info.version`. */
  version: string;
  /** Absolute base URL of the server; without it `servers` holds a `{base_url}` template. */
  serverUrl?: string;
  /** `info.description` (Markdown); default: a summary of the API conventions. */
  description?: string;
  /** Proto comments (see ./comments.ts); default: the committed ./comments.json. */
  comments?: Comments;
}

/** `info` of the document that `npm run generate` commits and the server serves. */
export const DEFAULT_INFO: Readonly<{ title: string; version: string }> = {
  title: "Platform API",
  version: pkg.version,
};

const SCHEMA_PREFIX = "#/components/schemas/";
const RPC_STATUS = "RpcStatus";

/** Error responses of every operation: HTTP status → component name, description, example. */
const ERROR_RESPONSES: [string, string, string, JsonObject][] = [
  [
    "400",
    "BadRequest",
    "INVALID_ARGUMENT (malformed JSON, unknown fields, a validation rule naming the field), FAILED_PRECONDITION (e.g. a feature flag is off) or OUT_OF_RANGE.",
    { code: 3, message: "settings.default_language.key: must match ^[a-z]{2}$", details: [] },
  ],
  [
    "401",
    "Unauthenticated",
    "UNAUTHENTICATED: the bearer token is missing, invalid or expired.",
    { code: 16, message: "invalid token", details: [] },
  ],
  [
    "403",
    "PermissionDenied",
    "PERMISSION_DENIED: the caller lacks the permission in the requested context.",
    { code: 7, message: "permission denied", details: [] },
  ],
  [
    "404",
    "NotFound",
    "NOT_FOUND: the resource does not exist or the caller may not read it; also an unknown instance (Host header).",
    { code: 5, message: "instance not found", details: [] },
  ],
  [
    "409",
    "Conflict",
    "ALREADY_EXISTS or ABORTED (a concurrent change).",
    { code: 6, message: "already exists", details: [] },
  ],
  [
    "429",
    "ResourceExhausted",
    "RESOURCE_EXHAUSTED: a limit was reached or the instance is blocked.",
    { code: 8, message: "instance is blocked", details: [] },
  ],
  [
    "500",
    "Internal",
    "INTERNAL, UNKNOWN or DATA_LOSS. The message never contains internal details.",
    { code: 13, message: "internal error", details: [] },
  ],
];

const HTTP_METHODS = ["get", "put", "post", "delete", "options", "head", "patch", "trace"];

const OVERVIEW = `Identity and access management API of Platform. Every operation is served over REST/JSON (this
document) and, at \`/<proto package>.<Service>/<Method>\`, over gRPC (HTTP/2, also h2c), gRPC-web and Connect.

**JSON.** Proto3 JSON mapping: responses use the snake_case proto names, requests accept snake_case or
lowerCamelCase; enums are written by name, 64-bit integers as strings, timestamps as RFC 3339 and durations as
strings such as \`"12.5s"\`. Unknown fields and malformed JSON answer 400.

**HTTP mapping.** The JSON body is the value of the one request field named as body (an array for a repeated
field), path parameters fill their fields and every other field is a query parameter with dotted names
(\`?ctx.org_id=123&query.limit=10\`). IDs that contain \`/\` are percent-encoded in paths (\`%2F\`).

**Errors.** \`{"code": <gRPC code>, "message": "...", "details": []}\` with the HTTP status grpc-gateway uses
(INVALID_ARGUMENT/FAILED_PRECONDITION/OUT_OF_RANGE 400, UNAUTHENTICATED 401, PERMISSION_DENIED 403,
NOT_FOUND 404, ALREADY_EXISTS/ABORTED 409, RESOURCE_EXHAUSTED 429, CANCELLED 499, INTERNAL/UNKNOWN/DATA_LOSS 500,
UNIMPLEMENTED 501, UNAVAILABLE 503, DEADLINE_EXCEEDED 504).

**Authentication.** \`Authorization: Bearer <token>\` with a personal access token or an access token of this
instance's OIDC provider (audience: the instance's management project); system users send a self-signed JWT.

**Contexts.** The instance is found from the Host header; the \`ctx\` query parameter narrows the context to
\`ctx.system=true\`, \`ctx.instance_id\`, \`ctx.instance_domain\`, \`ctx.org_id\` or \`ctx.org_domain\`.

**Lists.** \`query.offset\` (default 0), \`query.limit\` (default 100, above the maximum of 1000 → 400) and
\`query.asc\` (default false: newest first).`;

/** Builds the OpenAPI 3.1 document of the REST routes of the services. */
export function buildOpenApi(services: DescService[], options: OpenApiOptions): JsonObject {
  return new Builder(services, options).build();
}

/** A path parameter of an OpenAPI path. */
export interface OpenApiPathParam {
  /** Parameter name in the OpenAPI path. */
  name: string;
  /** The request field it fills (empty for an anonymous `*` segment). */
  fieldPath: string[];
  /** How the value is built, when the variable is more than the parameter (`{name=things/*}`). */
  note?: string;
  /** The parameter matches the rest of the path (`**`), slashes included. */
  multiSegment: boolean;
}

/** The OpenAPI path and path parameters of a google.api.http path template. */
export function openApiPath(template: string): { path: string; params: OpenApiPathParam[] } {
  const parsed = parsePathTemplate(template);
  const names = new Map<string, OpenApiPathParam>();
  const params: OpenApiPathParam[] = [];
  for (const v of parsed.variables) {
    const field = v.fieldPath.join(".");
    const own = v.parts.filter((p) => "param" in p);
    const paramName = (i: number) => (own.length === 1 ? field : `${field}_${i + 1}`);
    const rendered = v.parts
      .map((p) => ("literal" in p ? p.literal : `{${paramName(own.indexOf(p))}}`))
      .join("/");
    own.forEach((p, i) => {
      const param: OpenApiPathParam = {
        name: paramName(i),
        fieldPath: v.fieldPath,
        multiSegment: p.param === "*",
      };
      if (rendered !== `{${field}}`) param.note = `Sets \`${field}\` to \`${rendered}\`.`;
      names.set(p.param, param);
      params.push(param);
    });
  }
  const segments = parsed.path
    .split("/")
    .slice(1)
    .map((seg) => {
      const param = seg === "*" ? names.get("*") : /^:[^:]/.test(seg) ? names.get(seg.slice(1)) : undefined;
      if (param) return `{${param.name}}`;
      if (seg.startsWith(":") || seg === "*") {
        // a `*` outside any variable: its value is not used
        const anon: OpenApiPathParam = {
          name: `segment_${params.length + 1}`,
          fieldPath: [],
          note: "Any single path segment; its value is not used.",
          multiSegment: seg === "*",
        };
        params.push(anon);
        return `{${anon.name}}`;
      }
      return seg.replaceAll("::", ":");
    });
  return { path: `/${segments.join("/")}`, params };
}

const wktScalars: Record<string, JsonObject> = {
  "google.protobuf.Timestamp": { type: "string", format: "date-time" },
  "google.protobuf.Duration": { type: "string", pattern: "^-?[0-9]+(\\.[0-9]{1,9})?s$" },
  "google.protobuf.FieldMask": { type: "string" },
  "google.protobuf.StringValue": { type: ["string", "null"] },
  "google.protobuf.BytesValue": { type: ["string", "null"], format: "byte", contentEncoding: "base64" },
  "google.protobuf.BoolValue": { type: ["boolean", "null"] },
  "google.protobuf.Int32Value": { type: ["integer", "null"], format: "int32" },
  "google.protobuf.UInt32Value": { type: ["integer", "null"], format: "int64", minimum: 0 },
  "google.protobuf.Int64Value": { type: ["string", "null"], format: "int64", pattern: "^-?[0-9]+$" },
  "google.protobuf.UInt64Value": { type: ["string", "null"], format: "uint64", pattern: "^[0-9]+$" },
  "google.protobuf.FloatValue": { type: ["number", "null"], format: "float" },
  "google.protobuf.DoubleValue": { type: ["number", "null"], format: "double" },
};

const wktOther: Record<string, JsonObject> = {
  "google.protobuf.Struct": { type: "object", additionalProperties: true },
  "google.protobuf.Value": { description: "Any JSON value." },
  "google.protobuf.ListValue": { type: "array", items: {} },
  "google.protobuf.Empty": { type: "object" },
};

const wktExamples: Record<string, Json> = {
  "google.protobuf.Timestamp": "2024-01-01T00:00:00Z",
  "google.protobuf.Duration": "12.5s",
  "google.protobuf.FieldMask": "name",
  "google.protobuf.StringValue": "string",
  "google.protobuf.BytesValue": "ZXhhbXBsZQ==",
  "google.protobuf.BoolValue": true,
  "google.protobuf.Int32Value": 1,
  "google.protobuf.UInt32Value": 1,
  "google.protobuf.Int64Value": "1",
  "google.protobuf.UInt64Value": "1",
  "google.protobuf.FloatValue": 1.5,
  "google.protobuf.DoubleValue": 1.5,
  "google.protobuf.Struct": {},
  "google.protobuf.Value": "value",
  "google.protobuf.ListValue": [],
  "google.protobuf.Empty": {},
};

/** Message types a query parameter can carry (as a string / scalar). */
function isQueryWkt(m: DescMessage): boolean {
  return m.typeName in wktScalars;
}

function scalarSchema(t: ScalarType): JsonObject {
  switch (t) {
    case ScalarType.STRING:
      return { type: "string" };
    case ScalarType.BYTES:
      return { type: "string", format: "byte", contentEncoding: "base64" };
    case ScalarType.BOOL:
      return { type: "boolean" };
    case ScalarType.INT32:
    case ScalarType.SINT32:
    case ScalarType.SFIXED32:
      return { type: "integer", format: "int32" };
    case ScalarType.UINT32:
    case ScalarType.FIXED32:
      return { type: "integer", format: "int64", minimum: 0, maximum: 4294967295 };
    case ScalarType.INT64:
    case ScalarType.SINT64:
    case ScalarType.SFIXED64:
      return { type: "string", format: "int64", pattern: "^-?[0-9]+$" };
    case ScalarType.UINT64:
    case ScalarType.FIXED64:
      return { type: "string", format: "uint64", pattern: "^[0-9]+$" };
    case ScalarType.FLOAT:
      return { type: "number", format: "float" };
    case ScalarType.DOUBLE:
      return { type: "number", format: "double" };
  }
}

function rulesOf(f: DescField): FieldRules | undefined {
  return hasOption(f, fieldRulesExt) ? getOption(f, fieldRulesExt) : undefined;
}

function typeOf(s: JsonObject): string[] {
  const t = s.type;
  return typeof t === "string" ? [t] : Array.isArray(t) ? (t as string[]) : [];
}

/** Adds the scalar rules of a field (or of its list elements / map values) to a value schema. */
function applyValueRules(s: JsonObject, r: FieldRules | undefined): void {
  if (!r || "$ref" in s) return;
  const types = typeOf(s);
  if (types.includes("string") && s.format !== "byte" && s.format !== "int64" && s.format !== "uint64") {
    if (r.minLen !== undefined) s.minLength = Number(r.minLen);
    if (r.maxLen !== undefined) s.maxLength = Number(r.maxLen);
    if (r.pattern !== undefined) s.pattern = r.pattern;
    if (r.uri) s.format = "uri";
  }
  if (types.includes("integer") || types.includes("number")) {
    if (r.gte !== undefined) s.minimum = Number(r.gte);
    if (r.lte !== undefined) s.maximum = Number(r.lte);
  }
  if (types.includes("boolean") && r.constTrue) s.const = true;
}

function sortKeys<T>(o: Record<string, T>): Record<string, T> {
  return Object.fromEntries(Object.entries(o).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

/** The list of names in backticks: `a`, `b` and `c`. */
function nameList(names: string[]): string {
  const q = names.map((n) => `\`${n}\``);
  return q.length <= 1 ? q.join("") : `${q.slice(0, -1).join(", ")} or ${q[q.length - 1]}`;
}

function joinText(...parts: (string | undefined)[]): string {
  return parts.filter((p) => p !== undefined && p !== "").join("\n\n");
}

class Builder {
  private readonly comments: Comments;
  private readonly schemas: Record<string, JsonObject> = {};

  constructor(
    private readonly services: DescService[],
    private readonly options: OpenApiOptions,
  ) {
    this.comments = options.comments ?? bundledComments;
  }

  build(): JsonObject {
    const routes = collectRestRoutes(this.services);
    const tags = this.tagNames();
    const operationIds = this.operationIds(routes);
    const paths: Record<string, Record<string, JsonObject>> = {};
    for (const route of routes) {
      const { path, params } = openApiPath(route.template);
      const method = route.httpMethod.toLowerCase();
      if (!HTTP_METHODS.includes(method)) {
        throw new Error(
          `${route.method.parent.typeName}.${route.method.name}: HTTP method ${route.httpMethod} cannot be described in OpenAPI`,
        );
      }
      const item = paths[path] ?? {};
      paths[path] = item;
      if (item[method]) throw new Error(`two REST routes for ${route.httpMethod} ${path}`);
      item[method] = this.operation(route, params, operationIds.get(route)!, tags.get(route.service)!);
      // request messages too: the gRPC / Connect shape of the call, and `body: "*"`
      this.messageRef(route.method.input);
    }
    const sortedPaths: Record<string, Json> = {};
    for (const p of Object.keys(paths).sort()) {
      const item = paths[p];
      sortedPaths[p] = Object.fromEntries(HTTP_METHODS.filter((m) => item[m]).map((m) => [m, item[m]]));
    }

    const responses: Record<string, Json> = {};
    for (const [, name, description, example] of ERROR_RESPONSES) {
      responses[name] = {
        description,
        content: { "application/json": { schema: { $ref: `${SCHEMA_PREFIX}${RPC_STATUS}` }, example } },
      };
    }
    this.schemas[RPC_STATUS] = {
      type: "object",
      description:
        "Error body of every REST error (google.rpc.Status): the gRPC code number, a human readable message and details.",
      properties: {
        code: {
          type: "integer",
          format: "int32",
          description: "gRPC status code, e.g. 3 (INVALID_ARGUMENT).",
        },
        message: { type: "string", description: "Human readable message; validation errors name the field." },
        details: {
          type: "array",
          description: "Additional details (google.protobuf.Any); currently always empty.",
          items: { $ref: `${SCHEMA_PREFIX}google.protobuf.Any` },
        },
      },
      required: ["code", "message", "details"],
    };
    this.anySchema();

    const servers: Json = this.options.serverUrl
      ? [{ url: this.options.serverUrl }]
      : [
          {
            url: "{base_url}",
            description:
              "The instance: its external URL (scheme, domain and port); the Host selects the instance.",
            variables: { base_url: { default: "http://localhost:8080" } },
          },
        ];
    return {
      openapi: "3.1.0",
      info: {
        title: this.options.title,
        version: this.options.version,
        description: this.options.description ?? OVERVIEW,
        license: { name: "Apache-2.0", identifier: "Apache-2.0" },
      },
      servers,
      security: [{ bearerAuth: [] }],
      tags: [...new Set(tags.values())].sort().map((name) => {
        const service = this.services.find((s) => tags.get(s) === name)!;
        return {
          name,
          description: joinText(
            parseComment(this.comment(service)).text,
            `gRPC service \`${service.typeName}\`.`,
          ),
        };
      }),
      paths: sortedPaths,
      components: {
        schemas: sortKeys(this.schemas),
        responses,
        securitySchemes: {
          bearerAuth: {
            type: "http",
            scheme: "bearer",
            description:
              "A personal access token (PAT) of a user, or an access token issued by this instance's OIDC endpoints whose audience includes the instance's management project (scope `urn:platform:iam:org:project:id:platform:aud`). System users send a JWT they signed themselves (iss = sub = their ID, aud = the external URL).",
          },
        },
      },
    };
  }

  private comment(desc: CommentedDesc): string | undefined {
    return this.comments[commentKey(desc)];
  }

  /** Tag of each service: its name, or its full name when two services share a name. */
  private tagNames(): Map<DescService, string> {
    const count = new Map<string, number>();
    for (const s of this.services) count.set(s.name, (count.get(s.name) ?? 0) + 1);
    return new Map(this.services.map((s) => [s, (count.get(s.name) ?? 0) > 1 ? s.typeName : s.name]));
  }

  private operationIds(routes: RestRoute[]): Map<RestRoute, string> {
    const byName = new Map<string, Set<DescService>>();
    for (const r of routes) {
      const set = byName.get(r.method.name) ?? new Set();
      set.add(r.service);
      byName.set(r.method.name, set);
    }
    const out = new Map<RestRoute, string>();
    const bindings = new Map<DescMethod, number>();
    for (const r of routes) {
      const base =
        (byName.get(r.method.name)?.size ?? 0) > 1 ? `${r.service.name}_${r.method.name}` : r.method.name;
      const n = (bindings.get(r.method) ?? 0) + 1;
      bindings.set(r.method, n);
      out.set(r, n === 1 ? base : `${base}_${n}`);
    }
    return out;
  }

  private operation(route: RestRoute, pathParams: OpenApiPathParam[], operationId: string, tag: string) {
    const { method } = route;
    const comment = parseComment(this.comment(method));
    const grpcName = `/${route.service.typeName}/${method.name}`;
    const op: JsonObject = { operationId, tags: [tag] };
    const summary = firstSentence(comment.text);
    if (summary !== "") op.summary = summary;
    op.description = joinText(
      comment.text,
      `gRPC / Connect: \`${grpcName}\` (request \`${method.input.typeName}\`, response \`${method.output.typeName}\`).`,
    );
    if (method.deprecated) op.deprecated = true;

    // parameters: path, then query
    const bound: DescField[][] = [];
    const parameters: Json[] = [];
    for (const p of pathParams) {
      const fields = this.resolve(method.input, p.fieldPath);
      if (fields.length > 0) bound.push(fields);
      const leaf = fields[fields.length - 1];
      const schema: JsonObject = leaf ? this.fieldSchema(leaf, false) : { type: "string" };
      const notes = [leaf ? parseComment(this.comment(leaf)).text : undefined, p.note];
      if (p.multiSegment) notes.push("The value may contain `/` (it matches the rest of the path).");
      else if (typeOf(schema).includes("string")) {
        notes.push("Percent-encode reserved characters; an ID that contains `/` is sent as `%2F`.");
      }
      parameters.push({
        name: p.name,
        in: "path",
        required: true,
        description: joinText(...notes),
        schema,
      });
    }
    let bodyField: DescField | undefined;
    if (route.body !== "" && route.body !== "*") {
      bodyField = findField(method.input, route.body);
      if (bodyField) bound.push([bodyField]);
    }
    if (route.body !== "*") this.queryParams(method.input, [], [], bound, parameters);
    if (parameters.length > 0) op.parameters = parameters;

    // request body
    if (route.body !== "") {
      const tagExample = comment.tags.get("example");
      let example: Json | undefined;
      if (tagExample !== undefined) {
        try {
          example = JSON.parse(tagExample) as Json;
        } catch (e) {
          throw new Error(
            `${method.parent.typeName}.${method.name}: invalid @example: ${(e as Error).message}`,
          );
        }
      }
      let schema: JsonObject;
      let description: string | undefined;
      let required = false;
      if (bodyField) {
        schema = this.fieldSchema(bodyField, false);
        description = parseComment(this.comment(bodyField)).text;
        required = rulesOf(bodyField)?.required === true;
        example ??= this.exampleForField(bodyField, [method.input]);
      } else {
        schema = this.messageRef(method.input);
        description = `The whole request message \`${method.input.typeName}\`; path parameters override its fields.`;
        example ??= this.exampleForMessage(method.input, [], bound);
      }
      const body: JsonObject = {};
      if (description) body.description = description;
      if (required) body.required = true;
      body.content = { "application/json": { schema, example: example ?? {} } };
      op.requestBody = body;
    }

    // responses
    const responses: Record<string, Json> = {};
    let success: JsonObject;
    if (route.responseBody !== "") {
      const f = findField(method.output, route.responseBody)!;
      success = this.fieldSchema(f, false);
    } else {
      success = this.messageRef(method.output);
    }
    const content = { "application/json": { schema: success } };
    if (method.name.startsWith("Create")) {
      responses["201"] = { description: "Created.", content };
    } else if (method.name.startsWith("Put")) {
      responses["200"] = { description: "Replaced an existing one.", content };
      responses["201"] = { description: "Created.", content };
    } else {
      responses["200"] = { description: "OK.", content };
    }
    for (const [status, name] of ERROR_RESPONSES) {
      responses[status] = { $ref: `#/components/responses/${name}` };
    }
    op.responses = responses;
    op["x-grpc-method"] = grpcName;
    return op;
  }

  private resolve(desc: DescMessage, fieldPath: string[]): DescField[] {
    const out: DescField[] = [];
    let cur: DescMessage | undefined = desc;
    for (const n of fieldPath) {
      const f: DescField | undefined = cur ? findField(cur, n) : undefined;
      if (!f) return [];
      out.push(f);
      cur = f.fieldKind === "message" ? f.message : undefined;
    }
    return out;
  }

  /** Query parameters for every field below `desc` not bound by the body or the path. */
  private queryParams(
    desc: DescMessage,
    prefix: DescField[],
    parents: DescMessage[],
    bound: DescField[][],
    out: Json[],
  ): void {
    for (const f of desc.fields) {
      const path = [...prefix, f];
      if (bound.some((b) => b.length <= path.length && b.every((x, i) => path[i] === x))) continue;
      const name = path.map((x) => x.name).join(".");
      let schema: JsonObject | undefined;
      switch (f.fieldKind) {
        case "scalar":
        case "enum":
          schema = this.queryValueSchema(f);
          break;
        case "list":
          if (f.listKind !== "message" || isQueryWkt(f.message)) {
            schema = { type: "array", items: this.queryValueSchema(f) };
            this.applyListRules(schema, rulesOf(f));
          }
          break;
        case "message":
          if (isQueryWkt(f.message)) schema = this.queryValueSchema(f);
          else if (!parents.includes(f.message) && path.length < 8) {
            this.queryParams(f.message, path, [...parents, desc], bound, out);
          }
          break;
        case "map":
          break; // maps cannot be set from the query
      }
      if (!schema) continue;
      const param: JsonObject = { name, in: "query" };
      const description = this.queryParamDescription(path);
      if (description !== "") param.description = description;
      if (f.deprecated) param.deprecated = true;
      param.schema = schema;
      out.push(param);
    }
  }

  /** Schema of a scalar / enum / WKT query value (enums inline by name). */
  private queryValueSchema(f: DescField): JsonObject {
    let s: JsonObject;
    if (f.fieldKind === "enum" || (f.fieldKind === "list" && f.listKind === "enum")) {
      s = { type: "string", enum: f.enum.values.map((v) => v.name) };
    } else if (f.fieldKind === "message" || (f.fieldKind === "list" && f.listKind === "message")) {
      s = { ...wktScalars[f.message.typeName] };
    } else if (f.fieldKind === "scalar" || (f.fieldKind === "list" && f.listKind === "scalar")) {
      s = scalarSchema(f.scalar);
    } else {
      s = {};
    }
    const r = rulesOf(f);
    applyValueRules(s, r);
    applyValueRules(s, r?.items);
    return s;
  }

  private queryParamDescription(path: DescField[]): string {
    const leaf = path[path.length - 1];
    const parts: string[] = [parseComment(this.comment(leaf)).text];
    if (leaf.oneof) {
      const prefix = path
        .slice(0, -1)
        .map((x) => `${x.name}.`)
        .join("");
      const names = leaf.oneof.fields.map((m) => prefix + m.name);
      const required = getOption(leaf.oneof, oneof_required);
      // a oneof below a message set from the query: the message only exists when one member is given
      const exactly = required && path.length === 1;
      parts.push(`${exactly ? "Exactly" : "At most"} one of ${nameList(names)} may be given.`);
    }
    for (let i = path.length - 2; i >= 0; i--) {
      const text = firstSentence(parseComment(this.comment(path[i])).text);
      if (text !== "") {
        parts.push(
          `\`${path
            .slice(0, i + 1)
            .map((x) => x.name)
            .join(".")}\`: ${text}`,
        );
      }
    }
    return joinText(...parts);
  }

  private applyListRules(s: JsonObject, r: FieldRules | undefined): void {
    if (!r) return;
    if (r.minItems !== undefined) s.minItems = Number(r.minItems);
    if (r.maxItems !== undefined) s.maxItems = Number(r.maxItems);
    if (r.unique) s.uniqueItems = true;
  }

  /** The JSON Schema of a field's JSON value, with its rules and (optionally) its description. */
  private fieldSchema(f: DescField, withDescription: boolean): JsonObject {
    const r = rulesOf(f);
    let s: JsonObject;
    switch (f.fieldKind) {
      case "scalar":
        s = scalarSchema(f.scalar);
        applyValueRules(s, r);
        break;
      case "enum":
        s = this.enumRef(f.enum);
        break;
      case "message":
        s = this.messageRef(f.message);
        break;
      case "list": {
        const item =
          f.listKind === "scalar"
            ? scalarSchema(f.scalar)
            : f.listKind === "enum"
              ? this.enumRef(f.enum)
              : this.messageRef(f.message);
        applyValueRules(item, r);
        applyValueRules(item, r?.items);
        s = { type: "array", items: item };
        this.applyListRules(s, r);
        break;
      }
      case "map": {
        const value =
          f.mapKind === "scalar"
            ? scalarSchema(f.scalar)
            : f.mapKind === "enum"
              ? this.enumRef(f.enum)
              : this.messageRef(f.message);
        applyValueRules(value, r);
        s = { type: "object", additionalProperties: value };
        if (f.mapKey === ScalarType.BOOL) s.propertyNames = { enum: ["true", "false"] };
        else if (f.mapKey !== ScalarType.STRING) s.propertyNames = { pattern: "^-?[0-9]+$" };
        if (r?.minItems !== undefined) s.minProperties = Number(r.minItems);
        if (r?.maxItems !== undefined) s.maxProperties = Number(r.maxItems);
        break;
      }
    }
    if (withDescription) {
      const text = parseComment(this.comment(f)).text;
      let oneofNote: string | undefined;
      if (f.oneof) {
        const required = getOption(f.oneof, oneof_required);
        const others = f.oneof.fields.map((m) => m.name);
        oneofNote = `Member of oneof \`${f.oneof.name}\`: ${required ? "exactly" : "at most"} one of ${nameList(others)} is set.`;
      }
      const description = joinText(text, oneofNote);
      if (description !== "") s = { description, ...s };
    }
    if (f.deprecated) s.deprecated = true;
    return s;
  }

  private enumRef(e: DescEnum): JsonObject {
    if (e.typeName === "google.protobuf.NullValue") return { type: "null" };
    if (!this.schemas[e.typeName]) {
      const lines = e.values.map((v) => {
        const text = parseComment(this.comment(v)).text.replace(/\s+/g, " ");
        return `- \`${v.name}\`${text ? `: ${text}` : ""}`;
      });
      const s: JsonObject = {};
      const description = joinText(parseComment(this.comment(e)).text, lines.join("\n"));
      if (description !== "") s.description = description;
      s.type = "string";
      s.enum = e.values.map((v) => v.name);
      this.schemas[e.typeName] = s;
    }
    return { $ref: SCHEMA_PREFIX + e.typeName };
  }

  private anySchema(): JsonObject {
    const name = "google.protobuf.Any";
    this.schemas[name] ??= {
      type: "object",
      description:
        "A message of any type: `@type` names it (`type.googleapis.com/<full name>`), the other properties are its JSON fields.",
      properties: { "@type": { type: "string" } },
      required: ["@type"],
      additionalProperties: true,
    };
    return { $ref: SCHEMA_PREFIX + name };
  }

  /** A `$ref` to the component of a message (built on first use), or the inline schema of a WKT. */
  private messageRef(m: DescMessage): JsonObject {
    const wkt = wktScalars[m.typeName] ?? wktOther[m.typeName];
    if (wkt) return { ...wkt };
    if (m.typeName === "google.protobuf.Any") return this.anySchema();
    if (!this.schemas[m.typeName]) {
      const s: JsonObject = {};
      this.schemas[m.typeName] = s; // before the fields: recursive messages refer to it
      const oneofNotes = m.oneofs.map((o) => {
        const required = getOption(o, oneof_required);
        const text = parseComment(this.comment(o)).text.replace(/\s+/g, " ");
        return `Oneof \`${o.name}\`${text ? ` (${text.replace(/\.$/, "")})` : ""}: ${required ? "exactly" : "at most"} one of ${nameList(o.fields.map((f) => f.name))} is set.`;
      });
      const description = joinText(parseComment(this.comment(m)).text, oneofNotes.join("\n"));
      if (description !== "") s.description = description;
      s.type = "object";
      const properties: Record<string, Json> = {};
      const required: string[] = [];
      for (const f of m.fields) {
        properties[f.name] = this.fieldSchema(f, true);
        if (rulesOf(f)?.required) required.push(f.name);
      }
      if (m.fields.length > 0) s.properties = properties;
      if (required.length > 0) s.required = required;
      if (m.oneofs.length > 0) {
        s["x-oneofs"] = Object.fromEntries(
          m.oneofs.map((o) => [
            o.name,
            { fields: o.fields.map((f) => f.name), required: getOption(o, oneof_required) },
          ]),
        );
      }
    }
    return { $ref: SCHEMA_PREFIX + m.typeName };
  }

  // ---- examples ----

  /** An example of a message: `@example` of its comment, else one value per field (first oneof member). */
  private exampleForMessage(
    m: DescMessage,
    stack: DescMessage[],
    skip: DescField[][] = [],
  ): Json | undefined {
    const tag = parseComment(this.comment(m)).tags.get("example");
    if (tag !== undefined) return this.parseExample(tag, m.typeName);
    if (m.typeName in wktExamples) return wktExamples[m.typeName];
    if (m.typeName === "google.protobuf.Any") return { "@type": "type.googleapis.com/google.protobuf.Empty" };
    if (stack.includes(m) || stack.length > 5) return undefined;
    const out: JsonObject = {};
    for (const member of m.members) {
      const f = member.kind === "oneof" ? member.fields[0] : member;
      if (!f || skip.some((b) => b.length === 1 && b[0] === f)) continue;
      const v = this.exampleForField(f, [...stack, m]);
      if (v !== undefined) out[f.name] = v;
    }
    return out;
  }

  private exampleForField(f: DescField, stack: DescMessage[]): Json | undefined {
    const comment = parseComment(this.comment(f));
    const tag = comment.tags.get("example");
    if (tag !== undefined) return this.parseExample(tag, `${f.parent.typeName}.${f.name}`);
    const r = rulesOf(f);
    switch (f.fieldKind) {
      case "scalar":
        return this.scalarExample(f.scalar, r, comment.text);
      case "enum":
        return this.enumExample(f.enum, comment.text);
      case "message":
        return this.exampleForMessage(f.message, stack);
      case "list": {
        const item =
          f.listKind === "scalar"
            ? this.scalarExample(f.scalar, r?.items ?? r, comment.text)
            : f.listKind === "enum"
              ? this.enumExample(f.enum, comment.text)
              : this.exampleForMessage(f.message, stack);
        return item === undefined ? [] : [item];
      }
      case "map": {
        const value =
          f.mapKind === "scalar"
            ? this.scalarExample(f.scalar, r, "")
            : f.mapKind === "enum"
              ? this.enumExample(f.enum, "")
              : this.exampleForMessage(f.message, stack);
        const key = f.mapKey === ScalarType.STRING ? "key" : f.mapKey === ScalarType.BOOL ? "true" : "1";
        return value === undefined ? {} : { [key]: value };
      }
    }
  }

  private parseExample(text: string, where: string): Json {
    try {
      return JSON.parse(text) as Json;
    } catch (e) {
      throw new Error(`${where}: invalid @example: ${(e as Error).message}`);
    }
  }

  private enumExample(e: DescEnum, comment: string): Json {
    const hint = commentExample(comment);
    if (hint !== undefined && e.values.some((v) => v.name === hint)) return hint;
    return (e.values.find((v) => v.number !== 0) ?? e.values[0])?.name ?? null;
  }

  private scalarExample(t: ScalarType, r: FieldRules | undefined, comment: string): Json {
    const hint = commentExample(comment);
    switch (t) {
      case ScalarType.STRING: {
        const pattern = r?.pattern !== undefined ? new RegExp(r.pattern, "u") : undefined;
        const fits = (s: string) =>
          (pattern === undefined || pattern.test(s)) &&
          (r?.minLen === undefined || [...s].length >= Number(r.minLen)) &&
          (r?.maxLen === undefined || [...s].length <= Number(r.maxLen)) &&
          (!r?.uri || /^[a-z][a-z0-9+.-]*:\S+$/i.test(s));
        if (hint !== undefined && fits(hint)) return hint;
        const candidates = [
          r?.uri ? "https://example.com/hook" : "string",
          r?.pattern !== undefined ? exampleFromPattern(r.pattern) : undefined,
        ];
        for (const c of candidates) if (c !== undefined && fits(c)) return c;
        const min = r?.minLen === undefined ? 1 : Number(r.minLen);
        return "x".repeat(Math.max(min, 1));
      }
      case ScalarType.BYTES:
        return "ZXhhbXBsZQ==";
      case ScalarType.BOOL:
        return hint !== "false";
      case ScalarType.INT64:
      case ScalarType.SINT64:
      case ScalarType.SFIXED64:
      case ScalarType.UINT64:
      case ScalarType.FIXED64:
        return hint !== undefined && /^-?\d+$/.test(hint) ? hint : String(r?.gte ?? 1);
      case ScalarType.FLOAT:
      case ScalarType.DOUBLE:
        return hint !== undefined && Number.isFinite(Number(hint)) ? Number(hint) : 1.5;
      default:
        return hint !== undefined && /^-?\d+$/.test(hint) ? Number(hint) : Number(r?.gte ?? 1);
    }
  }
}

/** The value of an "e.g. `value`" in a comment. */
function commentExample(comment: string): string | undefined {
  return /\be\.g\.,?\s*`([^`]+)`/.exec(comment)?.[1];
}

/**
 * A string matching a simple regular expression (literals, classes, `\d`, `\w`, `.` and quantifiers);
 * undefined for anything else (groups, alternatives, ...).
 */
export function exampleFromPattern(pattern: string): string | undefined {
  let src = pattern;
  if (src.startsWith("^")) src = src.slice(1);
  if (src.endsWith("$") && !src.endsWith("\\$")) src = src.slice(0, -1);
  let out = "";
  let i = 0;
  while (i < src.length) {
    let atom: string;
    const c = src[i];
    if (c === "[") {
      const end = src.indexOf("]", i + 1);
      if (end < 0 || src[i + 1] === "^") return undefined;
      atom = src[i + 1] === "\\" ? (src[i + 2] === "d" ? "0" : (src[i + 2] ?? "")) : (src[i + 1] ?? "");
      i = end + 1;
    } else if (c === "\\") {
      const e = src[i + 1] ?? "";
      atom = e === "d" ? "0" : e === "w" ? "a" : e === "s" ? " " : /[A-Za-z]/.test(e) ? "" : e;
      if (atom === "") return undefined;
      i += 2;
    } else if ("()|".includes(c)) {
      return undefined;
    } else {
      atom = c === "." ? "a" : c;
      i++;
    }
    let n = 1;
    const q = /^(\{(\d+)(,\d*)?\}|[+*?])/.exec(src.slice(i));
    if (q) {
      if (q[2] !== undefined) n = Math.max(Number(q[2]), q[3] !== undefined ? 1 : 0);
      i += q[0].length;
    }
    out += atom.repeat(n);
  }
  try {
    return new RegExp(pattern, "u").test(out) ? out : undefined;
  } catch {
    return undefined;
  }
}
