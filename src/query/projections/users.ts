import {
  type DataSetPayload,
  type FactorCheckPayload,
  type HumanAddedPayload,
  type IdpLinkAddedPayload,
  type KeyAddedPayload,
  type MachineAddedPayload,
  type MetadataSetPayload,
  type PasswordCheckFailedPayload,
  type SecretSetPayload,
  USER,
  type UserChangedPayload,
  UserEvent,
  UserState,
  UserType,
} from "../../domain/user/events.ts";
import { usernameKey } from "../../domain/user/username.ts";
import type { EventHandler, Projection, StoredEvent } from "../../eventstore/types.ts";
import type { Queryable } from "../../storage/database.ts";

/** Read-model columns `user.changed` may set. */
const changeableColumns = [
  "given_name",
  "family_name",
  "display_name",
  "nick_name",
  "preferred_language",
  "email",
  "email_verified",
  "phone",
  "phone_verified",
  "description",
  "access_token_type",
] as const;

/** Moves the user's version (sequence, change date) to the event, setting `set` columns too. */
async function touch(tx: Queryable, e: StoredEvent, set: Record<string, unknown> = {}): Promise<void> {
  const params: unknown[] = [e.instanceId, e.aggregateId, e.createdAt, e.sequence];
  const assignments = Object.entries(set).map(([column, value]) => {
    params.push(value);
    return `${column} = $${params.length}`;
  });
  await tx.query(
    `UPDATE users SET ${[...assignments, "changed_at = $3", "sequence = $4"].join(", ")} WHERE instance_id = $1 AND id = $2`,
    params,
  );
}

function setState(state: number, extra: Record<string, unknown> = {}): EventHandler {
  return (tx, e) => touch(tx, e, { state, ...extra });
}

/** Columns of a reset failure count (right password, unlock, password change). */
const noFailures = { password_failed_attempts: 0, password_locked_until: null };

/** A wrong password: one more failure in a row, and the lockout it may start. */
const countFailure: EventHandler = async (tx, e) => {
  const until = (e.payload as PasswordCheckFailedPayload | null)?.locked_until ?? null;
  await tx.query(
    `UPDATE users SET password_failed_attempts = password_failed_attempts + 1, password_locked_until = $5,
       changed_at = $3, sequence = $4
     WHERE instance_id = $1 AND id = $2`,
    [e.instanceId, e.aggregateId, e.createdAt, e.sequence, until],
  );
};

/** A wrong answer of a second factor: one more failure in a row of that factor, and its lockout. */
const countFactorFailure: EventHandler = async (tx, e) => {
  const p = e.payload as unknown as FactorCheckPayload;
  await tx.query(
    `UPDATE users SET factor_lockouts = factor_lockouts || jsonb_build_object($5::text, jsonb_build_object(
         'failed_attempts', COALESCE((factor_lockouts -> $5::text ->> 'failed_attempts')::integer, 0) + 1,
         'locked_until', $6::text)),
       changed_at = $3, sequence = $4
     WHERE instance_id = $1 AND id = $2`,
    [e.instanceId, e.aggregateId, e.createdAt, e.sequence, p.factor, p.locked_until ?? null],
  );
};

/** A right answer of a second factor after failures: that factor's count starts again. */
const resetFactor: EventHandler = async (tx, e) => {
  const p = e.payload as unknown as FactorCheckPayload;
  await tx.query(
    `UPDATE users SET factor_lockouts = factor_lockouts - $5::text, changed_at = $3, sequence = $4
     WHERE instance_id = $1 AND id = $2`,
    [e.instanceId, e.aggregateId, e.createdAt, e.sequence, p.factor],
  );
};

