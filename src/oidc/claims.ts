import { UserState, UserType } from "../domain/user/events.ts";
import { readableData } from "../domain/user-schema/field-access.ts";
import type { Queryable } from "../storage/database.ts";
import { type ParsedScope, Reserved, Scope, wantsRoles } from "./scopes.ts";
import type { UserGrantSource } from "./user-grants.ts";

/** What claims are made of: a user of the users read model with its organization. */
export interface UserRecord {
  id: string;
  orgId: string;
  type: number;
  state: number;
  username: string;
  givenName: string | null;
  familyName: string | null;
  displayName: string | null;
  nickName: string | null;
  preferredLanguage: string | null;
  email: string | null;
  emailVerified: boolean;
  phone: string | null;
  phoneVerified: boolean;
  machineName: string | null;
  changedAt: Date;
  orgName: string;
  orgPrimaryDomain: string;
}

/** Columns of `users u LEFT JOIN orgs o` that `toUserRecord` reads (shared with the token lookups). */
export const USER_COLUMNS = `u.id AS u_id, u.org_id AS u_org_id, u.type AS u_type, u.state AS u_state,
  u.username AS u_username, u.given_name AS u_given_name, u.family_name AS u_family_name,
  u.display_name AS u_display_name, u.nick_name AS u_nick_name, u.preferred_language AS u_preferred_language,
  u.email AS u_email, u.email_verified AS u_email_verified, u.phone AS u_phone, u.phone_verified AS u_phone_verified,
  u.machine_name AS u_machine_name, u.changed_at AS u_changed_at, o.name AS o_name, o.primary_domain AS o_primary_domain`;

/** The user of a row selected with USER_COLUMNS (undefined when the user no longer exists). */
export function toUserRecord(row: Record<string, unknown>): UserRecord | undefined {
  if (row.u_id === null || row.u_id === undefined) return undefined;
  return {
    id: String(row.u_id),
    orgId: String(row.u_org_id),
    type: Number(row.u_type),
    state: Number(row.u_state),
    username: String(row.u_username),
    givenName: (row.u_given_name as string | null) ?? null,
    familyName: (row.u_family_name as string | null) ?? null,
    displayName: (row.u_display_name as string | null) ?? null,
    nickName: (row.u_nick_name as string | null) ?? null,
    preferredLanguage: (row.u_preferred_language as string | null) ?? null,
    email: (row.u_email as string | null) ?? null,
    emailVerified: row.u_email_verified === true,
    phone: (row.u_phone as string | null) ?? null,
    phoneVerified: row.u_phone_verified === true,
    machineName: (row.u_machine_name as string | null) ?? null,
    changedAt: new Date(row.u_changed_at as Date),
    orgName: String(row.o_name ?? ""),
    orgPrimaryDomain: String(row.o_primary_domain ?? ""),
  };
}

export async function loadUser(
  db: Queryable,
  instanceId: string,
  userId: string,
): Promise<UserRecord | undefined> {
  const rows = await db.query(
    `SELECT ${USER_COLUMNS} FROM users u LEFT JOIN orgs o ON o.instance_id = u.instance_id AND o.id = u.org_id
     WHERE u.instance_id = $1 AND u.id = $2`,
    [instanceId, userId],
  );
  return rows[0] ? toUserRecord(rows[0]) : undefined;
}

export function isActive(user: UserRecord | undefined): user is UserRecord {
  return user !== undefined && user.state === UserState.active;
}

/** `<username>@<primary domain of the user's organization>` (introspection's `username`). */
export function loginName(user: UserRecord): string {
  return user.orgPrimaryDomain ? `${user.username}@${user.orgPrimaryDomain}` : user.username;
}

/** The user's metadata as the `urn:platform:iam:user:metadata` claim: key → base64 value. */
export async function loadMetadata(
  db: Queryable,
  instanceId: string,
  userId: string,
): Promise<Record<string, string>> {
  const rows = await db.query<{ key: string; value: string }>(
    "SELECT key, value FROM user_metadata WHERE instance_id = $1 AND user_id = $2 ORDER BY key",
    [instanceId, userId],
  );
  return Object.fromEntries(rows.map((r) => [r.key, r.value]));
}

/**
 * The `urn:platform:iam:user:data` claim: the custom data the user itself may read (`self` field
 * permissions of its schema); undefined when the scope does not ask for it or the user has no schema.
 */
