import { FailedPreconditionError, InvalidArgumentError, NotFoundError } from "../../errors.ts";
import type { EventStore } from "../../eventstore/eventstore.ts";
import type { CommandTx, NewEvent, StoredEvent } from "../../eventstore/types.ts";
import type { Queryable } from "../../storage/database.ts";
import { holdUser } from "../org/locks.ts";
import { ProjectGrantState } from "../project/events.ts";
import { holdProject, type ProjectRow } from "../project/locks.ts";
import {
  USER_GRANT,
  USER_GRANT_CONSTRAINT,
  type UserGrantAddedPayload,
  UserGrantEvent,
  type UserGrantRemovedPayload,
  userGrantKey,
} from "./events.ts";

/** A user grant as the read model holds it (what cascades decide on). */
export interface UserGrantRow {
  id: string;
  user_id: string;
  project_id: string;
  project_grant_id: string | null;
  org_id: string;
  role_keys: string[];
  [key: string]: unknown;
}

const ROW = "id, user_id, project_id, project_grant_id, org_id, role_keys";

/** The user grants whose `column` is one of `values`, in ID order (for cascades). */
export async function userGrantsWhere(
  tx: Queryable,
  instanceId: string,
  column: "user_id" | "project_id" | "project_grant_id" | "org_id",
  values: string[],
): Promise<UserGrantRow[]> {
  if (values.length === 0) return [];
  return tx.query<UserGrantRow>(
    `SELECT ${ROW} FROM user_grants WHERE instance_id = $1 AND ${column} = ANY($2) ORDER BY id`,
    [instanceId, values],
  );
}

function removedPayload(row: UserGrantRow, reason?: string): UserGrantRemovedPayload {
  return {
    user_id: row.user_id,
    project_id: row.project_id,
    ...(row.project_grant_id ? { project_grant_id: row.project_grant_id } : {}),
    ...(reason ? { reason } : {}),
  };
}

/** `user_grant.cascade.removed`: the grant ends with its user, project, project grant or organization. */
export function cascadeRemoveUserGrant(row: UserGrantRow, reason: string): NewEvent {
  const payload = removedPayload(row, reason);
  return {
    aggregateType: USER_GRANT,
    aggregateId: row.id,
    resourceOwner: row.org_id,
    type: UserGrantEvent.cascadeRemoved,
    payload: { ...payload },
    uniqueConstraints: [{ action: "remove", type: USER_GRANT_CONSTRAINT, field: userGrantKey(payload) }],
  };
}

/** `user_grant.cascade.changed` for the grants holding any of `removedKeys`: those keys taken away. */
export function cascadeNarrowUserGrants(rows: UserGrantRow[], removedKeys: Set<string>): NewEvent[] {
  const events: NewEvent[] = [];
  for (const row of rows) {
    const kept = row.role_keys.filter((key) => !removedKeys.has(key));
    if (kept.length === row.role_keys.length) continue;
    events.push({
      aggregateType: USER_GRANT,
      aggregateId: row.id,
      resourceOwner: row.org_id,
      type: UserGrantEvent.cascadeChanged,
      payload: { role_keys: kept },
    });
  }
  return events;
}

/** A user grant folded from its events; undefined when it does not exist (never added, or removed). */
export interface UserGrantAggregate {
  id: string;
  orgId: string;
  userId: string;
  projectId: string;
  projectGrantId?: string;
  roleKeys: string[];
  sequence: number;
  changeDate: Date;
}

export function foldUserGrant(events: StoredEvent[]): UserGrantAggregate | undefined {
  let grant: UserGrantAggregate | undefined;
  for (const e of events) {
    const p = (e.payload ?? {}) as Record<string, unknown>;
    switch (e.type) {
      case UserGrantEvent.added: {
        const added = p as unknown as UserGrantAddedPayload;
        grant = {
          id: e.aggregateId,
          orgId: e.resourceOwner,
          userId: added.user_id,
          projectId: added.project_id,
          projectGrantId: added.project_grant_id,
          roleKeys: [...added.role_keys],
          sequence: e.sequence,
          changeDate: e.createdAt,
        };
        continue;
      }
      case UserGrantEvent.removed:
      case UserGrantEvent.cascadeRemoved:
        grant = undefined;
        continue;
    }
    if (!grant) continue;
    grant.sequence = e.sequence;
    grant.changeDate = e.createdAt;
    if (e.type === UserGrantEvent.changed || e.type === UserGrantEvent.cascadeChanged)
      grant.roleKeys = [...(p.role_keys as string[])];
  }
  return grant;
}

