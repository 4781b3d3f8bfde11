import { foldSettings } from "../../domain/settings/commands.ts";
import { SETTINGS, type SettingsChangedPayload, SettingsEvent } from "../../domain/settings/events.ts";
import type { Projection } from "../../eventstore/types.ts";

export const settingsProjection: Projection = {
  name: "settings",
  tables: ["settings"],
  aggregateTypes: [SETTINGS],
  handlers: {
    [SettingsEvent.changed]: async (tx, e) => {
      const p = e.payload as unknown as SettingsChangedPayload;
      const rows = await tx.query<{ settings: Record<string, unknown> }>(
        "SELECT settings FROM settings WHERE instance_id = $1 AND owner_type = $2 AND owner_id = $3 AND category = $4",
        [e.instanceId, p.owner_type, p.owner_id, p.category],
      );
      const values = { ...(rows[0]?.settings ?? {}), ...foldSettings([e]) };
      for (const key of p.reset) delete values[key];
      await tx.query(
        `INSERT INTO settings (instance_id, owner_type, owner_id, category, settings, changed_at, sequence, position)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
         ON CONFLICT (instance_id, owner_type, owner_id, category)
         DO UPDATE SET settings = EXCLUDED.settings, changed_at = EXCLUDED.changed_at, sequence = EXCLUDED.sequence,
                       position = EXCLUDED.position`,
        [
          e.instanceId,
          p.owner_type,
          p.owner_id,
          p.category,
          JSON.stringify(values),
          e.createdAt,
          e.sequence,
          e.position,
        ],
      );
    },
  },
};
