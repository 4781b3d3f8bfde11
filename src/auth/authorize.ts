import { ContextType, MEMBERSHIP } from "../domain/membership/events.ts";
import { PermissionDeniedError } from "../errors.ts";
import type { EventStore } from "../eventstore/eventstore.ts";
import type { Queryable } from "../storage/database.ts";
import type { Caller, ResolvedContext } from "./caller.ts";
import { coversRoles, type Permission, permissionsOf } from "./permissions.ts";

/** A membership as the Authorizer caches it. */
export interface Membership {
  contextType: number;
  contextId: string;
  roles: string[];
}

/** Roles a membership write is about to give a user, and where. */
export interface RolesGiven {
  context: ResolvedContext;
  roles: readonly string[];
}

/** A membership row as the account-control rule reads it. */
export interface StoredMembership {
  context_type: number;
  context_id: string;
  org_id: string | null;
  roles: string[];
  [key: string]: unknown;
}
const NONE: ReadonlySet<Permission> = new Set();
const MEMBERSHIP_COLUMNS = "m.context_type, m.context_id, m.org_id, m.roles";

/**
 * Whether the owners of organization `orgId` control an account of that organization holding
 * `memberships` (the rule of `accountControlGap`, with an ORG_OWNER of `orgId` as the caller): every
 * membership is in the organization or one of its projects, with roles whose permissions ORG_OWNER holds
 * there. An instance role, or a role in another organization or in a project of another, puts the account
 * above the organization's owners. The login policy an organization sets applies only to the accounts its
 * owners control (docs/factors.md, "Accounts above their organization").
 */
export function orgOwnersControl(orgId: string, memberships: readonly StoredMembership[]): boolean {
  const owner = permissionsOf(["ORG_OWNER"]);
  return memberships.every((m) => {
    const inOrg =
      (m.context_type === ContextType.org && m.context_id === orgId) ||
      (m.context_type === ContextType.project && m.org_id === orgId);
    return coversRoles(inOrg ? owner : NONE, m.roles);
  });
}

/** Every membership of a user, as the account-control rules read them (fresh, not from the cache). */
export function membershipsOfUser(
  db: Queryable,
  instanceId: string,
  userId: string,
): Promise<StoredMembership[]> {
  return db.query<StoredMembership>(
    `SELECT ${MEMBERSHIP_COLUMNS} FROM memberships m WHERE m.instance_id = $1 AND m.user_id = $2`,
    [instanceId, userId],
  );
}

/** The context a stored membership applies in (a project's organization is its resource owner). */
function membershipContext(instanceId: string, m: StoredMembership): ResolvedContext {
  if (m.context_type === ContextType.instance) return { type: "instance", instanceId };
  if (m.context_type === ContextType.org) return { type: "org", instanceId, orgId: m.context_id };
  return { type: "project", instanceId, orgId: m.org_id ?? "", projectId: m.context_id };
}

