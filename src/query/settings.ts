import type { ResolvedContext } from "../auth/caller.ts";
import { OwnerType, type SettingsOwner } from "../domain/settings/events.ts";
import type { Queryable } from "../storage/database.ts";

export const SYSTEM_OWNER: SettingsOwner = { type: OwnerType.system, id: "system" };

/** The settings set in one context. */
export interface SettingsLayer {
  owner: SettingsOwner;
  values: Record<string, unknown>;
  changedAt: Date;
  sequence: number;
}

export interface Resolved<T> {
  value: T;
  /** The context the value comes from when it is inherited; undefined when set in the requested context. */
  owner?: SettingsOwner;
}

/** The owner of a context's own settings. */
export function ownerOf(context: ResolvedContext): SettingsOwner {
  switch (context.type) {
    case "system":
      return SYSTEM_OWNER;
    case "instance":
      return { type: OwnerType.instance, id: context.instanceId };
    default:
      return { type: OwnerType.org, id: context.orgId };
  }
}

/** Where a context's settings are stored: the instance they belong to ('' for the system). */
export function settingsInstanceId(context: ResolvedContext): string {
  return context.type === "system" ? "" : context.instanceId;
}

/** The contexts a context inherits from, most general first, itself last. */
export function inheritanceChain(context: ResolvedContext): SettingsOwner[] {
  const chain: SettingsOwner[] = [SYSTEM_OWNER];
  if (context.type !== "system") chain.push({ type: OwnerType.instance, id: context.instanceId });
  if (context.type === "org" || context.type === "project")
    chain.push({ type: OwnerType.org, id: context.orgId });
  return chain;
}

/** The stored layers of a category along the context's inheritance chain, most general first. */
export async function settingsLayers(
  db: Queryable,
  category: string,
  context: ResolvedContext,
): Promise<SettingsLayer[]> {
  const chain = inheritanceChain(context);
  const instanceId = settingsInstanceId(context);
  const rows = await db.query<{
    owner_type: number;
    owner_id: string;
    settings: Record<string, unknown>;
    changed_at: Date;
    sequence: number;
  }>(
    `SELECT owner_type, owner_id, settings, changed_at, sequence FROM settings
     WHERE category = $1 AND ((instance_id = '' AND owner_type = 1) OR (instance_id = $2 AND owner_type > 1 AND owner_id = ANY($3)))`,
    [category, instanceId, chain.map((o) => o.id)],
  );
  const layers: SettingsLayer[] = [];
  for (const owner of chain) {
    const row = rows.find((r) => r.owner_type === owner.type && r.owner_id === owner.id);
    if (row)
      layers.push({ owner, values: row.settings, changedAt: row.changed_at, sequence: Number(row.sequence) });
  }
  return layers;
}

/**
 * The effective value of `key`: the most specific layer that sets it, else the built-in default (owned
 * by the system). `owner` is set only when the value is inherited from a parent of `requested`.
 */
export function resolveSetting<T>(
  layers: SettingsLayer[],
  key: string,
  requested: SettingsOwner,
  fallback: T,
): Resolved<T> {
  for (let i = layers.length - 1; i >= 0; i--) {
    const layer = layers[i];
    if (key in layer.values) {
      const own = layer.owner.type === requested.type && layer.owner.id === requested.id;
      return { value: layer.values[key] as T, owner: own ? undefined : layer.owner };
    }
  }
  const own = requested.type === SYSTEM_OWNER.type;
  return { value: fallback, owner: own ? undefined : SYSTEM_OWNER };
}

/** Version of the requested context's own settings (sequence 0 when nothing was set there). */
export function ownVersion(
  layers: SettingsLayer[],
  requested: SettingsOwner,
): { sequence: number; changeDate?: Date } {
  const own = layers.find((l) => l.owner.type === requested.type && l.owner.id === requested.id);
  return own ? { sequence: own.sequence, changeDate: own.changedAt } : { sequence: 0 };
}
