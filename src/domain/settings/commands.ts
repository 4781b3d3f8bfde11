import { isDeepStrictEqual } from "node:util";
import type { EventStore } from "../../eventstore/eventstore.ts";
import type { StoredEvent } from "../../eventstore/types.ts";
import type { Queryable } from "../../storage/database.ts";
import {
  SETTINGS,
  type SettingsChangedPayload,
  SettingsEvent,
  type SettingsOwner,
  settingsAggregateId,
} from "./events.ts";

export interface SettingsChange {
  category: string;
  owner: SettingsOwner;
  /** The instance the context belongs to ('' for the system context). */
  instanceId: string;
  set: Record<string, unknown>;
  reset: string[];
  creator: string;
  /** Rows outside the event store written in the change's transaction (the branding images' bytes). */
  writeRows?: (tx: Queryable) => Promise<void>;
}

export interface SettingsVersion {
  sequence: number;
  changeDate?: Date;
}

/** Folds a context's events of one category into the values set there. */
export function foldSettings(events: StoredEvent[]): Record<string, unknown> {
  const values: Record<string, unknown> = {};
  for (const event of events) {
    const payload = event.payload as unknown as SettingsChangedPayload;
    Object.assign(values, payload.set);
    for (const key of payload.reset) delete values[key];
  }
  return values;
}

/**
 * Sets and resets values of one settings category in one context. A change that changes nothing
 * appends no event; the version returned is then the current one.
 */
export async function changeSettings(
  eventStore: EventStore,
  change: SettingsChange,
): Promise<SettingsVersion> {
  const aggregateId = settingsAggregateId(change.category, change.owner);
  let current: SettingsVersion = { sequence: 0 };
  const stored = await eventStore.push(
    { instanceId: change.instanceId, creator: change.creator },
    async (tx) => {
      // The read model holds the folded values; expect() first, so a concurrent change makes this re-run.
      await tx.expect(SETTINGS, aggregateId);
      await change.writeRows?.(tx);
      const rows = await tx.query<{ settings: Record<string, unknown>; sequence: number; changed_at: Date }>(
        `SELECT settings, sequence, changed_at FROM settings
       WHERE instance_id = $1 AND owner_type = $2 AND owner_id = $3 AND category = $4`,
        [change.instanceId, change.owner.type, change.owner.id, change.category],
      );
      current = rows[0]
        ? { sequence: Number(rows[0].sequence), changeDate: rows[0].changed_at }
        : { sequence: 0 };
      const before = rows[0]?.settings ?? {};
      const set = Object.fromEntries(
        Object.entries(change.set).filter(([key, value]) => !isDeepStrictEqual(before[key], value)),
      );
      const reset = change.reset.filter((key) => key in before && !(key in change.set));
      if (Object.keys(set).length === 0 && reset.length === 0) return [];
      const payload: SettingsChangedPayload = {
        category: change.category,
        owner_type: change.owner.type,
        owner_id: change.owner.id,
        set,
        reset,
      };
      return [
        {
          aggregateType: SETTINGS,
          aggregateId,
          resourceOwner: change.owner.id,
          type: SettingsEvent.changed,
          payload: payload as unknown as Record<string, unknown>,
        },
      ];
    },
  );
  const event = stored.at(-1);
  return event ? { sequence: event.sequence, changeDate: event.createdAt } : current;
}
