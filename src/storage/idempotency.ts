/**
 * The `idempotency_keys` table (migration 0008): one row per caller and Idempotency-Key whose call wrote
 * something, claimed in the transaction of the call's first events and completed with the sealed answer
 * right after. src/api/idempotency.ts decides what a row means; this module only reads and writes rows.
 * Rows live for `ttlMs` (24 h by default): expired rows are never returned, are overwritten by a new claim
 * of the same key and are deleted in small batches at most once per `purgeIntervalMs`.
 */
import { randomToken } from "../crypto/tokens.ts";
import type { Database, ProcessLease, Queryable } from "./database.ts";

/** Which row: the caller's instance and identity, and the SHA-256 of the key. */
export interface IdempotencyKeyId {
  instanceId: string;
  caller: string;
  keyHash: string;
}

export interface IdempotencyRecord extends IdempotencyKeyId {
  method: string;
  fingerprint: string;
  /** Aggregate ID of the first event the call appended. */
  resourceId?: string;
  /** `processId` of the store that claimed it. */
  claimedBy: string;
  claimedAt: Date;
  /** The sealed answer; undefined while the call runs (or when its process died before answering). */
  response?: string;
}

interface Row {
  instance_id: string;
  caller: string;
  key_hash: string;
  method: string;
  fingerprint: string;
  resource_id: string | null;
  claimed_by: string;
  claimed_at: Date | string;
  response: string | null;
  [key: string]: unknown;
}

export const DEFAULT_IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;
const PURGE_BATCH = 1000;

export class IdempotencyStore {
  /**
   * Identifies this process in the rows it claims: tells its own running calls from other processes', and
   * (with the lease, `holdLease`) lets other processes tell whether it still runs.
   */
  readonly processId = randomToken(12);
  readonly ttlMs: number;
  private readonly purgeIntervalMs: number;
  private nextPurge = 0;

  constructor(
    private readonly db: Database,
    options: { ttlMs?: number; purgeIntervalMs?: number } = {},
  ) {
    this.ttlMs = options.ttlMs ?? DEFAULT_IDEMPOTENCY_TTL_MS;
    this.purgeIntervalMs = options.purgeIntervalMs ?? 60_000;
  }

  /** Marks this process as running (Database.holdProcessLease) until the lease is released. */
  holdLease(): Promise<ProcessLease> {
    return this.db.holdProcessLease(this.processId);
  }

  /** Whether the process that claimed a row (its `claimedBy`) is still running. */
  claimantAlive(claimedBy: string): Promise<boolean> {
    return this.db.isProcessAlive(claimedBy);
  }

  /** The unexpired row of that key, if any. */
  async find(id: IdempotencyKeyId): Promise<IdempotencyRecord | undefined> {
    const rows = await this.db.query<Row>(
      `SELECT instance_id, caller, key_hash, method, fingerprint, resource_id, claimed_by, claimed_at, response
       FROM idempotency_keys
       WHERE instance_id = $1 AND caller = $2 AND key_hash = $3 AND expires_at > now()`,
      [id.instanceId, id.caller, id.keyHash],
    );
    const row = rows[0];
    if (!row) return undefined;
    return {
      instanceId: row.instance_id,
      caller: row.caller,
      keyHash: row.key_hash,
      method: row.method,
      fingerprint: row.fingerprint,
      resourceId: row.resource_id ?? undefined,
      claimedBy: row.claimed_by,
      claimedAt: row.claimed_at instanceof Date ? row.claimed_at : new Date(row.claimed_at),
      response: row.response ?? undefined,
    };
  }

  /**
   * Claims the key in the transaction `tx` (an expired row of it is taken over). False when an unexpired
   * row exists: another call holds the key. On PostgreSQL a concurrent uncommitted claim of the same key
   * makes this wait for that transaction, so exactly one of two twins wins.
   */
  async claim(tx: Queryable, id: IdempotencyKeyId, method: string, fingerprint: string): Promise<boolean> {
    const rows = await tx.query(
      `INSERT INTO idempotency_keys
         (instance_id, caller, key_hash, method, fingerprint, claimed_by, claimed_at, expires_at)
       VALUES ($1, $2, $3, $4, $5, $6, now(), now() + $7::float8 * interval '1 millisecond')
       ON CONFLICT (instance_id, caller, key_hash) DO UPDATE SET
         method = EXCLUDED.method, fingerprint = EXCLUDED.fingerprint, resource_id = NULL,
         claimed_by = EXCLUDED.claimed_by, claimed_at = EXCLUDED.claimed_at,
         expires_at = EXCLUDED.expires_at, response = NULL
       WHERE idempotency_keys.expires_at <= now()
       RETURNING key_hash`,
      [id.instanceId, id.caller, id.keyHash, method, fingerprint, this.processId, this.ttlMs],
    );
    return rows.length === 1;
  }

  /** Records the first resource the claiming transaction wrote. */
  async setResource(tx: Queryable, id: IdempotencyKeyId, resourceId: string): Promise<void> {
    await tx.query(
      "UPDATE idempotency_keys SET resource_id = $4 WHERE instance_id = $1 AND caller = $2 AND key_hash = $3",
      [id.instanceId, id.caller, id.keyHash, resourceId],
    );
  }

  /** Undoes a claim in its own transaction (that transaction wrote no events). */
  async release(tx: Queryable, id: IdempotencyKeyId): Promise<void> {
    await tx.query("DELETE FROM idempotency_keys WHERE instance_id = $1 AND caller = $2 AND key_hash = $3", [
      id.instanceId,
      id.caller,
      id.keyHash,
    ]);
  }

  /** Stores the sealed answer of a claimed key. */
  async complete(id: IdempotencyKeyId, response: string): Promise<void> {
    await this.db.query(
      `UPDATE idempotency_keys SET response = $4
       WHERE instance_id = $1 AND caller = $2 AND key_hash = $3 AND claimed_by = $5`,
      [id.instanceId, id.caller, id.keyHash, response, this.processId],
    );
  }

  /**
   * Deletes up to PURGE_BATCH expired rows, at most once per purge interval per process (through the
   * expiry index: never a full scan). Returns the number deleted (0 when it was not yet time).
   */
  async purgeExpired(force = false): Promise<number> {
    const now = Date.now();
    if (!force && now < this.nextPurge) return 0;
    this.nextPurge = now + this.purgeIntervalMs;
    const rows = await this.db.query(
      `DELETE FROM idempotency_keys k
       USING (SELECT instance_id, caller, key_hash FROM idempotency_keys
              WHERE expires_at <= now() ORDER BY expires_at LIMIT ${PURGE_BATCH}) expired
       WHERE k.instance_id = expired.instance_id AND k.caller = expired.caller AND k.key_hash = expired.key_hash
       RETURNING k.key_hash`,
    );
    return rows.length;
  }
}
