/**
 * Reads of a user's second factors and passkeys (the `user_factors` read model, ./projections/user-factors.ts):
 * what the users API lists, what a session check verifies against, what the login asks for.
 */
import type { Queryable } from "../storage/database.ts";
import { FactorState } from "./projections/user-factors.ts";

export { FactorState } from "./projections/user-factors.ts";

/** `user_factors.type`. */
export type FactorType = "totp" | "otp_email" | "otp_sms" | "recovery_codes" | "passkey" | "u2f";

/** One factor of a user. */
export interface UserFactorRow {
  id: string;
  type: FactorType;
  /** Pending: registered, not verified yet (never usable). */
  active: boolean;
  name: string;
  /** What verifying needs (sealed secret, public key, hashes; see the migration); never shown as such. */
  data: Record<string, unknown>;
  createdAt: Date;
  changedAt: Date;
  lastUsedAt?: Date;
}

interface Row {
  id: string;
  type: FactorType;
  state: number;
  name: string;
  data: Record<string, unknown> | string;
  created_at: Date | string;
  changed_at: Date | string;
  last_used_at: Date | string | null;
  [key: string]: unknown;
}

function toFactor(row: Row): UserFactorRow {
  return {
    id: row.id,
    type: row.type,
    active: row.state === FactorState.active,
    name: row.name,
    data: typeof row.data === "string" ? JSON.parse(row.data) : row.data,
    createdAt: new Date(row.created_at),
    changedAt: new Date(row.changed_at),
    lastUsedAt: row.last_used_at ? new Date(row.last_used_at) : undefined,
  };
}

const COLUMNS = "id, type, state, name, data, created_at, changed_at, last_used_at";

/** A user's factors, oldest first (`active`: only verified ones). */
export async function userFactors(
  db: Queryable,
  instanceId: string,
  userId: string,
  options: { active?: boolean; types?: readonly FactorType[] } = {},
): Promise<UserFactorRow[]> {
  const params: unknown[] = [instanceId, userId];
  let where = "instance_id = $1 AND user_id = $2";
  if (options.active) where += ` AND state = ${FactorState.active}`;
  if (options.types) {
    params.push(options.types);
    where += ` AND type = ANY($${params.length})`;
  }
  const rows = await db.query<Row>(
    `SELECT ${COLUMNS} FROM user_factors WHERE ${where} ORDER BY created_at, id`,
    params,
  );
  return rows.map(toFactor);
}

/** One factor of a user by ID (`totp`, `otp_email`, `otp_sms`, `recovery_codes`, or a passkey's ID). */
export async function userFactor(
  db: Queryable,
  instanceId: string,
  userId: string,
  id: string,
): Promise<UserFactorRow | undefined> {
  const rows = await db.query<Row>(
    `SELECT ${COLUMNS} FROM user_factors WHERE instance_id = $1 AND user_id = $2 AND id = $3`,
    [instanceId, userId, id],
  );
  return rows[0] ? toFactor(rows[0]) : undefined;
}

/** The active passkey or security key with a credential ID, and its user (a sign-in without a login name). */
export async function factorByCredentialId(
  db: Queryable,
  instanceId: string,
  credentialId: string,
): Promise<(UserFactorRow & { userId: string; orgId: string }) | undefined> {
  const rows = await db.query<Row & { user_id: string; org_id: string }>(
    `SELECT ${COLUMNS}, user_id, org_id FROM user_factors
     WHERE instance_id = $1 AND data->>'credential_id' = $2 AND type IN ('passkey', 'u2f')
       AND state = ${FactorState.active}`,
    [instanceId, credentialId],
  );
  const row = rows[0];
  return row ? { ...toFactor(row), userId: row.user_id, orgId: row.org_id } : undefined;
}
