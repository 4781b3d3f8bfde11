import { userGrantsOf } from "../query/user_grants.ts";
import type { Queryable } from "../storage/database.ts";

/** One user grant: roles a user holds in a project, given by an organization. */
export interface UserGrant {
  projectId: string;
  /** The organization that granted the roles (the project's owner, or the granted organization). */
  orgId: string;
  orgPrimaryDomain: string;
  roles: string[];
}

/**
 * The user grants of a user in some projects: what the role claims (`urn:platform:iam:org:project:roles`,
 * `urn:platform:iam:org:project:<id>:roles`) are built from.
 */
export type UserGrantSource = (
  instanceId: string,
  userId: string,
  projectIds: string[],
) => Promise<UserGrant[]>;

/**
 * The user grants read model (src/query/user_grants.ts: one query; grants through a deactivated project
 * grant do not count).
 */
export function userGrantsFromReadModel(db: Queryable): UserGrantSource {
  return async (instanceId, userId, projectIds) =>
    (await userGrantsOf(db, instanceId, userId, projectIds)).map((g) => ({
      projectId: g.projectId,
      orgId: g.orgId,
      orgPrimaryDomain: g.orgPrimaryDomain,
      roles: g.roleKeys,
    }));
}
