/**
 * The function conditions of the execution engine (docs/actions.md "Function conditions") at the points
 * the provider returns claims: `preuserinfo` for userinfo, introspection and ID tokens that carry userinfo
 * claims, `preaccesstoken` for JWT access tokens. Without an execution for the function this costs no
 * query (the engine's cache); with one, the targets are called (outside any transaction) with the user,
 * the client and the claims so far, their claims appended (never overwriting, never reserved names), the
 * user metadata they set stored, their log lines put in `urn:platform:iam:action:<function>:log`.
 *
 * A target that interrupts on error fails the request: `temporarily_unavailable` (503) when it timed out
 * or could not be reached, `server_error` (500) otherwise, the description naming the target.
 */
import { UserType } from "../domain/user/events.ts";
import { Code, PlatformError } from "../errors.ts";
import type { ExecutionEngine } from "../execution/engine.ts";
import {
  applyClaims,
  applyUserMetadata,
  type ExecutionFunction,
  runFunction,
} from "../execution/functions.ts";
import { loadUser, type UserRecord } from "./claims.ts";
import type { OidcClient } from "./clients.ts";
import type { OidcContext, RequestInfo } from "./context.ts";
import { ServerError, TemporarilyUnavailable } from "./errors.ts";

/** The user as function targets see it (snake_case, unset fields left out). */
export function userJson(user: UserRecord): Record<string, unknown> {
  const out: Record<string, unknown> = {
    id: user.id,
    org_id: user.orgId,
    username: user.username,
    type: user.type === UserType.human ? "human" : "machine",
    org_name: user.orgName,
    org_primary_domain: user.orgPrimaryDomain,
  };
  const optional: Record<string, unknown> = {
    given_name: user.givenName,
    family_name: user.familyName,
    display_name: user.displayName,
    nick_name: user.nickName,
    preferred_language: user.preferredLanguage,
    email: user.email,
    email_verified: user.email ? user.emailVerified : null,
    phone: user.phone,
    phone_verified: user.phone ? user.phoneVerified : null,
    machine_name: user.machineName,
  };
  for (const [key, value] of Object.entries(optional)) if (value !== null) out[key] = value;
  return out;
}

/** The client as function targets see it. */
export function clientJson(client: OidcClient | undefined): Record<string, unknown> {
  if (!client) return {};
  const out: Record<string, unknown> = {
    client_id: client.clientId,
    kind: client.kind,
    org_id: client.orgId,
  };
  if (client.kind === "app") out.app_id = client.id;
  if (client.projectId) out.project_id = client.projectId;
  return out;
}

/**
 * `claims` after the function `name`'s targets (unchanged when no execution applies). `user` is loaded
 * when not given and needed.
 */
export async function withFunctionClaims(
  ctx: OidcContext,
  info: RequestInfo,
  name: ExecutionFunction,
  subject: { userId: string; user?: UserRecord },
  client: OidcClient | undefined,
  claims: Record<string, unknown>,
): Promise<Record<string, unknown>> {
  const engine: ExecutionEngine | undefined = ctx.executions;
  if (!engine) return claims;
  const instanceId = info.instance.id;
  if ((await engine.functionTargets(instanceId, name)).length === 0) return claims;
  const user = subject.user ?? (await loadUser(ctx.db, instanceId, subject.userId));
  let result: Awaited<ReturnType<typeof runFunction>>;
  try {
    result = await runFunction(engine, instanceId, name, {
      user: user ? userJson(user) : { id: subject.userId },
      client: clientJson(client),
      claims,
    });
  } catch (error) {
    if (!(error instanceof PlatformError)) throw error;
    if (error.code === Code.DEADLINE_EXCEEDED || error.code === Code.UNAVAILABLE)
      throw new TemporarilyUnavailable(error.message);
    throw new ServerError(error.message);
  }
  if (user) await applyUserMetadata(engine.eventStore, instanceId, user.id, result.setUserMetadata);
  return applyClaims(claims, name, result);
}
