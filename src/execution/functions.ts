/**
 * Function conditions: `preuserinfo` (before the claims of userinfo, introspection and
 * ID tokens that carry userinfo claims are returned) and `preaccesstoken` (before a JWT access token is
 * signed). The OIDC endpoints call `runFunction` with the user, the client and the claims so far; every
 * target of the function's execution (and its includes) is called in order with
 *
 *   {"function": "preuserinfo", "instance_id": "...", "user": {...}, "client": {...}, "claims": {...}}
 *
 * and a `rest_request_response` target may answer
 *
 *   {"append_claims": [{"key": "k", "value": <any JSON>}],
 *    "set_user_metadata": [{"key": "k", "value": "<base64>"}],
 *    "append_log_claims": ["message"]}
 *
 * Claims are appended, never overwritten: reserved names (RESERVED_CLAIMS, the `urn:platform:iam:` prefix)
 * and names already present are refused (listed in `refused`, logged, and named in the log claim). Each
 * target sees the claims as the previous ones left them. A `rest_webhook` target is only notified.
 * Errors follow the target's execution type, as for requests. Call it outside any database transaction.
 */
import { executionFunctions } from "../domain/action/conditions.ts";
import { foldUser, metadataEvents } from "../domain/user/commands.ts";
import { USER } from "../domain/user/events.ts";
import type { EventStore } from "../eventstore/eventstore.ts";
import type { CallOptions, ExecutionEngine } from "./engine.ts";

export type ExecutionFunction = (typeof executionFunctions)[number];

/** What the function's targets are told. */
export interface FunctionInput {
  /** The user the claims are about (as the OIDC side describes it: id, org, names, ...). */
  user: Record<string, unknown>;
  /** The client (application) asking. */
  client?: Record<string, unknown>;
  /** The claims so far. */
  claims: Record<string, unknown>;
}

export interface FunctionResult {
  /** Claims to add, in order (already checked: none reserved, none present before). */
  appendClaims: { key: string; value: unknown }[];
  /** User metadata to set (value base64, "" removes): `applyUserMetadata`. */
  setUserMetadata: { key: string; value: string }[];
  /** Log lines of the targets, for the claim `logClaimName(function)`. */
  appendLogClaims: string[];
  /** Claims a target asked for that were refused, and why. */
  refused: { key: string; reason: string; target: string }[];
}

/** The claim the log lines of a function go in: `urn:platform:iam:action:<function>:log`. */
export function logClaimName(name: string): string {
  return `urn:platform:iam:action:${name}:log`;
}

/** Claim names no target may set: the JWT and OIDC protocol claims (RFC 7519, OIDC Core, RFC 7662, RFC 8693). */
export const RESERVED_CLAIMS = new Set([
  "iss",
  "sub",
  "aud",
  "exp",
  "nbf",
  "iat",
  "jti",
  "azp",
  "nonce",
  "auth_time",
  "acr",
  "amr",
  "at_hash",
  "c_hash",
  "s_hash",
  "sid",
  "scope",
  "client_id",
  "cnf",
  "act",
  "may_act",
  "token_type",
  "active",
  "username",
  "updated_at",
]);
const RESERVED_PREFIX = "urn:platform:iam:";

/** Why `key` may not be set by a target, or undefined when it may (given the claims so far). */
export function claimRefusal(key: string, claims: Record<string, unknown>): string | undefined {
  if (key === "") return "the claim name is empty";
  if (RESERVED_CLAIMS.has(key)) return `"${key}" is a reserved claim`;
  if (key.toLowerCase().startsWith(RESERVED_PREFIX)) return `"${key}" is reserved (${RESERVED_PREFIX}*)`;
  if (Object.hasOwn(claims, key)) return `"${key}" is already set and cannot be overwritten`;
  return undefined;
}

interface TargetAnswer {
  append_claims?: { key: string; value: unknown }[];
  set_user_metadata?: { key: string; value: string }[];
  append_log_claims?: string[];
}

