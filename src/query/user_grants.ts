/**
 * A user's roles for the role claims of tokens and userinfo
 * (`urn:platform:iam:org:project:roles` = `{"<role>": {"<org id>": "<org primary domain>"}}`). Reads the read
 * model directly, without the service layer or any permission check.
 */
import { ProjectGrantState } from "../domain/project/events.ts";
import type { Queryable } from "../storage/database.ts";

/** One user grant that counts: roles of one project, given by one organization. */
export interface RoleGrant {
  /** ID of the user grant. */
  id: string;
  projectId: string;
  /** Set when given through a project grant (then `orgId` is the granted organization). */
  projectGrantId?: string;
  /** The organization that gave the grant: the org of the role claim. */
  orgId: string;
  /** That organization's primary domain (the value in the role claim). */
  orgPrimaryDomain: string;
  /** May be empty (all of its roles were removed from the project or project grant). */
  roleKeys: string[];
}

/**
 * The grants of a user that count, optionally only for some projects: grants through a deactivated
 * project grant are left out. Ordered by project, then grant ID. Uses user_grants_user_idx.
 */
export async function userGrantsOf(
  db: Queryable,
  instanceId: string,
  userId: string,
  projectIds?: readonly string[],
): Promise<RoleGrant[]> {
  const params: unknown[] = [instanceId, userId, ProjectGrantState.active];
  let where = "";
  if (projectIds) {
    params.push(projectIds);
    where = ` AND ug.project_id = ANY($${params.length})`;
  }
  const rows = await db.query<{
    id: string;
    project_id: string;
    project_grant_id: string | null;
    org_id: string;
    primary_domain: string | null;
    role_keys: string[];
  }>(
    `SELECT ug.id, ug.project_id, ug.project_grant_id, ug.org_id, o.primary_domain, ug.role_keys
     FROM user_grants ug
     LEFT JOIN orgs o ON o.instance_id = ug.instance_id AND o.id = ug.org_id
     LEFT JOIN project_grants pg ON pg.instance_id = ug.instance_id AND pg.id = ug.project_grant_id
     WHERE ug.instance_id = $1 AND ug.user_id = $2${where}
       AND (ug.project_grant_id IS NULL OR pg.state = $3)
     ORDER BY ug.project_id, ug.id`,
    params,
  );
  return rows.map((r) => ({
    id: r.id,
    projectId: r.project_id,
    ...(r.project_grant_id ? { projectGrantId: r.project_grant_id } : {}),
    orgId: r.org_id,
    orgPrimaryDomain: r.primary_domain ?? "",
    roleKeys: r.role_keys,
  }));
}