/** Where the fields of a user grant request are named in errors. */
export interface UserGrantFields {
  userId: string;
  roleKeys: string;
  projectGrantId: string;
}

/** What a user grant may give: the project's roles, or those of an active project grant. */
interface GrantScope {
  /** The organization giving the grant. */
  orgId: string;
  roles: Set<string>;
  /** "is not a role of the project" / "is not granted by the project grant" */
  missing: string;
}

/**
 * The roles that may be given for `projectId` (through `projectGrantId`): the project's, or the active
 * project grant's, whose granted organization gives the grant. Reads the read model under a share lock on
 * the project (role removals and grant changes take it exclusively).
 */
async function grantScope(
  tx: Queryable,
  instanceId: string,
  project: ProjectRow,
  projectGrantId: string | undefined,
): Promise<GrantScope> {
  if (projectGrantId === undefined) {
    const roles = await tx.query<{ key: string }>(
      "SELECT key FROM project_roles WHERE instance_id = $1 AND project_id = $2",
      [instanceId, project.id],
    );
    return {
      orgId: project.org_id,
      roles: new Set(roles.map((r) => r.key)),
      missing: "is not a role of the project",
    };
  }
  const grants = await tx.query<{ granted_org_id: string; role_keys: string[]; state: number }>(
    "SELECT granted_org_id, role_keys, state FROM project_grants WHERE instance_id = $1 AND id = $2 AND project_id = $3",
    [instanceId, projectGrantId, project.id],
  );
  const grant = grants[0];
  if (!grant) throw new NotFoundError("project grant not found");
  if (grant.state !== ProjectGrantState.active)
    throw new FailedPreconditionError("the project grant is inactive");
  return {
    orgId: grant.granted_org_id,
    roles: new Set(grant.role_keys),
    missing: "is not a role of the project grant",
  };
}

function checkRoleKeys(scope: GrantScope, roleKeys: string[], field: string): void {
  roleKeys.forEach((key, i) => {
    if (!scope.roles.has(key)) throw new InvalidArgumentError(`"${key}" ${scope.missing}`, `${field}[${i}]`);
  });
}

/** The organization a user grant (to be) given for `projectId` / `projectGrantId` belongs to. */
export async function userGrantOrg(
  db: Queryable,
  instanceId: string,
  projectId: string,
  projectGrantId: string | undefined,
): Promise<{ orgId: string; projectOrgId: string }> {
  const rows = await db.query<{ org_id: string; granted_org_id: string | null }>(
    `SELECT p.org_id, g.granted_org_id FROM projects p
     LEFT JOIN project_grants g ON g.instance_id = p.instance_id AND g.project_id = p.id AND g.id = $3
     WHERE p.instance_id = $1 AND p.id = $2`,
    [instanceId, projectId, projectGrantId ?? null],
  );
  if (!rows[0]) throw new NotFoundError("project not found");
  if (projectGrantId !== undefined && !rows[0].granted_org_id)
    throw new NotFoundError("project grant not found");
  return { orgId: rows[0].granted_org_id ?? rows[0].org_id, projectOrgId: rows[0].org_id };
}

interface Command {
  instanceId: string;
  creator: string;
}

/**
 * Gives a user roles of a project: directly to users of the project's organization, through a project grant
 * (only its roles) to users of the granted organization. One grant per user, project and project grant
 * (ALREADY_EXISTS).
 */
