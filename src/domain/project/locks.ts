import { NotFoundError } from "../../errors.ts";
import type { Queryable } from "../../storage/database.ts";

/** The projects read-model row commands decide on. */
export interface ProjectRow {
  id: string;
  org_id: string;
  name: string;
  role_assertion: boolean;
  role_check: boolean;
  /** PrivateLabelingSetting (./events.ts). */
  private_labeling_setting: number;
  sequence: number;
  changed_at: Date;
  [key: string]: unknown;
}

/**
 * The project `projectId`, its read-model row locked until commit (see org/locks.ts for why): `UPDATE` by
 * the commands of the project aggregate, above all those that narrow or remove user grants (removing a
 * role, changing or removing a project grant, removing the project); `SHARE` by the commands of user grants,
 * which decide on the project's roles and grants. So a user grant is either seen by a role removal or sees
 * the role gone. Locks are taken organization, then user, then project (as lockOrgForRemoval does).
 */
export async function holdProject(
  tx: Queryable,
  instanceId: string,
  projectId: string,
  mode: "UPDATE" | "SHARE",
): Promise<ProjectRow> {
  const rows = await tx.query<ProjectRow>(
    `SELECT id, org_id, name, role_assertion, role_check, private_labeling_setting, sequence, changed_at FROM projects
     WHERE instance_id = $1 AND id = $2 FOR ${mode === "UPDATE" ? "UPDATE" : "SHARE"}`,
    [instanceId, projectId],
  );
  if (!rows[0]) throw new NotFoundError("project not found");
  return rows[0];
}
