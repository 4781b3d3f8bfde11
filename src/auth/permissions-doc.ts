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
    "END_USER_IMPERSONATOR roles: owning an instance or organization does not imply it.",
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
