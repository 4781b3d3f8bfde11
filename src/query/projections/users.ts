import {
  type HumanAddedPayload,
  type MachineAddedPayload,
  USER,
  UserEvent,
  UserState,
  UserType,
} from "../../domain/user/events.ts";
import type { EventHandler, Projection } from "../../eventstore/types.ts";

function setState(state: number): EventHandler {
  return async (tx, e) => {
    await tx.query(
      "UPDATE users SET state = $3, changed_at = $4, sequence = $5 WHERE instance_id = $1 AND id = $2",
      [e.instanceId, e.aggregateId, state, e.createdAt, e.sequence],
    );
  };
}

export const usersProjection: Projection = {
  name: "users",
  tables: ["users", "personal_access_tokens"],
  aggregateTypes: [USER],
  handlers: {
    [UserEvent.humanAdded]: async (tx, e) => {
      const p = e.payload as unknown as HumanAddedPayload;
      await tx.query(
        `INSERT INTO users (instance_id, id, org_id, type, username, given_name, family_name, display_name, nick_name,
           preferred_language, email, email_verified, phone, phone_verified, password_hash, password_change_required,
           created_at, changed_at, sequence)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $17, $18)`,
        [
          e.instanceId,
          e.aggregateId,
          e.resourceOwner,
          UserType.human,
          p.username,
          p.profile?.given_name ?? null,
          p.profile?.family_name ?? null,
          p.profile?.display_name ?? null,
          p.profile?.nick_name ?? null,
          p.profile?.preferred_language ?? null,
          p.email?.address ?? null,
          p.email?.is_verified === true,
          p.phone?.number ?? null,
          p.phone?.is_verified === true,
          p.password_hash ?? null,
          p.password_change_required === true,
          e.createdAt,
          e.sequence,
        ],
      );
    },
    [UserEvent.machineAdded]: async (tx, e) => {
      const p = e.payload as unknown as MachineAddedPayload;
      await tx.query(
        `INSERT INTO users (instance_id, id, org_id, type, username, machine_name, description, access_token_type,
           created_at, changed_at, sequence)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9, $10)`,
        [
          e.instanceId,
          e.aggregateId,
          e.resourceOwner,
          UserType.machine,
          p.username,
          p.name,
          p.description ?? null,
          p.access_token_type ?? 0,
          e.createdAt,
          e.sequence,
        ],
      );
    },
    [UserEvent.locked]: setState(UserState.locked),
    [UserEvent.unlocked]: setState(UserState.active),
    [UserEvent.deactivated]: setState(UserState.inactive),
    [UserEvent.reactivated]: setState(UserState.active),
    [UserEvent.passwordChanged]: async (tx, e) => {
      await tx.query(
        `UPDATE users SET password_hash = $3, password_change_required = $4, changed_at = $5, sequence = $6
         WHERE instance_id = $1 AND id = $2`,
        [
          e.instanceId,
          e.aggregateId,
          e.payload!.password_hash,
          e.payload!.change_required === true,
          e.createdAt,
          e.sequence,
        ],
      );
    },
    [UserEvent.patAdded]: async (tx, e) => {
      await tx.query(
        `INSERT INTO personal_access_tokens (instance_id, id, user_id, token_hash, expires_at, created_at)
         VALUES ($1, $2, $3, $4, $5, $6)`,
        [
          e.instanceId,
          e.payload!.pat_id,
          e.aggregateId,
          e.payload!.token_hash,
          e.payload!.expiration ?? null,
          e.createdAt,
        ],
      );
      await tx.query("UPDATE users SET changed_at = $3, sequence = $4 WHERE instance_id = $1 AND id = $2", [
        e.instanceId,
        e.aggregateId,
        e.createdAt,
        e.sequence,
      ]);
    },
    [UserEvent.patRemoved]: async (tx, e) => {
      await tx.query("DELETE FROM personal_access_tokens WHERE instance_id = $1 AND id = $2", [
        e.instanceId,
        e.payload!.pat_id,
      ]);
      await tx.query("UPDATE users SET changed_at = $3, sequence = $4 WHERE instance_id = $1 AND id = $2", [
        e.instanceId,
        e.aggregateId,
        e.createdAt,
        e.sequence,
      ]);
    },
    [UserEvent.removed]: async (tx, e) => {
      await tx.query("DELETE FROM personal_access_tokens WHERE instance_id = $1 AND user_id = $2", [
        e.instanceId,
        e.aggregateId,
      ]);
      await tx.query("DELETE FROM users WHERE instance_id = $1 AND id = $2", [e.instanceId, e.aggregateId]);
    },
  },
};
