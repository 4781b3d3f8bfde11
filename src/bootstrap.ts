import { chmodSync, writeFileSync } from "node:fs";
import { type Config, externalOrigin } from "./config.ts";
import { hashPassword } from "./crypto/password.ts";
import { generatePassword, randomToken, sha256 } from "./crypto/tokens.ts";
import { ensureConsoleApp } from "./domain/instance/console.ts";
import { INSTANCE, InstanceEvent } from "./domain/instance/events.ts";
import { setupInstanceEvents } from "./domain/instance/setup.ts";
import { SYSTEM, SYSTEM_ID, SYSTEM_INSTANCE_ID, SystemEvent } from "./domain/system/events.ts";
import type { EventStore } from "./eventstore/eventstore.ts";
import type { Queryable } from "./storage/database.ts";

export interface BootstrapResult {
  instanceId: string;
  orgId: string;
  adminUserId: string;
  adminUsername: string;
  /** Set when the password was generated: shown once, never stored in clear. */
  generatedPassword?: string;
  patPath?: string;
}

export const ADMIN_CLIENT_USERNAME = "admin-client";

/**
 * First start: the system and a first instance, all as events in one transaction. Idempotent: when
 * the system aggregate exists (an earlier start, or another process that won the race) it does nothing
 * and returns undefined.
 */
export async function bootstrap(
  eventStore: EventStore,
  config: Config,
): Promise<BootstrapResult | undefined> {
  const existing = await eventStore.aggregateEvents(SYSTEM_INSTANCE_ID, SYSTEM, SYSTEM_ID);
  if (existing.length > 0) return undefined;

  const { firstInstance } = config;
  const generatedPassword = firstInstance.adminPassword === undefined ? generatePassword() : undefined;
  const password = firstInstance.adminPassword ?? generatedPassword!;
  const pat = firstInstance.patPath ? randomToken() : undefined;

  const setup = setupInstanceEvents({
    name: "Platform",
    domains: [config.externalDomain],
    orgName: firstInstance.orgName,
    admin: {
      username: firstInstance.adminUsername,
      passwordHash: await hashPassword(password),
      passwordChangeRequired: false,
    },
    machine: pat ? { username: ADMIN_CLIENT_USERNAME, patHash: sha256(pat) } : undefined,
    consoleOrigin: externalOrigin(config),
  });

  const stored = await eventStore.push({ instanceId: SYSTEM_INSTANCE_ID, creator: "system" }, async (tx) => {
    const system = await tx.load(SYSTEM, SYSTEM_ID, SYSTEM_INSTANCE_ID);
    if (system.length > 0) return [];
    return [
      ...setup.events,
      {
        aggregateType: SYSTEM,
        aggregateId: SYSTEM_ID,
        resourceOwner: SYSTEM_ID,
        instanceId: SYSTEM_INSTANCE_ID,
        type: SystemEvent.firstInstanceSet,
        payload: { instance_id: setup.instanceId },
      },
    ];
  });
  if (stored.length === 0) return undefined;

  if (pat && firstInstance.patPath) {
    writeFileSync(firstInstance.patPath, `${pat}\n`, { mode: 0o600 });
    chmodSync(firstInstance.patPath, 0o600); // an existing file keeps its mode on write
  }
  return {
    instanceId: setup.instanceId,
    orgId: setup.orgId,
    adminUserId: setup.adminUserId,
    adminUsername: firstInstance.adminUsername,
    generatedPassword,
    patPath: firstInstance.patPath,
  };
}

/**
 * The upgrade step of the administration console (docs/console.md), at every start after `bootstrap`: each
 * instance without a console app (made before the console existed, or whose app was removed) gets one, for
 * its primary domain's external origin, through `ensureConsoleApp` (events, idempotent under concurrent
 * starts). One query finds them; an instance that has its app costs nothing more. Answers the instance IDs
 * that got one.
 */
export async function ensureConsoleApps(
  eventStore: EventStore,
  db: Queryable,
  config: Config,
): Promise<string[]> {
  const missing = await db.query<{ id: string; domain: string }>(
    `SELECT i.id, d.domain FROM instances i
     JOIN instance_domains d ON d.instance_id = i.id AND d.is_primary
     WHERE i.iam_project_id IS NOT NULL AND NOT EXISTS (
       SELECT 1 FROM events e JOIN apps a ON a.instance_id = e.instance_id AND a.id = e.payload->>'app_id'
       WHERE e.instance_id = i.id AND e.aggregate_type = $1 AND e.aggregate_id = i.id AND e.event_type = $2)
     ORDER BY i.id`,
    [INSTANCE, InstanceEvent.consoleSet],
  );
  const added: string[] = [];
  for (const { id, domain } of missing)
    if (await ensureConsoleApp(eventStore, id, externalOrigin(config, domain))) added.push(id);
  return added;
}
