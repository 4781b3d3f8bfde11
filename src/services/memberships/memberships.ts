import { create } from "@bufbuild/protobuf";
import type { HandlerContext } from "@connectrpc/connect";
import { apiService } from "../../api/register.ts";
import type { Membership as CachedMembership } from "../../auth/authorize.ts";
import type { ResolvedContext } from "../../auth/caller.ts";
import { type Permission, rolesByContext } from "../../auth/permissions.ts";
import {
  addMembershipEvent,
  changeMembershipEvents,
  foldMembership,
  type MembershipAggregate,
  removeMembershipEvent,
} from "../../domain/membership/commands.ts";
import { ContextType, MEMBERSHIP } from "../../domain/membership/events.ts";
import { holdOrg, holdUser } from "../../domain/org/locks.ts";
import { OwnerType, type SettingsOwner } from "../../domain/settings/events.ts";
import { InvalidArgumentError, NotFoundError } from "../../errors.ts";
import type { StoredEvent } from "../../eventstore/types.ts";
import {
  CallerMembershipSchema,
  type Membership,
  MembershipContextSchema,
  MembershipContextType,
  MembershipFieldName,
  MembershipSchema,
  type MembershipSearchFilter,
  PatchMembershipSchema,
  PlatformMemberships,
  RoleInContextSchema,
} from "../../gen/platform/resources/membership/v3alpha/membership_service_pb.ts";
import { newId } from "../../id.ts";
import { search, toPage, Where } from "../../query/search.ts";
import type { Queryable } from "../../storage/database.ts";
import { type AuthorizedCall, authenticate, authorize } from "../call.ts";
import type { ServiceDeps } from "../deps.ts";
import { listDetails, resourceDetails } from "../mapping.ts";
import { nonEmptyList, patchFields } from "../patch.ts";

interface MembershipRow {
  id: string;
  context_type: number;
  context_id: string;
  org_id: string | null;
  user_id: string;
  roles: string[];
  created_at: Date;
  changed_at: Date;
  sequence: number;
  [key: string]: unknown;
}

const COLUMNS =
  "m.id, m.context_type, m.context_id, m.org_id, m.user_id, m.roles, m.created_at, m.changed_at, m.sequence";

/** Read-model context type ↔ API MembershipContextType. */
const apiContextType: Record<number, MembershipContextType> = {
  [ContextType.instance]: MembershipContextType.INSTANCE,
  [ContextType.org]: MembershipContextType.ORG,
  [ContextType.project]: MembershipContextType.PROJECT,
};
const storedContextType: Record<number, ContextType> = {
  [MembershipContextType.INSTANCE]: ContextType.instance,
  [MembershipContextType.ORG]: ContextType.org,
  [MembershipContextType.PROJECT]: ContextType.project,
};

const sortColumns: Record<number, string> = {
  [MembershipFieldName.UNSPECIFIED]: "m.created_at",
  [MembershipFieldName.ID]: "m.id",
  [MembershipFieldName.CREATION_DATE]: "m.created_at",
  [MembershipFieldName.CHANGE_DATE]: "m.changed_at",
  [MembershipFieldName.USER_ID]: "m.user_id",
};

type MemberContext = Exclude<ResolvedContext, { type: "system" }>;

/** Stored context (type, ID) and resource owner of a resolved context. */
function stored(context: MemberContext): { type: ContextType; id: string; owner: string } {
  switch (context.type) {
    case "instance":
      return { type: ContextType.instance, id: context.instanceId, owner: context.instanceId };
    case "org":
      return { type: ContextType.org, id: context.orgId, owner: context.orgId };
    case "project":
      return { type: ContextType.project, id: context.projectId, owner: context.orgId };
  }
}

function ownerOf(contextType: number, resourceOwner: string): SettingsOwner {
  return {
    type: contextType === ContextType.instance ? OwnerType.instance : OwnerType.org,
    id: resourceOwner,
  };
}

/** The context a membership row applies to (for the permission check). */
function contextOfRow(instanceId: string, row: MembershipRow): MemberContext {
  if (row.context_type === ContextType.instance) return { type: "instance", instanceId };
  if (row.context_type === ContextType.org) return { type: "org", instanceId, orgId: row.context_id };
  return { type: "project", instanceId, orgId: row.org_id ?? "", projectId: row.context_id };
}

