import {
  InstanceRoles,
  OrgRoles,
  type Permission,
  ProjectRoles,
  permissions,
  rolePermissions,
} from "./permissions.ts";

/** docs/permissions.md: the role → permission table as enforced. */
export function renderPermissionsDoc(): string {
  const roles = [...InstanceRoles, ...OrgRoles, ...ProjectRoles];
  const lines = [
    "# Roles and permissions",
    "",
    "Generated from `src/auth/permissions.ts` by `npm run generate`; that table is the one place permissions",
    "are enforced (every RPC calls `authorize(caller, permission, context)`).",
    "",
    "Instance roles (`IAM_*`) apply in the instance and in every organization and project of it; organization",
    "roles (`ORG_*`) only in their organization and its projects; project roles only in their project.",
    "System users (PLATFORM_SYSTEM_API_USERS) hold the IAM_OWNER permissions in every context. `authenticated`",
    "(the language settings' read) only asks that the caller belongs to the instance. `user.impersonate`",
    "(token exchange with another user's actor token, docs/token-exchange.md) comes only with the",
    "END_USER_IMPERSONATOR roles: owning an instance or organization does not imply it. `events.read` (the",
    "audit log, docs/audit-log.md) reads every event of the instance with an instance role, and with",
    "`ORG_OWNER` the events whose resource owner is the organization; `ORG_OWNER_VIEWER` does not hold it.",
    "`userschema.*` (user schemas, docs/user-schemas.md) is instance-wide like `iam.notification.*`: no",
    "organization role grants it. Who reads and writes each property of a user's custom data is decided by",
    "its schema's field permissions: `owner` for the callers holding `user.read` / `user.write` in the user's",
    "organization, `self` for the user itself (default: owner `rw`, self `r`).",
    "",
    "## No control over a more privileged account",
    "",
    "A permission over users lets a caller take over only accounts that hold no more than the caller itself,",
    "so that taking over an account never gains anything. The rule (`coversRoles` in `src/auth/permissions.ts`,",
    "applied by `Authorizer.requireAccountControl` in `src/auth/authorize.ts`): for every membership of the",
    "target user, the caller must hold, in that membership's context, every permission the membership's roles",
    "confer there. The caller's instance roles count in the instance and everywhere in it, its organization roles",
    "in that organization and its projects, its project roles in that project, as for every permission. So an",
    "`ORG_OWNER` controls the plain users of its organization and its fellow owners, but not a user of its",
    "organization who is `IAM_OWNER` (as the first administrator is) or who holds a role in another",
    "organization or project; only an `IAM_OWNER` controls another `IAM_OWNER`. `user.impersonate` counts as",
    "held where the caller holds `membership.write`, since it could give itself an END_USER_IMPERSONATOR role",
    "there. A user always controls its own account, and system users control every account. The target's",
    "memberships are read fresh on every check, never from the cache.",
    "",
    "Refused with `PERMISSION_DENIED` (403) when the caller does not control the account, nothing stored:",
    "",
    "- every change to a user (`PlatformUsers`): patch (username, e-mail, phone, profile, machine settings),",
    "  metadata, lock, unlock, deactivate, reactivate, delete, set password, machine secret, keys and personal",
    "  access tokens (created or removed), removing an identity-provider link; reads are not affected;",
    "- creating, changing or deleting a membership of the user; the roles a membership write gives count as",
    "  held by the user, so nobody gives roles with permissions it does not hold itself (an `IAM_ORG_MANAGER`",
    "  cannot make anyone, itself included, an `IAM_OWNER`);",
    "- deleting an organization, which deletes its users: the caller must control each of them;",
    "- impersonation (token exchange with an actor token, docs/token-exchange.md): the actor must control the",
    "  subject's account, besides holding `user.impersonate` there; refused with `invalid_request`. The",
    "  END_USER_IMPERSONATOR roles impersonate end users and administrators below them, never an `IAM_OWNER`",
    "  unless the actor is one too.",
    "",
    "Application roles (user grants of projects) are not memberships and do not count.",
    "",
    "## Role → permission table",
    "",
    `| permission | ${roles.join(" | ")} |`,
    `|---|${roles.map(() => ":-:").join("|")}|`,
  ];
  for (const permission of permissions) {
    const cells = roles.map((role) => (rolePermissions[role].includes(permission as Permission) ? "✓" : ""));
    lines.push(`| \`${permission}\` | ${cells.join(" | ")} |`);
  }
  return `${lines.join("\n")}\n`;
}