/** A function target's answer, checked; throws the reason when it is unusable. */
function parseAnswer(body: Buffer): TargetAnswer {
  if (body.length === 0) return {};
  let json: unknown;
  try {
    json = JSON.parse(body.toString("utf8"));
  } catch {
    throw new Error("not JSON");
  }
  if (json === null || typeof json !== "object" || Array.isArray(json)) throw new Error("not a JSON object");
  const answer = json as Record<string, unknown>;
  for (const key of Object.keys(answer)) {
    if (!["append_claims", "set_user_metadata", "append_log_claims"].includes(key))
      throw new Error(`unknown field "${key}"`);
  }
  const list = (field: string) => {
    const v = answer[field];
    if (v === undefined || v === null) return [];
    if (!Array.isArray(v)) throw new Error(`${field}: must be a list`);
    return v as unknown[];
  };
  const pairs = (field: string, stringValue: boolean) =>
    list(field).map((item, i) => {
      const entry = item as { key?: unknown; value?: unknown } | null;
      if (entry === null || typeof entry !== "object" || typeof entry.key !== "string")
        throw new Error(`${field}[${i}].key: must be a string`);
      if (entry.key.length === 0 || entry.key.length > 200)
        throw new Error(`${field}[${i}].key: must have 1 to 200 characters`);
      if (stringValue && (typeof entry.value !== "string" || !/^[A-Za-z0-9+/_-]*={0,2}$/.test(entry.value)))
        throw new Error(`${field}[${i}].value: must be base64`);
      return { key: entry.key, value: entry.value };
    });
  return {
    append_claims: pairs("append_claims", false),
    set_user_metadata: pairs("set_user_metadata", true) as { key: string; value: string }[],
    append_log_claims: list("append_log_claims").map((line, i) => {
      if (typeof line !== "string") throw new Error(`append_log_claims[${i}]: must be a string`);
      return line;
    }),
  };
}

/**
 * Runs the targets of function `name` in instance `instanceId` (nothing when no execution applies or the
 * instance's `actions` feature is off). A target that interrupts on error makes this throw its
 * PlatformError (DEADLINE_EXCEEDED, UNAVAILABLE or FAILED_PRECONDITION naming the target).
 */
export async function runFunction(
  engine: ExecutionEngine,
  instanceId: string,
  name: ExecutionFunction,
  input: FunctionInput,
  options: CallOptions = {},
): Promise<FunctionResult> {
  const result: FunctionResult = { appendClaims: [], setUserMetadata: [], appendLogClaims: [], refused: [] };
  if (!(executionFunctions as readonly string[]).includes(name)) throw new Error(`unknown function ${name}`);
  const targets = await engine.functionTargets(instanceId, name);
  if (targets.length === 0 || !(await engine.enabled(instanceId))) return result;
  const log = options.log ?? engine.log;
  await engine.callInOrder(
    targets,
    `function ${name}`,
    { ...input.claims },
    (claims) => ({
      function: name,
      instance_id: instanceId,
      user: input.user,
      client: input.client ?? {},
      claims,
    }),
    (body, claims, target) => {
      const answer = parseAnswer(body);
      const next = { ...claims };
      for (const claim of answer.append_claims ?? []) {
        const refusal = claimRefusal(claim.key, next);
        if (refusal) {
          result.refused.push({ key: claim.key, reason: refusal, target: target.name });
          result.appendLogClaims.push(`target ${target.name}: claim ${refusal}`);
          log.warn({ target: target.id, claim: claim.key }, `function ${name}: claim refused: ${refusal}`);
          continue;
        }
        next[claim.key] = claim.value;
        result.appendClaims.push({ key: claim.key, value: claim.value });
      }
      result.setUserMetadata.push(...(answer.set_user_metadata ?? []));
      result.appendLogClaims.push(...(answer.append_log_claims ?? []));
      return next;
    },
    options,
  );
  return result;
}

/**
 * `claims` with a function's result applied: the appended claims, and the log lines in
 * `logClaimName(name)` (added to what is there).
 */
export function applyClaims(
  claims: Record<string, unknown>,
  name: ExecutionFunction,
  result: FunctionResult,
): Record<string, unknown> {
  const out = { ...claims };
  for (const { key, value } of result.appendClaims) if (!Object.hasOwn(out, key)) out[key] = value;
  if (result.appendLogClaims.length) {
    const claim = logClaimName(name);
    const before = Array.isArray(out[claim]) ? (out[claim] as unknown[]) : [];
    out[claim] = [...before, ...result.appendLogClaims];
  }
  return out;
}

/**
 * Stores the metadata a function's targets set on the user (the events `user.metadata.set` and
 * `user.metadata.removed`, only for real changes). Does nothing for an empty list or a deleted user.
 */
export async function applyUserMetadata(
  eventStore: EventStore,
  instanceId: string,
  userId: string,
  entries: { key: string; value: string }[],
  creator = "system",
): Promise<void> {
  if (entries.length === 0) return;
  const wanted = Object.fromEntries(entries.map((e) => [e.key, e.value]));
  await eventStore.push({ instanceId, creator }, async (tx) => {
    const user = foldUser(await tx.load(USER, userId));
    return user ? metadataEvents(user, wanted) : [];
  });
}