const date = (value: unknown): Date => (value instanceof Date ? value : new Date(String(value)));

function toMembership(instanceId: string, row: MembershipRow): Membership {
  return create(MembershipSchema, {
    details: resourceDetails({
      id: row.id,
      sequence: Number(row.sequence),
      changeDate: date(row.changed_at),
      owner: ownerOf(
        row.context_type,
        row.context_type === ContextType.instance ? instanceId : (row.org_id ?? ""),
      ),
    }),
    userId: row.user_id,
    roles: row.roles,
    context: create(MembershipContextSchema, {
      type: apiContextType[row.context_type] ?? MembershipContextType.UNSPECIFIED,
      id: row.context_id,
    }),
  });
}

/** A cached membership's context as the API shows it. */
function apiContext(m: CachedMembership) {
  return create(MembershipContextSchema, {
    type: apiContextType[m.contextType] ?? MembershipContextType.UNSPECIFIED,
    id: m.contextId,
  });
}

/** Memberships by where they sit (instance, organization, project), then by context ID. */
function sortedMemberships(memberships: readonly CachedMembership[]): CachedMembership[] {
  return [...memberships].sort(
    (a, b) =>
      a.contextType - b.contextType || (a.contextId < b.contextId ? -1 : a.contextId > b.contextId ? 1 : 0),
  );
}

/** Roles must be available in the context (rolesByContext), naming the first that is not. */
function checkRoles(roles: string[], contextType: MemberContext["type"], field: string): void {
  const available: readonly string[] = rolesByContext[contextType];
  roles.forEach((role, i) => {
    if (!available.includes(role)) {
      throw new InvalidArgumentError(
        `"${role}" is not a role of ${contextType} memberships (available: ${available.join(", ")})`,
        `${field}[${i}]`,
      );
    }
  });
}

/** The project `projectId` of the instance as a context (404 when unknown or outside `within`). */
async function projectContext(
  db: Queryable,
  context: MemberContext,
  projectId: string,
): Promise<MemberContext> {
  const rows = await db.query<{ org_id: string }>(
    "SELECT org_id FROM projects WHERE instance_id = $1 AND id = $2",
    [context.instanceId, projectId],
  );
  const orgId = rows[0]?.org_id;
  if (!orgId || (context.type !== "instance" && context.orgId !== orgId))
    throw new NotFoundError("project not found");
  return { type: "project", instanceId: context.instanceId, orgId, projectId };
}

/**
 * PlatformMemberships: administrative roles of users in the instance, an organization or a project.
 * The Authorizer's membership cache is dropped by every membership event (they carry `user_id`).
 * Every write and delete also needs control over the member's account, with the roles it gives counted
 * as held (no control over a more privileged account: `Authorizer.requireAccountControl`).
 */