export async function createUserGrant(
  eventStore: EventStore,
  cmd: Command & {
    grantId: string;
    userId: string;
    projectId: string;
    projectGrantId?: string;
    roleKeys: string[];
    fields: UserGrantFields;
  },
): Promise<StoredEvent> {
  const [stored] = await eventStore.push(cmd, async (tx) => {
    await holdUser(tx, cmd.instanceId, cmd.userId);
    const project = await holdProject(tx, cmd.instanceId, cmd.projectId, "SHARE");
    const scope = await grantScope(tx, cmd.instanceId, project, cmd.projectGrantId);
    // The organization giving the grant gives it to its own users only: across organizations a project's
    // roles go through a project grant, which the project's organization controls.
    const users = await tx.query<{ org_id: string }>(
      "SELECT org_id FROM users WHERE instance_id = $1 AND id = $2",
      [cmd.instanceId, cmd.userId],
    );
    if (users[0]?.org_id !== scope.orgId)
      throw new InvalidArgumentError(
        cmd.projectGrantId !== undefined
          ? "through a project grant only users of the granted organization"
          : "directly only users of the project's organization; users of another organization get its roles through a project grant to their organization",
        cmd.fields.userId,
      );
    checkRoleKeys(scope, cmd.roleKeys, cmd.fields.roleKeys);
    const payload: UserGrantAddedPayload = {
      user_id: cmd.userId,
      project_id: cmd.projectId,
      ...(cmd.projectGrantId ? { project_grant_id: cmd.projectGrantId } : {}),
      role_keys: cmd.roleKeys,
    };
    return [
      {
        aggregateType: USER_GRANT,
        aggregateId: cmd.grantId,
        resourceOwner: scope.orgId,
        type: UserGrantEvent.added,
        payload: { ...payload },
        uniqueConstraints: [
          {
            action: "add",
            type: USER_GRANT_CONSTRAINT,
            field: userGrantKey(payload),
            message: cmd.projectGrantId
              ? "the user already has a grant of this project through this project grant"
              : "the user already has a grant of this project",
          },
        ],
      },
    ];
  });
  return stored;
}

async function loadUserGrant(tx: CommandTx, grantId: string): Promise<UserGrantAggregate> {
  const grant = foldUserGrant(await tx.load(USER_GRANT, grantId));
  if (!grant) throw new NotFoundError("user grant not found");
  return grant;
}

/** Replaces the roles of a user grant (checked as on creation); the same set appends nothing. */
export async function changeUserGrant(
  eventStore: EventStore,
  cmd: Command & { grantId: string; roleKeys: string[]; fields: UserGrantFields },
): Promise<{ grant: UserGrantAggregate; stored: StoredEvent[] }> {
  let before: UserGrantAggregate | undefined;
  const stored = await eventStore.push(cmd, async (tx) => {
    const grant = await loadUserGrant(tx, cmd.grantId);
    before = grant;
    const same =
      cmd.roleKeys.length === grant.roleKeys.length && cmd.roleKeys.every((k) => grant.roleKeys.includes(k));
    if (cmd.roleKeys.length === 0 || same) return [];
    const project = await holdProject(tx, cmd.instanceId, grant.projectId, "SHARE");
    const scope = await grantScope(tx, cmd.instanceId, project, grant.projectGrantId);
    checkRoleKeys(scope, cmd.roleKeys, cmd.fields.roleKeys);
    return [
      {
        aggregateType: USER_GRANT,
        aggregateId: grant.id,
        resourceOwner: grant.orgId,
        type: UserGrantEvent.changed,
        payload: { role_keys: cmd.roleKeys },
      },
    ];
  });
  return { grant: before!, stored };
}

/** Removes a user grant, releasing its (user, project, project grant) uniqueness. */
export async function removeUserGrant(
  eventStore: EventStore,
  cmd: Command & { grantId: string },
): Promise<{ grant: UserGrantAggregate; stored: StoredEvent[] }> {
  let before: UserGrantAggregate | undefined;
  const stored = await eventStore.push(cmd, async (tx) => {
    const grant = await loadUserGrant(tx, cmd.grantId);
    before = grant;
    const payload = removedPayload({
      id: grant.id,
      user_id: grant.userId,
      project_id: grant.projectId,
      project_grant_id: grant.projectGrantId ?? null,
      org_id: grant.orgId,
      role_keys: grant.roleKeys,
    });
    return [
      {
        aggregateType: USER_GRANT,
        aggregateId: grant.id,
        resourceOwner: grant.orgId,
        type: UserGrantEvent.removed,
        payload: { ...payload },
        uniqueConstraints: [{ action: "remove", type: USER_GRANT_CONSTRAINT, field: userGrantKey(payload) }],
      },
    ];
  });
  return { grant: before!, stored };
}
