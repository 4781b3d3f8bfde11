import {
  aggregateOf,
  mergeConfig,
  type ProviderConfig,
  ProviderEvents,
  type ProviderKind,
  ProviderState,
} from "../../domain/notification/events.ts";
import type { EventHandler, Projection } from "../../eventstore/types.ts";

/**
 * The SMTP and SMS providers of every instance (`notification_providers`, migration
 * 0110_notification_providers.sql). The sealed secrets live in `notification_provider_secrets`, which the
 * commands write: a rebuild leaves them alone.
 */
function handlers(kind: ProviderKind): Record<string, EventHandler> {
  const names = ProviderEvents[kind];
  const setState =
    (state: ProviderState): EventHandler =>
    async (tx, e) => {
      await tx.query(
        "UPDATE notification_providers SET state = $3, changed_at = $4, sequence = $5 WHERE instance_id = $1 AND id = $2",
        [e.instanceId, e.aggregateId, state, e.createdAt, e.sequence],
      );
    };
  return {
    [names.added]: async (tx, e) => {
      const config = e.payload as unknown as ProviderConfig;
      await tx.query(
        `INSERT INTO notification_providers (instance_id, id, kind, description, state, config, created_at,
           changed_at, sequence) VALUES ($1, $2, $3, $4, $5, $6, $7, $7, $8)`,
        [
          e.instanceId,
          e.aggregateId,
          kind,
          config.description,
          ProviderState.inactive,
          JSON.stringify(config),
          e.createdAt,
          e.sequence,
        ],
      );
    },
    [names.changed]: async (tx, e) => {
      const [row] = await tx.query<{ config: ProviderConfig }>(
        "SELECT config FROM notification_providers WHERE instance_id = $1 AND id = $2",
        [e.instanceId, e.aggregateId],
      );
      if (!row) return;
      const config = mergeConfig(row.config, e.payload ?? {});
      await tx.query(
        `UPDATE notification_providers SET description = $3, config = $4, changed_at = $5, sequence = $6
         WHERE instance_id = $1 AND id = $2`,
        [e.instanceId, e.aggregateId, config.description, JSON.stringify(config), e.createdAt, e.sequence],
      );
    },
    [names.activated]: setState(ProviderState.active),
    [names.deactivated]: setState(ProviderState.inactive),
    [names.removed]: async (tx, e) => {
      await tx.query("DELETE FROM notification_providers WHERE instance_id = $1 AND id = $2", [
        e.instanceId,
        e.aggregateId,
      ]);
    },
  };
}

export const notificationProvidersProjection: Projection = {
  name: "notification_providers",
  tables: ["notification_providers"],
  aggregateTypes: [aggregateOf.smtp, aggregateOf.sms],
  handlers: { ...handlers("smtp"), ...handlers("sms") },
};
