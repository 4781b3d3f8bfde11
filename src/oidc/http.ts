import type { FastifyReply, FastifyRequest } from "fastify";
import { InvalidClient, InvalidRequest, InvalidToken, type OAuthError } from "./errors.ts";

/** Request parameters: each name at most once; empty values count as absent (RFC 6749 §3.1). */
export type Params = ReadonlyMap<string, string>;

const FORM = "application/x-www-form-urlencoded";

/**
 * The parameters of a form-encoded POST (RFC 6749 §3.2): another content type, or a parameter given twice,
 * is `invalid_request`. The body arrives as a string (the OIDC routes register a raw parser).
 * `multiValued` names parameters that may repeat (RFC 8693 `audience`, `resource`): see `parseParams`.
 */
export function formParams(request: FastifyRequest, multiValued?: ReadonlySet<string>): Params {
  const type = String(request.headers["content-type"] ?? "")
    .split(";", 1)[0]
    .trim()
    .toLowerCase();
  if (type !== FORM) {
    throw new InvalidRequest(`the request body must be ${FORM}${type ? `, not ${type}` : ""}`);
  }
  return parseParams(typeof request.body === "string" ? request.body : "", multiValued);
}

/**
 * Parses `a=1&b=2`, refusing repeated parameters, except those of `multiValued`: their values are joined
 * with spaces (`multiValues` splits them again; the values they carry never contain spaces).
 */
export function parseParams(encoded: string, multiValued?: ReadonlySet<string>): Params {
  const params = new Map<string, string>();
  if (encoded === "") return params;
  const seen = new Set<string>();
  for (const [name, value] of new URLSearchParams(encoded)) {
    if (multiValued?.has(name)) {
      if (value !== "") params.set(name, params.has(name) ? `${params.get(name)} ${value}` : value);
      continue;
    }
    if (seen.has(name)) throw new InvalidRequest(`parameter ${name} is repeated`);
    seen.add(name);
    if (value !== "") params.set(name, value);
  }
  return params;
}

/**
 * The parameters of a browser request (authorization, end session), where a repeated parameter must not
 * stop the parsing: which parameters were repeated decides whether the error can go to the client's
 * redirect URI or must be shown at the server. Empty values count as absent.
 */
export interface CollectedParams {
  values: Params;
  /** Names given more than once (their value in `values` is the first non-empty one). */
  repeated: ReadonlySet<string>;
}

export function collectParams(encoded: string): CollectedParams {
  const values = new Map<string, string>();
  const seen = new Set<string>();
  const repeated = new Set<string>();
  for (const [name, value] of new URLSearchParams(encoded)) {
    if (seen.has(name)) repeated.add(name);
    seen.add(name);
    if (value !== "" && !values.has(name)) values.set(name, value);
  }
  return { values, repeated };
}

/** The values of a multi-valued parameter (repeated, or space-separated); empty when it is absent. */
export function multiValues(params: Params, name: string): string[] {
  return (params.get(name) ?? "").split(" ").filter((v) => v !== "");
}

/** A parameter that must be present. */
export function required(params: Params, name: string): string {
  const value = params.get(name);
  if (value === undefined) throw new InvalidRequest(`parameter ${name} is required`);
  return value;
}

/** JSON that must not be cached (token, introspection, userinfo and error responses). */
export function sendNoStore(reply: FastifyReply, body: unknown, status = 200): FastifyReply {
  return reply
    .code(status)
    .header("cache-control", "no-store")
    .header("pragma", "no-cache")
    .type("application/json; charset=utf-8")
    .send(typeof body === "string" ? body : JSON.stringify(body));
}

/** `{error, error_description}` with the error's status; the WWW-Authenticate challenge where one is due. */
export function sendOAuthError(reply: FastifyReply, error: OAuthError, realm: string): FastifyReply {
  if (error instanceof InvalidClient && error.basic) {
    reply.header("www-authenticate", `Basic realm="${realm}"`);
  }
  if (error instanceof InvalidToken) {
    reply.header(
      "www-authenticate",
      `Bearer realm="${realm}", error="invalid_token", error_description="${error.description.replace(/"/g, "'")}"`,
    );
  }
  return sendNoStore(reply, { error: error.error, error_description: error.description }, error.status);
}
