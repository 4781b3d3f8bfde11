import type { HandlerContext } from "@connectrpc/connect";
import type { Caller, ResolvedContext } from "../../auth/caller.ts";
import type { Permission } from "../../auth/permissions.ts";
import { OwnerType, type SettingsOwner } from "../../domain/settings/events.ts";
import { NotFoundError } from "../../errors.ts";
import type { Where } from "../../query/search.ts";
import type { Queryable } from "../../storage/database.ts";
import { authenticate } from "../call.ts";
import type { ServiceDeps } from "../deps.ts";

/** A projects read-model row as the API reads it. */
export interface ProjectRow {
  id: string;
  org_id: string;
  name: string;
  role_assertion: boolean;
  role_check: boolean;
  private_labeling_setting: number;
  management: boolean;
  created_at: Date;
  changed_at: Date;
  sequence: number | string;
  [key: string]: unknown;
}

export const PROJECT_COLUMNS = `p.id, p.org_id, p.name, p.role_assertion, p.role_check, p.private_labeling_setting,
  coalesce(i.iam_project_id = p.id, false) AS management, p.created_at, p.changed_at, p.sequence`;
export const PROJECT_FROM = "projects p LEFT JOIN instances i ON i.id = p.instance_id";

export async function readProject(
  db: Queryable,
  instanceId: string,
  projectId: string,
): Promise<ProjectRow | undefined> {
  const rows = await db.query<ProjectRow>(
    `SELECT ${PROJECT_COLUMNS} FROM ${PROJECT_FROM} WHERE p.instance_id = $1 AND p.id = $2`,
    [instanceId, projectId],
  );
  return rows[0];
}

/** Resources of a project belong to its organization. */
export const orgOwner = (orgId: string): SettingsOwner => ({ type: OwnerType.org, id: orgId });

export const toDate = (value: unknown): Date => (value instanceof Date ? value : new Date(String(value)));

export interface ProjectCall {
  instanceId: string;
  caller: Caller;
  /** Recorded as the events' creator. */
  creator: string;
  project: ProjectRow;
  context: Extract<ResolvedContext, { type: "project" }>;
}

/**
 * The project `projectId` of the Host's instance as the call's context: 404 `project not found` when it
 * is unknown or the caller may not even `read` in it (unknown and unreadable look alike, so IDs cannot be probed),
 * 403 when it may read but lacks `permission`. Instance roles, organization roles of the project's
 * organization and the caller's memberships in the project count.
 */
export async function projectCall(
  deps: ServiceDeps,
  ctx: HandlerContext,
  projectId: string,
  permission: Permission,
  read: Permission,
): Promise<ProjectCall> {
  const { scope, caller } = await authenticate(deps, ctx);
  const instanceId = scope.instanceId ?? "";
  const project = instanceId ? await readProject(deps.db, instanceId, projectId) : undefined;
  if (!project) throw new NotFoundError("project not found");
  const context = { type: "project" as const, instanceId, orgId: project.org_id, projectId: project.id };
  if (!(await deps.authorizer.can(caller, read, context))) throw new NotFoundError("project not found");
  if (permission !== read) await deps.authorizer.authorize(caller, permission, context);
  return { instanceId, caller, creator: caller.userId, project, context };
}

/**
 * Restricts a search to what the caller may `permission`: rows whose organization column `orgColumn` is
 * one where an organization role grants it, or whose project column `projectColumn` is a project where a
 * project membership does (nothing to add when an instance role grants it).
 */
export async function restrictToReadable(
  deps: ServiceDeps,
  caller: Caller,
  instanceId: string,
  permission: Permission,
  where: Where,
  columns: { org: string[]; project?: string },
): Promise<boolean> {
  const scopes = await deps.authorizer.scopesWith(caller, permission, instanceId);
  if (scopes === "all") return false;
  const orgs = [...scopes.orgs];
  const projects = [...scopes.projects];
  where.and((p) => {
    const parts = columns.org.map((column) => `${column} = ANY(${p(orgs)})`);
    if (columns.project) parts.push(`${columns.project} = ANY(${p(projects)})`);
    return `(${parts.join(" OR ")})`;
  });
  return true;
}
