import {
  USER_SCHEMA,
  type UserSchemaChangedPayload,
  type UserSchemaConfig,
  UserSchemaEvent,
  UserSchemaState,
} from "../../domain/user-schema/events.ts";
import type { EventHandler, Projection } from "../../eventstore/types.ts";

/** The user schemas of every instance (`user_schemas`, migration 0130_user_schemas.sql). */
const setState =
  (state: UserSchemaState): EventHandler =>
  async (tx, e) => {
    await tx.query(
      "UPDATE user_schemas SET state = $3, changed_at = $4, sequence = $5 WHERE instance_id = $1 AND id = $2",
      [e.instanceId, e.aggregateId, state, e.createdAt, e.sequence],
    );
  };

export const userSchemasProjection: Projection = {
  name: "user_schemas",
  tables: ["user_schemas"],
  aggregateTypes: [USER_SCHEMA],
  handlers: {
    [UserSchemaEvent.added]: async (tx, e) => {
      const p = e.payload as unknown as UserSchemaConfig;
      await tx.query(
        `INSERT INTO user_schemas (instance_id, id, type, state, schema, possible_authenticators, revision,
           created_at, changed_at, sequence) VALUES ($1, $2, $3, $4, $5, $6, 1, $7, $7, $8)`,
        [
          e.instanceId,
          e.aggregateId,
          p.type,
          UserSchemaState.active,
          JSON.stringify(p.schema),
          JSON.stringify(p.possible_authenticators ?? []),
          e.createdAt,
          e.sequence,
        ],
      );
    },
    [UserSchemaEvent.changed]: async (tx, e) => {
      const p = (e.payload ?? {}) as UserSchemaChangedPayload;
      await tx.query(
        `UPDATE user_schemas SET type = COALESCE($3, type), schema = COALESCE($4::jsonb, schema),
           possible_authenticators = COALESCE($5::jsonb, possible_authenticators),
           revision = COALESCE($6, revision), changed_at = $7, sequence = $8
         WHERE instance_id = $1 AND id = $2`,
        [
          e.instanceId,
          e.aggregateId,
          p.type ?? null,
          p.schema === undefined ? null : JSON.stringify(p.schema),
          p.possible_authenticators === undefined ? null : JSON.stringify(p.possible_authenticators),
          p.revision ?? null,
          e.createdAt,
          e.sequence,
        ],
      );
    },
    [UserSchemaEvent.deactivated]: setState(UserSchemaState.inactive),
    [UserSchemaEvent.reactivated]: setState(UserSchemaState.active),
    [UserSchemaEvent.removed]: async (tx, e) => {
      await tx.query("DELETE FROM user_schemas WHERE instance_id = $1 AND id = $2", [
        e.instanceId,
        e.aggregateId,
      ]);
    },
  },
};
