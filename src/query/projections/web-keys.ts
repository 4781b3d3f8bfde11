import {
  WEB_KEY,
  type WebKeyActivatedPayload,
  type WebKeyAddedPayload,
  type WebKeyDeactivatedPayload,
  WebKeyEvent,
} from "../../domain/web-key/events.ts";
import type { Projection } from "../../eventstore/types.ts";

/**
 * The signing keys of every instance, public parts and windows (`oidc_signing_keys`, migrations
 * 0010_oidc.sql and 0095_web_keys.sql). The sealed private keys live in `oidc_signing_key_secrets`,
 * which the commands write: a rebuild leaves them alone.
 */
export const webKeysProjection: Projection = {
  name: "web_keys",
  tables: ["oidc_signing_keys"],
  aggregateTypes: [WEB_KEY],
  handlers: {
    [WebKeyEvent.added]: async (tx, e) => {
      const p = e.payload as unknown as WebKeyAddedPayload;
      await tx.query(
        `INSERT INTO oidc_signing_keys (instance_id, id, alg, config, public_jwk, active_from, active_until,
           publish_until, created_at, changed_at, sequence)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9, $10)`,
        [
          e.instanceId,
          e.aggregateId,
          p.alg,
          JSON.stringify(p.config),
          JSON.stringify(p.public_jwk),
          p.active_from ?? null,
          p.active_until ?? null,
          p.publish_until ?? null,
          e.createdAt,
          e.sequence,
        ],
      );
    },
    [WebKeyEvent.activated]: async (tx, e) => {
      const p = e.payload as unknown as WebKeyActivatedPayload;
      await tx.query(
        `UPDATE oidc_signing_keys SET active_from = $3, active_until = $4, publish_until = $5, changed_at = $6,
           sequence = $7 WHERE instance_id = $1 AND id = $2`,
        [
          e.instanceId,
          e.aggregateId,
          p.active_from,
          p.active_until,
          p.publish_until ?? null,
          e.createdAt,
          e.sequence,
        ],
      );
    },
    [WebKeyEvent.deactivated]: async (tx, e) => {
      const p = e.payload as unknown as WebKeyDeactivatedPayload;
      await tx.query(
        "UPDATE oidc_signing_keys SET active_until = $3, changed_at = $4, sequence = $5 WHERE instance_id = $1 AND id = $2",
        [e.instanceId, e.aggregateId, p.active_until, e.createdAt, e.sequence],
      );
    },
    [WebKeyEvent.removed]: async (tx, e) => {
      await tx.query("DELETE FROM oidc_signing_keys WHERE instance_id = $1 AND id = $2", [
        e.instanceId,
        e.aggregateId,
      ]);
    },
  },
};