export function membershipsService(deps: ServiceDeps) {
  /** The context of `ctx` (or of a project in it); memberships exist below the system only. */
  async function memberContext(call: AuthorizedCall, projectId: string | undefined): Promise<MemberContext> {
    if (call.context.type === "system")
      throw new InvalidArgumentError("memberships exist in an instance, organization or project", "ctx");
    return projectId === undefined ? call.context : projectContext(deps.db, call.context, projectId);
  }

  /**
   * The membership `id` of the Host's instance with `permission` in its context: 404 when it is unknown
   * or the caller may not even read it (membership.read), 403 when it may read it but
   * lacks `permission`.
   */
  async function membershipCall(ctx: HandlerContext, id: string, permission: Permission) {
    const { scope, caller } = await authenticate(deps, ctx);
    const instanceId = scope.instanceId ?? "";
    const rows = await deps.db.query<MembershipRow>(
      `SELECT ${COLUMNS} FROM memberships m WHERE m.instance_id = $1 AND m.id = $2`,
      [instanceId, id],
    );
    const row = rows[0];
    if (!row) throw new NotFoundError("membership not found");
    const context = contextOfRow(instanceId, row);
    if (!(await deps.authorizer.can(caller, "membership.read", context)))
      throw new NotFoundError("membership not found");
    await deps.authorizer.authorize(caller, permission, context);
    return { instanceId, caller, creator: caller.userId, row, context };
  }

  /**
   * The member-to-be `userId` must be a user the caller may read: `user.read` in the user's organization
   * (the caller's own user counts as readable). A user of another organization can become a member of
   * this context (cross-organization memberships, e.g. added by an IAM_OWNER or IAM_ORG_MANAGER), but for a
   * caller who may not read it, it is answered exactly like an unknown ID: same 404, same message, and the
   * same path (one lookup and one permission check either way), so membership calls reveal no user IDs of
   * organizations the caller cannot see.
   */
  async function requireReadableUser(call: AuthorizedCall, instanceId: string, userId: string) {
    const rows = await deps.db.query<{ org_id: string }>(
      "SELECT org_id FROM users WHERE instance_id = $1 AND id = $2",
      [instanceId, userId],
    );
    const userOrg: MemberContext = { type: "org", instanceId, orgId: rows[0]?.org_id ?? "" };
    const readable = await deps.authorizer.can(call.caller, "user.read", userOrg);
    const self = call.caller.kind === "user" && call.caller.userId === userId;
    if (rows.length === 0 || !(readable || self)) throw new NotFoundError("user not found");
  }

  function details(m: MembershipAggregate, stored: StoredEvent[]) {
    const last = stored.filter((e) => e.aggregateType === MEMBERSHIP && e.aggregateId === m.id).at(-1);
    return resourceDetails({
      id: m.id,
      sequence: last?.sequence ?? m.sequence,
      changeDate: last?.createdAt ?? m.changeDate,
      owner: ownerOf(m.contextType, m.resourceOwner),
    });
  }

  function filterWhere(where: Where, filter: MembershipSearchFilter): void {
    const f = filter.filter;
    switch (f.case) {
      case "user":
        where.and((p) => `m.user_id = ${p(f.value.userId)}`);
        return;
      case "role":
        where.and((p) => `${p(f.value.role)} = ANY(m.roles)`);
        return;
      case "context": {
        const type = storedContextType[f.value.type];
        where.and((p) => `m.context_type = ${p(type)}`);
        if (f.value.id) where.and((p) => `m.context_id = ${p(f.value.id)}`);
        return;
      }
      case "ids":
        where.in("m.id", f.value.ids);
        return;
    }
  }

  return apiService(PlatformMemberships, {
    async createMembership(req, ctx) {
      const call = await authorize(deps, ctx, "authenticated", { ctx: req.ctx });
      const input = req.membership!;
      const context = await memberContext(call, input.projectId);
      await deps.authorizer.authorize(call.caller, "membership.write", context);
      checkRoles(input.roles, context.type, "membership.roles");
      await requireReadableUser(call, context.instanceId, input.userId);
      await deps.authorizer.requireAccountControl(call.caller, context.instanceId, input.userId, {
        context,
        roles: input.roles,
      });
      const target = stored(context);
      const id = newId();
      const [event] = await deps.eventStore.push(
        { instanceId: context.instanceId, creator: call.creator },
        async (tx) => {
          if (context.type !== "instance") await holdOrg(tx, context.instanceId, context.orgId);
          await holdUser(tx, context.instanceId, input.userId);
          return [
            addMembershipEvent(id, target.owner, {
              context_type: target.type,
              context_id: target.id,
              user_id: input.userId,
              roles: input.roles,
            }),
          ];
        },
      );
      return {
        details: resourceDetails({
          id,
          sequence: event.sequence,
          changeDate: event.createdAt,
          owner: ownerOf(target.type, target.owner),
        }),
      };
    },

    async listAvailableRoles(req, ctx) {
      const call = await authorize(deps, ctx, "authenticated", { ctx: req.ctx });
      const context = await memberContext(call, req.projectId);
      return { roles: [...rolesByContext[context.type]] };
    },

    async listMyPermissions(req, ctx) {
      const call = await authorize(deps, ctx, "authenticated", { ctx: req.ctx });
      let context = call.context;
      if (req.projectId !== undefined) context = await memberContext(call, req.projectId);
      const { caller } = call;
      const [held, applying, all] = await Promise.all([
        deps.authorizer.permissionsIn(caller, context),
        deps.authorizer.membershipsIn(caller, context),
        caller.kind === "user" ? deps.authorizer.memberships(caller.instanceId, caller.userId) : [],
      ]);
      const roles = sortedMemberships(applying).flatMap((m) =>
        [...m.roles].sort().map((role) => create(RoleInContextSchema, { role, context: apiContext(m) })),
      );
      return {
        permissions: [...held].sort(),
        roles,
        systemUser: caller.kind === "system",
        memberships: sortedMemberships(all).map((m) =>
          create(CallerMembershipSchema, { context: apiContext(m), roles: [...m.roles].sort() }),
        ),
        userId: caller.userId,
        orgId: caller.kind === "user" ? caller.orgId : "",
      };
    },

    async getMembership(req, ctx) {
      const { instanceId, row } = await membershipCall(ctx, req.id, "membership.read");
      return { membership: toMembership(instanceId, row) };
    },

    async patchMembership(req, ctx) {
      const fields = patchFields(PatchMembershipSchema, req.membership, req.updateMask, "membership");
      const given = nonEmptyList(
        fields,
        "roles",
        req.membership?.roles,
        "membership.roles",
        "delete the membership to take all its roles away",
      );
      const { instanceId, caller, creator, row, context } = await membershipCall(
        ctx,
        req.id,
        "membership.write",
      );
      const roles = given ?? [];
      if (roles.length > 0) checkRoles(roles, context.type, "membership.roles");
      await deps.authorizer.requireAccountControl(caller, instanceId, row.user_id, { context, roles });
      let before: MembershipAggregate | undefined;
      const events = await deps.eventStore.push({ instanceId, creator }, async (tx) => {
        const m = foldMembership(await tx.load(MEMBERSHIP, req.id));
        if (!m) throw new NotFoundError("membership not found");
        before = m;
        return roles.length > 0 ? changeMembershipEvents(m, roles) : [];
      });
      return { details: details(before!, events) };
    },

    async deleteMembership(req, ctx) {
      const { instanceId, caller, creator, row } = await membershipCall(ctx, req.id, "membership.delete");
      await deps.authorizer.requireAccountControl(caller, instanceId, row.user_id);
      let before: MembershipAggregate | undefined;
      const events = await deps.eventStore.push({ instanceId, creator }, async (tx) => {
        const m = foldMembership(await tx.load(MEMBERSHIP, req.id));
        if (!m) throw new NotFoundError("membership not found");
        before = m;
        return [
          removeMembershipEvent(m.id, m.resourceOwner, {
            context_type: m.contextType,
            context_id: m.contextId,
            user_id: m.userId,
          }),
        ];
      });
      return { details: details(before!, events) };
    },

    async searchMemberships(req, ctx) {
      const call = await authorize(deps, ctx, "authenticated", { ctx: req.ctx });
      if (call.context.type === "system")
        throw new InvalidArgumentError("memberships are searched in an instance or organization", "ctx");
      const instanceId = call.context.instanceId;
      const page = toPage(req.query, deps.config.maxSearchLimit);
      const where = new Where().and((p) => `m.instance_id = ${p(instanceId)}`);
      if (call.context.type !== "instance") {
        const orgId = call.context.orgId;
        where.and((p) => `m.org_id = ${p(orgId)}`);
      }
      const readable = await deps.authorizer.orgsWith(call.caller, "membership.read", instanceId);
      if (readable !== "all") where.in("m.org_id", [...readable]);
      for (const filter of req.filters) filterWhere(where, filter);
      const result = await search<MembershipRow>(deps.db, {
        select: COLUMNS,
        from: "memberships m",
        where,
        orderBy: sortColumns[req.sortingColumn] ?? "m.created_at",
        tiebreak: "m.id",
        page,
        instanceId,
        aggregateTypes: [MEMBERSHIP],
      });
      return {
        details: listDetails(result),
        result: result.rows.map((row) => toMembership(instanceId, row)),
      };
    },
  });
}
