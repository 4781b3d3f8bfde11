/**
 * The one role → permission table (docs/permissions.md is generated from it). Every RPC asks
 * `authorize(caller, permission, context)` (authorize.ts) for one of these permissions.
 *
 * Instance roles apply in the instance and every organization and project in it; organization roles only
 * in their organization (and its projects); project roles only in their project. Actions, executions,
 * feature flags, web keys (the instance's signing keys), notification providers (`iam.notification.*`) and user
 * schemas (`userschema.*`) are
 * instance-wide: no organization or project
 * role grants them.
 *
 * `events.read` (the audit log, docs/audit-log.md) is held by IAM_OWNER, IAM_OWNER_VIEWER and ORG_OWNER (the
 * events whose resource owner is its organization), not by ORG_OWNER_VIEWER: event payloads show more than
 * the read APIs (who did what, old values), so reading them is an owner's matter in an organization.
 *
 * `user.impersonate` (token exchange with an actor token of another user, docs/token-exchange.md) is held
 * only by the END_USER_IMPERSONATOR roles: owning an instance or organization does not imply it, it must be
 * granted on purpose.
 *
 * Secrets a read answers (the signing keys of action targets and of SMS providers) go only to callers that
 * may also write what they read (`secretsPermission`: `x.read` → `x.write`); other readers get the field
 * empty. A signing key lets its holder forge the calls Platform signs, which is a writer's power.
 *
 * No control over a more privileged account (`coversRoles`, applied by `Authorizer.controlsAccount`): a
 * permission to change users lets the caller change only accounts whose roles it holds itself, so that
 * taking over an account never gains more than the caller already has.
 */
export const permissions = [
  "instance.read",
  "instance.write",
  "feature.read",
  "feature.write",
  "settings.read",
  "settings.write",
  "org.read",
  "org.create",
  "org.write",
  "org.delete",
  "domain.read",
  "domain.write",
  "domain.delete",
  "user.read",
  "user.write",
  "user.delete",
  "user.credential.write",
  "user.impersonate",
  "membership.read",
  "membership.write",
  "membership.delete",
  "project.read",
  "project.create",
  "project.write",
  "project.delete",
  "project.role.read",
  "project.role.write",
  "project.role.delete",
  "project.app.read",
  "project.app.write",
  "project.app.delete",
  "project.grant.read",
  "project.grant.write",
  "project.grant.delete",
  "user.grant.read",
  "user.grant.write",
  "user.grant.delete",
  "session.read",
  "session.write",
  "session.delete",
  "idp.read",
  "idp.write",
  "idp.delete",
  "action.target.read",
  "action.target.write",
  "action.target.delete",
  "action.execution.write",
  "action.execution.delete",
  "execution.read",
  "events.read",
  "web_key.read",
  "web_key.write",
  "web_key.delete",
  "iam.notification.read",
  "iam.notification.write",
  "iam.notification.delete",
  "userschema.read",
  "userschema.write",
  "userschema.delete",
] as const;
export type Permission = (typeof permissions)[number];

const reads = permissions.filter((p) => p.endsWith(".read"));
/** Granted only by the END_USER_IMPERSONATOR roles (see above). */
const IMPERSONATE: Permission = "user.impersonate";
const granted = (list: readonly Permission[]): Permission[] => list.filter((p) => p !== IMPERSONATE);
/** The audit log: instance roles that read everything, and ORG_OWNER in its organization (see above). */
const AUDIT_LOG: Permission = "events.read";
const instanceWide = (p: Permission) =>
  p.startsWith("action.") ||
  p === "execution.read" ||
  p.startsWith("feature.") ||
  p.startsWith("instance.") ||
  p.startsWith("web_key.") ||
  p.startsWith("userschema.") ||
  p.startsWith("iam.");
const orgScoped = granted(permissions.filter((p) => !instanceWide(p)));
const matching = (...prefixes: string[]): Permission[] =>
  granted(permissions.filter((p) => prefixes.some((prefix) => p.startsWith(prefix))));