export const usersProjection: Projection = {
  name: "users",
  tables: ["users", "personal_access_tokens", "user_metadata", "user_keys", "user_idp_links"],
  aggregateTypes: [USER],
  handlers: {
    [UserEvent.humanAdded]: async (tx, e) => {
      const p = e.payload as unknown as HumanAddedPayload;
      await tx.query(
        `INSERT INTO users (instance_id, id, org_id, type, username, given_name, family_name, display_name, nick_name,
           preferred_language, email, email_verified, phone, phone_verified, password_hash, password_change_required,
           created_at, changed_at, sequence, username_key)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $17, $18, $19)`,
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
          usernameKey(p.username),
        ],
      );
      if (p.schema_id)
        await tx.query(
          "UPDATE users SET schema_id = $3, schema_revision = $4, data = $5 WHERE instance_id = $1 AND id = $2",
          [e.instanceId, e.aggregateId, p.schema_id, p.schema_revision ?? 1, JSON.stringify(p.data ?? {})],
        );
    },
    [UserEvent.machineAdded]: async (tx, e) => {
      const p = e.payload as unknown as MachineAddedPayload;
      await tx.query(
        `INSERT INTO users (instance_id, id, org_id, type, username, machine_name, description, access_token_type,
           created_at, changed_at, sequence, username_key)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9, $10, $11)`,
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
          usernameKey(p.username),
        ],
      );
    },
    [UserEvent.locked]: setState(UserState.locked),
    [UserEvent.unlocked]: setState(UserState.active, { ...noFailures, factor_lockouts: "{}" }),
    [UserEvent.deactivated]: setState(UserState.inactive),
    [UserEvent.reactivated]: setState(UserState.active),
    [UserEvent.passwordChanged]: async (tx, e) => {
      await tx.query(
        `UPDATE users SET password_hash = $3, password_change_required = $4, changed_at = $5, sequence = $6,
           password_failed_attempts = 0, password_locked_until = NULL
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
    // the codes themselves live in the aggregate (src/domain/user/codes.ts); the row keeps its version
    [UserEvent.emailCodeAdded]: (tx, e) => touch(tx, e),
    [UserEvent.emailCodeCheckFailed]: (tx, e) => touch(tx, e),
    [UserEvent.emailVerified]: (tx, e) => touch(tx, e, { email_verified: true }),
    [UserEvent.mfaInitSkipped]: (tx, e) => touch(tx, e, { mfa_init_skipped_at: e.createdAt }),
    [UserEvent.phoneCodeAdded]: (tx, e) => touch(tx, e),
    [UserEvent.phoneCodeCheckFailed]: (tx, e) => touch(tx, e),
    [UserEvent.phoneVerified]: (tx, e) => touch(tx, e, { phone_verified: true }),
    [UserEvent.changed]: async (tx, e) => {
      const p = e.payload as UserChangedPayload;
      const set: Record<string, unknown> = {};
      for (const column of changeableColumns) if (column in p) set[column] = p[column] ?? null;
      if (p.name !== undefined) set.machine_name = p.name;
      await touch(tx, e, set);
    },
    [UserEvent.usernameChanged]: (tx, e) => {
      const username = String(e.payload!.username);
      return touch(tx, e, { username, username_key: usernameKey(username) });
    },
    // Appended by session password checks: count wrong passwords in a row (and the temporary lockout one
    // starts), reset on a right one, an unlock and a password change.
    [UserEvent.passwordCheckFailed]: countFailure,
    [UserEvent.passwordCheckSucceeded]: (tx, e) => touch(tx, e, noFailures),
    // each second factor counts on its own (a right password resets none of them)
    [UserEvent.factorCheckFailed]: countFactorFailure,
    [UserEvent.factorCheckSucceeded]: resetFactor,
    [UserEvent.metadataSet]: async (tx, e) => {
      const p = e.payload as unknown as MetadataSetPayload;
      await tx.query(
        `INSERT INTO user_metadata (instance_id, user_id, key, value, created_at, changed_at)
         VALUES ($1, $2, $3, $4, $5, $5)
         ON CONFLICT (instance_id, user_id, key) DO UPDATE SET value = excluded.value, changed_at = excluded.changed_at`,
        [e.instanceId, e.aggregateId, p.key, p.value, e.createdAt],
      );
      await touch(tx, e);
    },
    [UserEvent.dataSet]: (tx, e) => {
      const p = e.payload as unknown as DataSetPayload;
      return touch(tx, e, {
        schema_id: p.schema_id,
        schema_revision: p.schema_revision,
        data: JSON.stringify(p.data),
      });
    },
    [UserEvent.dataRemoved]: (tx, e) => touch(tx, e, { schema_id: null, schema_revision: null, data: null }),
    [UserEvent.metadataRemoved]: async (tx, e) => {
      await tx.query("DELETE FROM user_metadata WHERE instance_id = $1 AND user_id = $2 AND key = $3", [
        e.instanceId,
        e.aggregateId,
        e.payload!.key,
      ]);
      await touch(tx, e);
    },
    [UserEvent.secretSet]: (tx, e) =>
      touch(tx, e, { client_secret_hash: (e.payload as unknown as SecretSetPayload).secret_hash }),
    [UserEvent.secretRemoved]: (tx, e) => touch(tx, e, { client_secret_hash: null }),
    [UserEvent.keyAdded]: async (tx, e) => {
      const p = e.payload as unknown as KeyAddedPayload;
      await tx.query(
        `INSERT INTO user_keys (instance_id, id, user_id, public_key, expires_at, created_at)
         VALUES ($1, $2, $3, $4, $5, $6)`,
        [e.instanceId, p.key_id, e.aggregateId, p.public_key, p.expiration ?? null, e.createdAt],
      );
      await touch(tx, e);
    },
    [UserEvent.keyRemoved]: async (tx, e) => {
      await tx.query("DELETE FROM user_keys WHERE instance_id = $1 AND id = $2", [
        e.instanceId,
        e.payload!.key_id,
      ]);
      await touch(tx, e);
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
    [UserEvent.idpLinkAdded]: async (tx, e) => {
      const p = e.payload as unknown as IdpLinkAddedPayload;
      await tx.query(
        `INSERT INTO user_idp_links (instance_id, user_id, org_id, idp_id, external_user_id, external_username,
           created_at, sequence)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
        [
          e.instanceId,
          e.aggregateId,
          e.resourceOwner,
          p.idp_id,
          p.external_user_id,
          p.external_username,
          e.createdAt,
          e.sequence,
        ],
      );
      await touch(tx, e);
    },
    [UserEvent.idpLinkRemoved]: async (tx, e) => {
      await tx.query("DELETE FROM user_idp_links WHERE instance_id = $1 AND user_id = $2 AND idp_id = $3", [
        e.instanceId,
        e.aggregateId,
        e.payload!.idp_id,
      ]);
      await touch(tx, e);
    },
    [UserEvent.removed]: async (tx, e) => {
      for (const table of ["personal_access_tokens", "user_metadata", "user_keys", "user_idp_links"]) {
        await tx.query(`DELETE FROM ${table} WHERE instance_id = $1 AND user_id = $2`, [
          e.instanceId,
          e.aggregateId,
        ]);
      }
      await tx.query("DELETE FROM users WHERE instance_id = $1 AND id = $2", [e.instanceId, e.aggregateId]);
    },
  },
};