export async function loadUserData(
  db: Queryable,
  instanceId: string,
  userId: string,
  scope: ParsedScope,
): Promise<Record<string, unknown> | undefined> {
  if (!scope.values.includes(Reserved.userData)) return undefined;
  const rows = await db.query<{
    data: Record<string, unknown> | null;
    schema: Record<string, unknown> | null;
  }>(
    `SELECT u.data, s.schema FROM users u
     LEFT JOIN user_schemas s ON s.instance_id = u.instance_id AND s.id = u.schema_id
     WHERE u.instance_id = $1 AND u.id = $2 AND u.schema_id IS NOT NULL`,
    [instanceId, userId],
  );
  const row = rows[0];
  if (!row?.data) return undefined;
  return readableData(row.schema ?? {}, row.data, "self");
}

/** Scopes whose claims the ID token leaves out when an access token is issued too (OpenID Connect Core §5.4). */
export const USERINFO_SCOPES = new Set<string>([Scope.profile, Scope.email, Scope.phone, Scope.address]);

/**
 * The user claims the scope allows (without `sub`): profile, email, phone (address: none is stored),
 * the resource owner and, when `metadata` is given, the metadata claim.
 */
export function userClaims(
  user: UserRecord,
  scope: ParsedScope,
  options: {
    metadata?: Record<string, string>;
    /** The custom data claim's value (loadUserData). */
    data?: Record<string, unknown>;
    leaveOut?: ReadonlySet<string>;
  } = {},
): Record<string, unknown> {
  const claims: Record<string, unknown> = {};
  const has = (value: string) => scope.values.includes(value) && !options.leaveOut?.has(value);
  if (has(Scope.profile)) {
    if (user.type === UserType.machine) {
      if (user.machineName) claims.name = user.machineName;
    } else {
      const full = [user.givenName, user.familyName].filter(Boolean).join(" ");
      if (user.displayName || full) claims.name = user.displayName || full;
      if (user.givenName) claims.given_name = user.givenName;
      if (user.familyName) claims.family_name = user.familyName;
      if (user.nickName) claims.nickname = user.nickName;
      if (user.preferredLanguage) claims.locale = user.preferredLanguage;
    }
    claims.preferred_username = user.username;
    claims.updated_at = Math.floor(user.changedAt.getTime() / 1000);
  }
  if (has(Scope.email) && user.email) {
    claims.email = user.email;
    claims.email_verified = user.emailVerified;
  }
  if (has(Scope.phone) && user.phone) {
    claims.phone_number = user.phone;
    claims.phone_number_verified = user.phoneVerified;
  }
  if (has(Reserved.resourceOwner)) {
    claims[`${Reserved.resourceOwner}:id`] = user.orgId;
    claims[`${Reserved.resourceOwner}:name`] = user.orgName;
    claims[`${Reserved.resourceOwner}:primary_domain`] = user.orgPrimaryDomain;
  }
  if (has(Reserved.metadata) && options.metadata && Object.keys(options.metadata).length > 0) {
    claims[Reserved.metadata] = options.metadata;
  }
  if (has(Reserved.userData) && options.data) claims[Reserved.userData] = options.data;
  return claims;
}

export const ROLES_CLAIM = "urn:platform:iam:org:project:roles";
export const projectRolesClaim = (projectId: string) => `urn:platform:iam:org:project:${projectId}:roles`;

/**
 * The role claims from the user's grants: `urn:platform:iam:org:project:roles` for the
 * client's project (or, for a client without one, the first audience project) and
 * `urn:platform:iam:org:project:<id>:roles` for every project with roles, each `{role: {orgId: domain}}`,
 * limited to the keys of `role:<key>` scopes when there are any. Asked for by a roles scope, or always
 * when `force` (the project's role assertion).
 */
export async function roleClaims(
  grants: UserGrantSource,
  instanceId: string,
  userId: string,
  scope: ParsedScope,
  projects: { clientProjectId?: string; audienceProjectIds: string[] },
  force = false,
): Promise<Record<string, unknown>> {
  if (!force && !wantsRoles(scope)) return {};
  const projectIds = [
    ...new Set([
      ...(projects.clientProjectId ? [projects.clientProjectId] : []),
      ...projects.audienceProjectIds,
    ]),
  ];
  if (projectIds.length === 0) return {};
  const byProject = new Map<string, Record<string, Record<string, string>>>();
  for (const grant of await grants(instanceId, userId, projectIds)) {
    const roles = byProject.get(grant.projectId) ?? {};
    for (const role of grant.roles) {
      if (scope.roleKeys.length > 0 && !scope.roleKeys.includes(role)) continue;
      roles[role] = { ...(roles[role] ?? {}), [grant.orgId]: grant.orgPrimaryDomain };
    }
    byProject.set(grant.projectId, roles);
  }
  const claims: Record<string, unknown> = {};
  const main = projectIds[0];
  for (const [projectId, roles] of byProject) {
    if (Object.keys(roles).length === 0) continue;
    claims[projectRolesClaim(projectId)] = roles;
    if (projectId === main) claims[ROLES_CLAIM] = roles;
  }
  return claims;
}