export const InstanceRoles = [
  "IAM_OWNER",
  "IAM_OWNER_VIEWER",
  "IAM_ORG_MANAGER",
  "IAM_USER_MANAGER",
  "IAM_END_USER_IMPERSONATOR",
] as const;
export const OrgRoles = [
  "ORG_OWNER",
  "ORG_OWNER_VIEWER",
  "ORG_USER_MANAGER",
  "ORG_PROJECT_CREATOR",
  "ORG_END_USER_IMPERSONATOR",
] as const;
export const ProjectRoles = ["PROJECT_OWNER", "PROJECT_OWNER_VIEWER"] as const;

export const rolePermissions: Record<string, readonly Permission[]> = {
  IAM_OWNER: granted(permissions),
  IAM_OWNER_VIEWER: reads,
  IAM_ORG_MANAGER: [
    ...matching("org.", "domain.", "membership.", "project.", "user.grant."),
    "user.read",
    "settings.read",
  ],
  // user.* includes user.grant.*
  IAM_USER_MANAGER: [...matching("user.", "session."), "org.read", "membership.read"],
  // Token exchange with an actor token: tokens for any user of the instance.
  IAM_END_USER_IMPERSONATOR: [IMPERSONATE],
  ORG_OWNER: orgScoped.filter((p) => p !== "org.create"),
  ORG_OWNER_VIEWER: reads.filter((p) => !instanceWide(p) && p !== AUDIT_LOG),
  ORG_USER_MANAGER: [...matching("user.", "session."), "org.read"],
  ORG_PROJECT_CREATOR: ["project.create", "project.read", "org.read"],
  // Token exchange with an actor token: tokens for the users of the organization.
  ORG_END_USER_IMPERSONATOR: [IMPERSONATE],
  // In their project only (a project membership); project.* includes its roles, apps and grants.
  PROJECT_OWNER: [...matching("project.", "user.grant."), "org.read" as const].filter(
    (p) => p !== "project.create",
  ),
  PROJECT_OWNER_VIEWER: [
    "project.read",
    "project.role.read",
    "project.app.read",
    "project.grant.read",
    "user.grant.read",
  ],
};

/**
 * The permission a caller must hold, besides `read`, to be answered the secrets of what it reads (see
 * above): the write permission of the same resource.
 */
export function secretsPermission(read: Extract<Permission, `${string}.read`>): Permission {
  const write = `${read.slice(0, -".read".length)}.write`;
  if (!(permissions as readonly string[]).includes(write)) throw new Error(`no write permission for ${read}`);
  return write as Permission;
}

/** Roles a membership may hold in each kind of context (`GET /memberships/roles`). */
export const rolesByContext = { instance: InstanceRoles, org: OrgRoles, project: ProjectRoles } as const;

/**
 * The permissions a set of roles grants. Every authorized call asks this of its caller's roles (IAM_OWNER
 * alone grants 58), so each combination's set is built once and shared: callers must not change
 * it. Role combinations are few (the roles of a membership); the memo is emptied should it grow past 256.
 */
export function permissionsOf(roles: readonly string[]): ReadonlySet<Permission> {
  const key = roles.length === 1 ? roles[0] : roles.join("\u0000");
  let set = permissionMemo.get(key);
  if (!set) {
    set = new Set(roles.flatMap((role) => rolePermissions[role] ?? []));
    if (permissionMemo.size >= 256) permissionMemo.clear();
    permissionMemo.set(key, set);
  }
  return set;
}
const permissionMemo = new Map<string, ReadonlySet<Permission>>();

/**
 * Whether a caller holding `callerPermissions` in a context holds at least what `roles` confer there: the
 * rule "no control over a more privileged account". Every role a user holds, in the context of each of its
 * memberships, must be covered this way before another caller may change that account (password,
 * credentials, e-mail, phone, state, deletion, memberships) or impersonate it. `user.impersonate` also counts
 * as covered where the caller may write memberships (`membership.write`): it could give itself an
 * END_USER_IMPERSONATOR role there, so holding one puts nobody above it.
 */
export function coversRoles(callerPermissions: ReadonlySet<Permission>, roles: readonly string[]): boolean {
  for (const permission of permissionsOf(roles)) {
    if (callerPermissions.has(permission)) continue;
    if (permission === IMPERSONATE && callerPermissions.has("membership.write")) continue;
    return false;
  }
  return true;
}
