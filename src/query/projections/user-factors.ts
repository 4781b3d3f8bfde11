/**
 * The `user_factors` read model (migration 0150): a user's TOTP authenticator, passkeys and security keys,
 * one-time codes by e-mail and SMS, and recovery codes, as their events on the user aggregate leave them.
 * Every event also moves the user's version (`users.changed_at`, `sequence`). A removed user's factors go.
 */
import {
  type OtpFactorPayload,
  type PasskeyAddedPayload,
  type PasskeyRemovedPayload,
  type PasskeyUsedPayload,
  type PasskeyVerifiedPayload,
  type RecoveryCodesGeneratedPayload,
  type RecoveryCodeUsedPayload,
  type TotpAddedPayload,
  type TotpUsedPayload,
  USER,
  UserEvent,
} from "../../domain/user/events.ts";
import type { EventHandler, Projection, StoredEvent } from "../../eventstore/types.ts";
import type { Queryable } from "../../storage/database.ts";

/** `user_factors.state`. */
export const FactorState = { pending: 1, active: 2 } as const;

/**
 * Runs `change` (a statement on the user's factor rows: $1 instance, $2 user, $3 the event's time, $4 its
 * sequence, the rest its own) and moves the user's version, in one statement: a data-modifying WITH runs
 * whether or not the rest reads it.
 */
async function withUserVersion(tx: Queryable, e: StoredEvent, change: string, values: unknown[]) {
  await tx.query(
    `WITH factor AS (${change})
     UPDATE users SET changed_at = $3, sequence = $4 WHERE instance_id = $1 AND id = $2`,
    [e.instanceId, e.aggregateId, e.createdAt, e.sequence, ...values],
  );
}

/** Inserts (or replaces) a factor row. */
async function put(
  tx: Queryable,
  e: StoredEvent,
  row: { id: string; type: string; state: number; name?: string; data?: Record<string, unknown> },
): Promise<void> {
  await withUserVersion(
    tx,
    e,
    `INSERT INTO user_factors (instance_id, user_id, org_id, id, type, state, name, data, created_at, changed_at)
     VALUES ($1, $2, $5, $6, $7, $8, $9, $10::jsonb, $3, $3)
     ON CONFLICT (instance_id, user_id, id) DO UPDATE SET type = excluded.type, state = excluded.state,
       name = excluded.name, data = excluded.data, created_at = excluded.created_at,
       changed_at = excluded.changed_at, last_used_at = NULL`,
    [e.resourceOwner, row.id, row.type, row.state, row.name ?? "", JSON.stringify(row.data ?? {})],
  );
}

/** Updates a factor row: `data` is merged into the stored document (top-level keys). */
async function update(
  tx: Queryable,
  e: StoredEvent,
  id: string,
  set: { state?: number; name?: string; data?: Record<string, unknown>; used?: boolean },
): Promise<void> {
  await withUserVersion(
    tx,
    e,
    `UPDATE user_factors SET state = COALESCE($6::integer, state), name = COALESCE($7::text, name),
       data = data || $8::jsonb, changed_at = $3, last_used_at = CASE WHEN $9::boolean THEN $3 ELSE last_used_at END
     WHERE instance_id = $1 AND user_id = $2 AND id = $5`,
    [id, set.state ?? null, set.name ?? null, JSON.stringify(set.data ?? {}), set.used === true],
  );
}

function remove(id: (e: StoredEvent) => string): EventHandler {
  return async (tx, e) => {
    await withUserVersion(
      tx,
      e,
      "DELETE FROM user_factors WHERE instance_id = $1 AND user_id = $2 AND id = $5",
      [id(e)],
    );
  };
}

const fixed = (id: string) => () => id;

export const userFactorsProjection: Projection = {
  name: "user_factors",
  tables: ["user_factors"],
  aggregateTypes: [USER],
  handlers: {
    [UserEvent.totpAdded]: (tx, e) => {
      const p = e.payload as unknown as TotpAddedPayload;
      return put(tx, e, {
        id: "totp",
        type: "totp",
        state: FactorState.pending,
        data: { secret_sealed: p.secret_sealed },
      });
    },
    [UserEvent.totpVerified]: (tx, e) => update(tx, e, "totp", { state: FactorState.active }),
    [UserEvent.totpUsed]: (tx, e) => {
      const p = e.payload as unknown as TotpUsedPayload;
      return update(tx, e, "totp", { data: { last_step: p.step }, used: true });
    },
    [UserEvent.totpRemoved]: remove(fixed("totp")),
    [UserEvent.passkeyAdded]: (tx, e) => {
      const p = e.payload as unknown as PasskeyAddedPayload;
      const { passkey_id, type, ...registration } = p;
      return put(tx, e, { id: passkey_id, type, state: FactorState.pending, data: registration });
    },
    [UserEvent.passkeyVerified]: (tx, e) => {
      const { passkey_id, name, ...credential } = e.payload as unknown as PasskeyVerifiedPayload;
      return update(tx, e, passkey_id, { state: FactorState.active, name, data: credential });
    },
    [UserEvent.passkeyUsed]: (tx, e) => {
      const { passkey_id, ...usage } = e.payload as unknown as PasskeyUsedPayload;
      return update(tx, e, passkey_id, { data: usage, used: true });
    },
    [UserEvent.passkeyRemoved]: remove((e) => (e.payload as unknown as PasskeyRemovedPayload).passkey_id),
    [UserEvent.otpEmailAdded]: (tx, e) =>
      put(tx, e, {
        id: "otp_email",
        type: "otp_email",
        state: FactorState.active,
        data: { ...(e.payload as OtpFactorPayload | null) },
      }),
    [UserEvent.otpEmailRemoved]: remove(fixed("otp_email")),
    [UserEvent.otpSmsAdded]: (tx, e) =>
      put(tx, e, {
        id: "otp_sms",
        type: "otp_sms",
        state: FactorState.active,
        data: { ...(e.payload as OtpFactorPayload | null) },
      }),
    [UserEvent.otpSmsRemoved]: remove(fixed("otp_sms")),
    [UserEvent.recoveryCodesGenerated]: (tx, e) => {
      const p = e.payload as unknown as RecoveryCodesGeneratedPayload;
      return put(tx, e, {
        id: "recovery_codes",
        type: "recovery_codes",
        state: FactorState.active,
        data: { hashes: p.hashes, used: [] },
      });
    },
    [UserEvent.recoveryCodeUsed]: async (tx, e) => {
      const p = e.payload as unknown as RecoveryCodeUsedPayload;
      await withUserVersion(
        tx,
        e,
        `UPDATE user_factors SET data = jsonb_set(data, '{used}', (data->'used') || to_jsonb($5::int)),
           changed_at = $3, last_used_at = $3
         WHERE instance_id = $1 AND user_id = $2 AND id = 'recovery_codes'`,
        [p.index],
      );
    },
    [UserEvent.recoveryCodesRemoved]: remove(fixed("recovery_codes")),
    [UserEvent.removed]: async (tx, e) => {
      await tx.query("DELETE FROM user_factors WHERE instance_id = $1 AND user_id = $2", [
        e.instanceId,
        e.aggregateId,
      ]);
    },
  },
};
