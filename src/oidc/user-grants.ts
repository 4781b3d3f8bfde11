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
 * PLACEHOLDER until user grants exist (branch i9-projects): no grants, so no role claims. Replace it in
 * `createOidcProvider` (./provider.ts) with one query on the user grants read model, e.g.
 * `SELECT project_id, org_id, o.primary_domain, role_keys FROM user_grants g JOIN orgs o ...
 *  WHERE g.instance_id = $1 AND g.user_id = $2 AND g.project_id = ANY($3) AND g.state = active`.
 */
export const noUserGrants: UserGrantSource = async () => [];
