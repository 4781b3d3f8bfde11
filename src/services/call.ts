import {
  type ContextValues,
  createContextKey,
  type HandlerContext,
  type Interceptor,
} from "@connectrpc/connect";
import type { RequestScope } from "../api/scope.ts";
import { scopeKey } from "../api/scope.ts";
import type { Caller, ResolvedContext } from "../auth/caller.ts";
import { type ContextSelector, resolveContext } from "../auth/context.ts";
import { type Permission, secretsPermission } from "../auth/permissions.ts";
import type { FeatureFlag } from "../domain/settings/features.ts";
import { InternalError } from "../errors.ts";
import type { RequestContext } from "../gen/platform/object/v3alpha/object_pb.ts";
import type { ServiceDeps } from "./deps.ts";

export interface Call {
  scope: RequestScope;
  caller: Caller;
  /** Who is recorded as the creator of events this call appends. */
  creator: string;
}

export interface AuthorizedCall extends Call {
  context: ResolvedContext;
}

/** The request scope the transport put on the call. */
export function scopeOf(ctx: HandlerContext): RequestScope {
  const scope = ctx.values.get(scopeKey);
  if (!scope) throw new InternalError("request scope missing");
  return scope;
}

const callerKey = createContextKey<Caller | undefined>(undefined, { description: "platform caller" });

/**
 * Authenticates every call before its request is validated, whatever the protocol: a call without a
 * valid token is 401 even when its input is also wrong. The caller is kept in the call's context values.
 * Methods listed in `publicMethods` (full names) may be called without a token.
 */
export function authenticationInterceptor(
  deps: ServiceDeps,
  publicMethods: ReadonlySet<string> = new Set(),
): Interceptor {
  return (next) => async (req) => {
    const scope = req.contextValues.get(scopeKey);
    const fullName = `${req.service.typeName}/${req.method.name}`;
    if (scope && !(publicMethods.has(fullName) && !scope.authorization)) {
      const caller = await deps.authenticator.authenticate(scope.authorization, scope.instanceId, scope.host);
      req.contextValues.set(callerKey, caller);
      scope.caller = callerName(caller);
    }
    return next(req);
  };
}

/**
 * Who the authentication interceptor found for this call, as the scope of their idempotency keys
 * (src/api/idempotency.ts): the instance and the user, or the system user. Undefined when the call was
 * not authenticated (a public method called without a token).
 */
export function callerScope(values: ContextValues): { instanceId: string; caller: string } | undefined {
  const caller = values.get(callerKey);
  if (!caller) return undefined;
  if (caller.kind === "system") {
    return { instanceId: values.get(scopeKey)?.instanceId ?? "", caller: `system:${caller.userId}` };
  }
  return { instanceId: caller.instanceId, caller: `user:${caller.userId}` };
}

/** The caller the authentication interceptor found for this call (undefined: not authenticated). */
export function callerOf(values: ContextValues): Caller | undefined {
  return values.get(callerKey);
}

/** The authenticated caller (401 when the bearer token is missing or invalid). */
export async function authenticate(deps: ServiceDeps, ctx: HandlerContext): Promise<Call> {
  const scope = scopeOf(ctx);
  let caller = ctx.values.get(callerKey);
  if (!caller) {
    caller = await deps.authenticator.authenticate(scope.authorization, scope.instanceId, scope.host);
    scope.caller = callerName(caller);
  }
  return { scope, caller, creator: caller.userId };
}

/** The caller as the request log names it: the user ID, `system:<id>` for a system API user. */
function callerName(caller: Caller): string {
  return caller.kind === "system" ? `system:${caller.userId}` : caller.userId;
}

/** The proto RequestContext as the plain selector the auth layer understands. */
export function toSelector(ctx: RequestContext | undefined): ContextSelector | undefined {
  const c = ctx?.context;
  switch (c?.case) {
    case "system":
      return c.value ? { system: true } : undefined;
    case "instanceId":
      return { instanceId: c.value };
    case "instanceDomain":
      return { instanceDomain: c.value };
    case "orgId":
      return { orgId: c.value };
    case "orgDomain":
      return { orgDomain: c.value };
    default:
      return undefined;
  }
}

export interface AuthorizeOptions {
  /** The request's `ctx` field. */
  ctx?: RequestContext;
  /** Flags that must be on in the instance (FAILED_PRECONDITION naming the flag otherwise). */
  features?: FeatureFlag[];
}

/**
 * The one entry point of every RPC: authenticate (401), resolve the context (404), check the
 * permission in it (403), check the feature flags of its instance (400 FAILED_PRECONDITION).
 */
export async function authorize(
  deps: ServiceDeps,
  ctx: HandlerContext,
  permission: Permission | "authenticated",
  options: AuthorizeOptions = {},
): Promise<AuthorizedCall> {
  const call = await authenticate(deps, ctx);
  const context = await resolveContext(
    deps.db,
    deps.instances,
    call.caller,
    call.scope.instanceId,
    toSelector(options.ctx),
  );
  await deps.authorizer.authorize(call.caller, permission, context);
  if (options.features?.length && context.type !== "system")
    await deps.features.require(context.instanceId, ...options.features);
  return { ...call, context };
}

/**
 * Whether the call, authorized for `read`, is answered the secrets of what it reads (signing keys): only
 * when the caller also holds the write permission of the resource in the call's context
 * (src/auth/permissions.ts `secretsPermission`). Readers without it get those fields empty.
 */
export function answersSecrets(
  deps: ServiceDeps,
  call: AuthorizedCall,
  read: Extract<Permission, `${string}.read`>,
): Promise<boolean> {
  return deps.authorizer.can(call.caller, secretsPermission(read), call.context);
}
