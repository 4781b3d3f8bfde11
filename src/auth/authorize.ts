import { ContextType, MEMBERSHIP } from "../domain/membership/events.ts";
import { PermissionDeniedError } from "../errors.ts";
import type { EventStore } from "../eventstore/eventstore.ts";
import type { Queryable } from "../storage/database.ts";
import type { Caller, ResolvedContext } from "./caller.ts";
import { type Permission, permissionsOf } from "./permissions.ts";

interface Membership {
  contextType: number;
  contextId: string;
  roles: string[];
}

/**
 * Decides whether a caller holds a permission in a context, from the caller's memberships. Memberships
 * are read through one cache per (instance, user): this process's membership events clear it at once,
 * other processes' after at most `ttlMs`.
 */
export class Authorizer {
  private readonly cache = new Map<string, { memberships: Promise<Membership[]>; expires: number }>();

  constructor(
    private readonly db: Queryable,
    eventStore: EventStore,
    private readonly ttlMs = 5_000,
  ) {
    eventStore.onCommitted((events) => {
      for (const event of events) {
        if (event.aggregateType === MEMBERSHIP)
          this.cache.delete(`${event.instanceId}:${event.payload?.user_id ?? ""}`);
      }
      if (events.some((e) => e.aggregateType === MEMBERSHIP && !e.payload?.user_id)) this.cache.clear();
    });
  }

  async memberships(instanceId: string, userId: string): Promise<Membership[]> {
    const key = `${instanceId}:${userId}`;
    const cached = this.cache.get(key);
    if (cached && cached.expires > Date.now()) return cached.memberships;
    const memberships = this.db
      .query<{ context_type: number; context_id: string; roles: string[] }>(
        "SELECT context_type, context_id, roles FROM memberships WHERE instance_id = $1 AND user_id = $2",
        [instanceId, userId],
      )
      .then((rows) =>
        rows.map((r) => ({ contextType: r.context_type, contextId: r.context_id, roles: r.roles })),
      );
    this.cache.set(key, { memberships, expires: Date.now() + this.ttlMs });
    memberships.catch(() => this.cache.delete(key));
    return memberships;
  }

  /** Permissions the caller holds in the context (instance roles count everywhere in the instance). */
  async permissionsIn(caller: Caller, context: ResolvedContext): Promise<Set<Permission>> {
    if (caller.kind === "system") return permissionsOf(["IAM_OWNER"]);
    if (context.type === "system" || context.instanceId !== caller.instanceId) return new Set();
    const roles: string[] = [];
    for (const m of await this.memberships(caller.instanceId, caller.userId)) {
      const applies =
        (m.contextType === ContextType.instance && m.contextId === context.instanceId) ||
        (m.contextType === ContextType.org &&
          (context.type === "org" || context.type === "project") &&
          m.contextId === context.orgId) ||
        (m.contextType === ContextType.project &&
          context.type === "project" &&
          m.contextId === context.projectId);
      if (applies) roles.push(...m.roles);
    }
    return permissionsOf(roles);
  }

  async can(caller: Caller, permission: Permission, context: ResolvedContext): Promise<boolean> {
    return (await this.permissionsIn(caller, context)).has(permission);
  }

  /**
   * Throws PERMISSION_DENIED unless the caller holds `permission` in `context`. "authenticated" asks only
   * that the caller belongs to the context's instance (any user of it, or a system user).
   */
  async authorize(
    caller: Caller,
    permission: Permission | "authenticated",
    context: ResolvedContext,
  ): Promise<void> {
    if (context.type === "system" && caller.kind !== "system") {
      throw new PermissionDeniedError("only system users may act in the system context");
    }
    if (permission === "authenticated") {
      if (caller.kind === "system" || (context.type !== "system" && caller.instanceId === context.instanceId))
        return;
      throw new PermissionDeniedError("permission denied: the caller does not belong to this instance");
    }
    if (!(await this.can(caller, permission, context))) {
      throw new PermissionDeniedError(`permission denied: ${permission} is required`);
    }
  }

  /**
   * The organizations of an instance in which the caller may `permission` (for filtering searches):
   * "all" when an instance role grants it.
   */
  async orgsWith(caller: Caller, permission: Permission, instanceId: string): Promise<"all" | Set<string>> {
    if (caller.kind === "system") return "all";
    if (caller.instanceId !== instanceId) return new Set();
    const memberships = await this.memberships(instanceId, caller.userId);
    const orgs = new Set<string>();
    for (const m of memberships) {
      if (!permissionsOf(m.roles).has(permission)) continue;
      if (m.contextType === ContextType.instance) return "all";
      if (m.contextType === ContextType.org) orgs.add(m.contextId);
    }
    return orgs;
  }

  /**
   * Like `orgsWith`, aware of project memberships: "all" when an instance role grants `permission`,
   * otherwise the organizations (their projects included) and the projects in which a membership grants
   * it. For filtering searches of project resources.
   */
  async scopesWith(
    caller: Caller,
    permission: Permission,
    instanceId: string,
  ): Promise<"all" | { orgs: Set<string>; projects: Set<string> }> {
    if (caller.kind === "system") return "all";
    const scopes = { orgs: new Set<string>(), projects: new Set<string>() };
    if (caller.instanceId !== instanceId) return scopes;
    for (const m of await this.memberships(instanceId, caller.userId)) {
      if (!permissionsOf(m.roles).has(permission)) continue;
      if (m.contextType === ContextType.instance) return "all";
      if (m.contextType === ContextType.org) scopes.orgs.add(m.contextId);
      if (m.contextType === ContextType.project) scopes.projects.add(m.contextId);
    }
    return scopes;
  }
}