/**
 * Decides whether a caller holds a permission in a context, from the caller's memberships. Memberships
 * are read through one cache per (instance, user): membership events clear it at once (other processes'
 * when their notification arrives, on PostgreSQL), and entries expire after `ttlMs` in any case.
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
    eventStore.onStale(() => this.cache.clear());
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

  /**
   * The caller's memberships whose roles apply in the context: its instance membership, its membership in
   * the context's organization, and its membership in the context's project. None for a system user (it
   * holds no memberships) or outside the caller's instance.
   */
  async membershipsIn(caller: Caller, context: ResolvedContext): Promise<Membership[]> {
    if (caller.kind === "system") return [];
    if (context.type === "system" || context.instanceId !== caller.instanceId) return [];
    return (await this.memberships(caller.instanceId, caller.userId)).filter(
      (m) =>
        (m.contextType === ContextType.instance && m.contextId === context.instanceId) ||
        (m.contextType === ContextType.org &&
          (context.type === "org" || context.type === "project") &&
          m.contextId === context.orgId) ||
        (m.contextType === ContextType.project &&
          context.type === "project" &&
          m.contextId === context.projectId),
    );
  }

  /** Permissions the caller holds in the context (instance roles count everywhere in the instance). */
  async permissionsIn(caller: Caller, context: ResolvedContext): Promise<ReadonlySet<Permission>> {
    if (caller.kind === "system") return permissionsOf(["IAM_OWNER"]);
    const applying = await this.membershipsIn(caller, context);
    if (applying.length === 0) return NONE;
    return permissionsOf(applying.length === 1 ? applying[0].roles : applying.flatMap((m) => m.roles));
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
   * No control over a more privileged account: whether the caller holds, in the context of each membership
   * of the user `targetId`, at least what that membership's roles confer there (`coversRoles`), and the same
   * for `given`, the roles a membership write is about to give the user. Instance roles of the caller count
   * everywhere in the instance, organization roles in the organization and its projects, project roles in
   * their project. A user controls its own account (it holds its own roles); system users control every
   * account. The target's memberships are read fresh, not from the cache: a role given a moment ago in
   * another process counts at once. Answers why not: "held" (the target holds more) or "given".
   */
  async accountControlGap(
    caller: Caller,
    instanceId: string,
    targetId: string,
    given?: RolesGiven,
  ): Promise<"held" | "given" | undefined> {
    if (caller.kind === "system") return undefined;
    if (caller.instanceId !== instanceId) return "held";
    if (caller.userId !== targetId) {
      const held = await membershipsOfUser(this.db, instanceId, targetId);
      if (!(await this.covers(caller, instanceId, held))) return "held";
    }
    if (given && !coversRoles(await this.permissionsIn(caller, given.context), given.roles)) return "given";
    return undefined;
  }

  /**
   * Removing an organization removes its users: PERMISSION_DENIED unless the caller controls every one of
   * them (as `accountControlGap`; the caller's own account counts as controlled).
   */
  async requireControlOfOrgUsers(caller: Caller, instanceId: string, orgId: string): Promise<void> {
    if (caller.kind === "system") return;
    const held =
      caller.instanceId === instanceId
        ? await this.db.query<StoredMembership>(
            `SELECT ${MEMBERSHIP_COLUMNS} FROM memberships m JOIN users u ON u.instance_id = m.instance_id AND u.id = m.user_id
             WHERE m.instance_id = $1 AND u.org_id = $2 AND u.id <> $3`,
            [instanceId, orgId, caller.userId],
          )
        : undefined;
    if (!held || !(await this.covers(caller, instanceId, held)))
      throw new PermissionDeniedError(
        "permission denied: users of the organization hold roles the caller does not hold (no control over a more privileged account)",
      );
  }

  /** Whether the caller holds what each of these memberships' roles confer in its context. */
  private async covers(caller: Caller, instanceId: string, held: StoredMembership[]): Promise<boolean> {
    for (const m of held) {
      const permissions = await this.permissionsIn(caller, membershipContext(instanceId, m));
      if (!coversRoles(permissions, m.roles)) return false;
    }
    return true;
  }

  /** `accountControlGap` as a boolean (token exchange: may the actor impersonate the subject). */
  async controlsAccount(caller: Caller, instanceId: string, targetId: string): Promise<boolean> {
    return (await this.accountControlGap(caller, instanceId, targetId)) === undefined;
  }

  /** Throws PERMISSION_DENIED unless the caller controls the account `targetId` (`accountControlGap`). */
  async requireAccountControl(
    caller: Caller,
    instanceId: string,
    targetId: string,
    given?: RolesGiven,
  ): Promise<void> {
    const gap = await this.accountControlGap(caller, instanceId, targetId, given);
    if (gap === "held")
      throw new PermissionDeniedError(
        "permission denied: the user holds roles the caller does not hold (no control over a more privileged account)",
      );
    if (gap === "given")
      throw new PermissionDeniedError(
        "permission denied: the caller may give only roles whose permissions it holds in that context (no control over a more privileged account)",
      );
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
