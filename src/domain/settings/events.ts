export const SETTINGS = "settings";

export const SettingsEvent = {
  /** Sets some values and resets (removes) others in one context. */
  changed: "settings.changed",
} as const;

export const OwnerType = { system: 1, instance: 2, org: 3 } as const;
export type OwnerType = (typeof OwnerType)[keyof typeof OwnerType];

export interface SettingsOwner {
  type: OwnerType;
  /** "system" for the system context. */
  id: string;
}

export interface SettingsChangedPayload {
  category: string;
  owner_type: OwnerType;
  owner_id: string;
  set: Record<string, unknown>;
  reset: string[];
}

/** One aggregate per context and category. */
export function settingsAggregateId(category: string, owner: SettingsOwner): string {
  return `${category}:${owner.type}:${owner.id}`;
}
