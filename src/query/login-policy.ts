/** The login policy in force for an organization (src/domain/settings/login.ts), read from the settings. */

import { membershipsOfUser, orgOwnersControl } from "../auth/authorize.ts";
import { OwnerType } from "../domain/settings/events.ts";
import { LOGIN, type LoginSettings, loginDefaults, loginPolicyOf } from "../domain/settings/login.ts";
import type { Queryable } from "../storage/database.ts";
import { resolveSetting, settingsLayers } from "./settings.ts";

/** The policy of `orgId` (inherited system → instance → organization), else the instance's. */
export async function loginPolicyFor(
  db: Queryable,
  instanceId: string,
  orgId: string | undefined,
): Promise<LoginSettings> {
  const context = orgId
    ? { type: "org" as const, instanceId, orgId }
    : { type: "instance" as const, instanceId };
  const owner = orgId ? { type: OwnerType.org, id: orgId } : { type: OwnerType.instance, id: instanceId };
  const layers = await settingsLayers(db, LOGIN, context);
  return loginPolicyOf((name) => resolveSetting(layers, name, owner, loginDefaults[name]).value);
}

/** A user whose sign-in a login policy governs. */
export interface PolicyUser {
  userId: string;
  orgId: string;
}

/**
 * The organization whose login policy governs a user's sign-in (docs/factors.md, "Accounts above their
 * organization"): the user's own when its owners control the account (`orgOwnersControl`), else none — the
 * instance's policy. An organization's owners can thus neither lower nor raise the bar of an account more
 * privileged than they are. The user's memberships are read fresh.
 */
export async function policyOrgOf(
  db: Queryable,
  instanceId: string,
  user: PolicyUser,
): Promise<string | undefined> {
  const memberships = await membershipsOfUser(db, instanceId, user.userId);
  return orgOwnersControl(user.orgId, memberships) ? user.orgId : undefined;
}
