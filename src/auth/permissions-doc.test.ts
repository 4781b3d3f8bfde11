import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { permissions, rolePermissions } from "./permissions.ts";
import { renderPermissionsDoc } from "./permissions-doc.ts";

describe("role → permission table", () => {
  it("docs/permissions.md is the enforced table (run `npm run generate` after a change)", () => {
    const committed = readFileSync(new URL("../../docs/permissions.md", import.meta.url), "utf8");
    assert.equal(committed, renderPermissionsDoc());
  });

  it("only instance roles grant actions, executions and feature flags", () => {
    const instanceWide = permissions.filter(
      (p) => p.startsWith("action.") || p === "execution.read" || p.startsWith("feature."),
    );
    for (const [role, granted] of Object.entries(rolePermissions)) {
      if (role.startsWith("IAM_")) continue;
      assert.deepEqual(
        granted.filter((p) => instanceWide.includes(p)),
        [],
        `${role} must not grant instance-wide permissions`,
      );
    }
    assert.deepEqual(
      rolePermissions.IAM_OWNER,
      permissions.filter((p) => p !== "user.impersonate"),
    );
    assert.ok(rolePermissions.IAM_OWNER_VIEWER.every((p) => p.endsWith(".read")));
  });

  it("user.impersonate is granted on purpose only: by the END_USER_IMPERSONATOR roles", () => {
    const holders = Object.entries(rolePermissions)
      .filter(([, granted]) => granted.includes("user.impersonate"))
      .map(([role]) => role);
    assert.deepEqual(holders, ["IAM_END_USER_IMPERSONATOR", "ORG_END_USER_IMPERSONATOR"]);
  });
});
