import { NotFoundError } from "../../errors.ts";
import type { EventStore } from "../../eventstore/eventstore.ts";
import type { CommandTx, NewEvent, StoredEvent } from "../../eventstore/types.ts";
import { foldOrg, type Version, versionAfter } from "../org/commands.ts";
import { ORG } from "../org/events.ts";
import { INSTANCE, INSTANCE_DOMAIN_CONSTRAINT, InstanceEvent, type InstanceLimitsPayload } from "./events.ts";
import { type InstanceSetup, type InstanceSetupResult, setupInstanceEvents } from "./setup.ts";

/** An instance folded from its events. */
export interface InstanceAggregate {
  exists: boolean;
  name: string;
  domains: string[];
  defaultOrgId: string;
  blocked: boolean;
  auditLogRetentionSeconds: number | null;
  sequence: number;
  changeDate?: Date;
}

export function foldInstance(events: StoredEvent[]): InstanceAggregate {
  const instance: InstanceAggregate = {
    exists: false,
    name: "",
    domains: [],
    defaultOrgId: "",
    blocked: false,
    auditLogRetentionSeconds: null,
    sequence: 0,
  };
  for (const e of events) {
    const p = e.payload ?? {};
    instance.sequence = e.sequence;
    instance.changeDate = e.createdAt;
    switch (e.type) {
      case InstanceEvent.added:
        instance.exists = true;
        instance.name = String(p.name);
        break;
      case InstanceEvent.changed:
        if (typeof p.name === "string") instance.name = p.name;
        break;
      case InstanceEvent.domainAdded:
        instance.domains.push(String(p.domain).toLowerCase());
        break;
      case InstanceEvent.domainRemoved:
        instance.domains = instance.domains.filter((d) => d !== String(p.domain).toLowerCase());
        break;
      case InstanceEvent.defaultOrgSet:
        instance.defaultOrgId = String(p.org_id);
        break;
      case InstanceEvent.limitsSet: {
        const limits = p as InstanceLimitsPayload;
        if (limits.block !== undefined) instance.blocked = limits.block;
        if (limits.audit_log_retention_seconds !== undefined)
          instance.auditLogRetentionSeconds = limits.audit_log_retention_seconds;
        break;
      }
      case InstanceEvent.removed:
        instance.exists = false;
        break;
    }
  }
  return instance;
}

async function loadInstance(tx: CommandTx, instanceId: string): Promise<InstanceAggregate> {
  const instance = foldInstance(await tx.load(INSTANCE, instanceId, instanceId));
  if (!instance.exists) throw new NotFoundError(`instance ${instanceId} not found`);
  return instance;
}

/** Creates a whole instance (domains, first org, management project, IAM_OWNER) in one push. */
export async function createInstance(
  eventStore: EventStore,
  creator: string,
  setup: InstanceSetup,
): Promise<InstanceSetupResult & { version: Version }> {
  const result = setupInstanceEvents(setup);
  const stored = await eventStore.push({ instanceId: result.instanceId, creator }, async () => result.events);
  return { ...result, version: versionAfter(stored, INSTANCE, result.instanceId) };
}

/** Renames an instance; the same name appends nothing. */
export async function changeInstance(
  eventStore: EventStore,
  cmd: { instanceId: string; creator: string; name?: string },
): Promise<Version> {
  let current: Version = { sequence: 0 };
  const stored = await eventStore.push(cmd, async (tx) => {
    const instance = await loadInstance(tx, cmd.instanceId);
    current = { sequence: instance.sequence, changeDate: instance.changeDate };
    if (cmd.name === undefined || cmd.name === instance.name) return [];
    return [instanceEvent(cmd.instanceId, InstanceEvent.changed, { name: cmd.name })];
  });
  return stored.length ? versionAfter(stored, INSTANCE, cmd.instanceId) : current;
}

function instanceEvent(instanceId: string, type: string, payload: Record<string, unknown>): NewEvent {
  return {
    aggregateType: INSTANCE,
    aggregateId: instanceId,
    resourceOwner: instanceId,
    instanceId,
    type,
    payload,
  };
}

/**
 * Sets block and/or audit-log retention of instances, all in one push (every instance must exist).
 * Instances whose limits already have these values get no event; their current version is returned.
 */
export async function setInstanceLimits(
  eventStore: EventStore,
  cmd: { instanceIds: string[]; creator: string; limits: InstanceLimitsPayload },
): Promise<Version[]> {
  const current = new Map<string, Version>();
  const stored = await eventStore.push({ instanceId: "", creator: cmd.creator }, async (tx) => {
    const events: NewEvent[] = [];
    for (const instanceId of cmd.instanceIds) {
      const instance = await loadInstance(tx, instanceId);
      current.set(instanceId, { sequence: instance.sequence, changeDate: instance.changeDate });
      const payload: InstanceLimitsPayload = {};
      if (cmd.limits.block !== undefined && cmd.limits.block !== instance.blocked)
        payload.block = cmd.limits.block;
      if (
        cmd.limits.audit_log_retention_seconds !== undefined &&
        cmd.limits.audit_log_retention_seconds !== instance.auditLogRetentionSeconds
      )
        payload.audit_log_retention_seconds = cmd.limits.audit_log_retention_seconds;
      if (Object.keys(payload).length > 0)
        events.push(instanceEvent(instanceId, InstanceEvent.limitsSet, { ...payload }));
    }
    return events;
  });
  return cmd.instanceIds.map((id) =>
    stored.some((e) => e.aggregateId === id) ? versionAfter(stored, INSTANCE, id) : current.get(id)!,
  );
}

/** Makes an organization of the instance its default organization; already default: no event. */
export async function setDefaultOrg(
  eventStore: EventStore,
  cmd: { instanceId: string; creator: string; orgId: string },
): Promise<Version> {
  let current: Version = { sequence: 0 };
  const stored = await eventStore.push(cmd, async (tx) => {
    const instance = await loadInstance(tx, cmd.instanceId);
    current = { sequence: instance.sequence, changeDate: instance.changeDate };
    if (!foldOrg(await tx.load(ORG, cmd.orgId)).exists) throw new NotFoundError("organization not found");
    if (instance.defaultOrgId === cmd.orgId) return [];
    return [instanceEvent(cmd.instanceId, InstanceEvent.defaultOrgSet, { org_id: cmd.orgId })];
  });
  return stored.length ? versionAfter(stored, INSTANCE, cmd.instanceId) : current;
}

/**
 * Removes an instance: releases its domains (system-wide constraints) and every unique value of the
 * instance. Its read-model rows stay but nothing resolves to the instance any more.
 */
export async function removeInstance(
  eventStore: EventStore,
  cmd: { instanceId: string; creator: string },
): Promise<Version> {
  const stored = await eventStore.push(cmd, async (tx) => {
    const instance = await loadInstance(tx, cmd.instanceId);
    return [
      {
        ...instanceEvent(cmd.instanceId, InstanceEvent.removed, { name: instance.name }),
        uniqueConstraints: [
          ...instance.domains.map((domain) => ({
            action: "remove" as const,
            type: INSTANCE_DOMAIN_CONSTRAINT,
            field: domain,
            ignoreCase: true,
            scope: "system" as const,
          })),
          { action: "remove_instance" as const },
        ],
      },
    ];
  });
  return versionAfter(stored, INSTANCE, cmd.instanceId);
}
