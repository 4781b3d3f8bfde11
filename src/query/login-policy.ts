/** The login policy in force for an organization (src/domain/settings/login.ts), read from the settings. */

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
