/**
 * Sign-ins with an external identity provider in progress (table `login_idp_intents`, migration 0071):
 * which auth request, provider and organization, the browser that started it, the nonce and PKCE verifier
 * (never sent to the browser), and after the callback the identity the provider answered. The intent's ID
 * is the OAuth `state`. Like auth requests they are working state of a login, not history; rows live 10
 * minutes and are deleted a day after.
 */
import { randomToken } from "../../crypto/tokens.ts";
import type { Queryable } from "../../storage/database.ts";
import type { ExternalIdentity } from "./provider.ts";

export const INTENT_LIFETIME_MS = 10 * 60 * 1000;
const DELETE_AFTER_EXPIRY_MS = 24 * 60 * 60 * 1000;

export interface IdpIntent {
  id: string;
  instanceId: string;
  authRequestId: string;
  idpId: string;
  orgId: string;
  userAgentHash: string;
  nonce: string;
  codeVerifier: string;
  /** The identity the provider answered (after the callback). */
  external?: ExternalIdentity;
  /** The link step proved this user's password: the link waits for the session's second factor. */
  pendingLink?: { userId: string; sessionId: string };
}

interface IntentRow {
  id: string;
  instance_id: string;
  auth_request_id: string;
  idp_id: string;
  org_id: string;
  user_agent_hash: string;
  nonce: string;
  code_verifier: string;
  external: ExternalIdentity | string | null;
  link_user_id: string | null;
  link_session_id: string | null;
  [key: string]: unknown;
}

function toIntent(row: IntentRow): IdpIntent {
  const external = typeof row.external === "string" ? JSON.parse(row.external) : (row.external ?? undefined);
  return {
    id: row.id,
    instanceId: row.instance_id,
    authRequestId: row.auth_request_id,
    idpId: row.idp_id,
    orgId: row.org_id,
    userAgentHash: row.user_agent_hash,
    nonce: row.nonce,
    codeVerifier: row.code_verifier,
    external,
    pendingLink:
      row.link_user_id && row.link_session_id
        ? { userId: row.link_user_id, sessionId: row.link_session_id }
        : undefined,
  };
}

export class IdpIntentStore {
  private lastCleanup = 0;

  constructor(private readonly db: Queryable) {}

  /** A new intent; its ID (random, 32 bytes) is the `state` of the authorization request. */
  async create(
    input: Omit<IdpIntent, "id" | "external" | "nonce" | "codeVerifier"> & {
      id: string;
      nonce: string;
      codeVerifier: string;
    },
  ): Promise<void> {
    await this.cleanup();
    await this.db.query(
      `INSERT INTO login_idp_intents (instance_id, id, auth_request_id, idp_id, org_id, user_agent_hash, nonce,
         code_verifier, created_at, expires_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, now(), now() + $9::integer * interval '1 millisecond')`,
      [
        input.instanceId,
        input.id,
        input.authRequestId,
        input.idpId,
        input.orgId,
        input.userAgentHash,
        input.nonce,
        input.codeVerifier,
        INTENT_LIFETIME_MS,
      ],
    );
  }

  /** The live intent (not expired, not done) of this browser; undefined otherwise. */
  async find(instanceId: string, id: string, userAgentHash: string): Promise<IdpIntent | undefined> {
    if (!/^[A-Za-z0-9_-]{1,128}$/.test(id)) return undefined;
    const rows = await this.db.query<IntentRow>(
      `SELECT * FROM login_idp_intents
       WHERE instance_id = $1 AND id = $2 AND user_agent_hash = $3 AND expires_at > now() AND done_at IS NULL`,
      [instanceId, id, userAgentHash],
    );
    return rows[0] ? toIntent(rows[0]) : undefined;
  }

  /** Records the identity the provider answered (once: the callback runs once per intent). */
  async setExternal(intent: IdpIntent, external: ExternalIdentity): Promise<boolean> {
    const rows = await this.db.query(
      `UPDATE login_idp_intents SET external = $3
       WHERE instance_id = $1 AND id = $2 AND external IS NULL AND done_at IS NULL RETURNING id`,
      [intent.instanceId, intent.id, JSON.stringify(external)],
    );
    if (rows.length === 0) return false;
    intent.external = external;
    return true;
  }

  /**
   * Makes the intent's link wait for the second factor of `sessionId` (the link step passed the password of
   * `userId`): `pendingLinks` finds it when that session completes the sign-in.
   */
  async holdLink(intent: IdpIntent, userId: string, sessionId: string): Promise<void> {
    await this.db.query(
      `UPDATE login_idp_intents SET link_user_id = $3, link_session_id = $4
       WHERE instance_id = $1 AND id = $2 AND done_at IS NULL`,
      [intent.instanceId, intent.id, userId, sessionId],
    );
    intent.pendingLink = { userId, sessionId };
  }

  /** The live intents of an auth request whose link waits for `sessionId` (oldest first). */
  async pendingLinks(instanceId: string, authRequestId: string, sessionId: string): Promise<IdpIntent[]> {
    const rows = await this.db.query<IntentRow>(
      `SELECT * FROM login_idp_intents
       WHERE instance_id = $1 AND auth_request_id = $2 AND link_session_id = $3
         AND expires_at > now() AND done_at IS NULL
       ORDER BY created_at`,
      [instanceId, authRequestId, sessionId],
    );
    return rows.map(toIntent);
  }

  /** Ends the intent (signed in, linked or registered): it cannot be used again. */
  async finish(intent: IdpIntent): Promise<boolean> {
    const rows = await this.db.query(
      `UPDATE login_idp_intents SET done_at = now()
       WHERE instance_id = $1 AND id = $2 AND done_at IS NULL RETURNING id`,
      [intent.instanceId, intent.id],
    );
    return rows.length > 0;
  }

  private async cleanup(): Promise<void> {
    const now = Date.now();
    if (now - this.lastCleanup < 60_000) return;
    this.lastCleanup = now;
    await this.db.query(
      "DELETE FROM login_idp_intents WHERE expires_at < now() - $1::integer * interval '1 millisecond'",
      [DELETE_AFTER_EXPIRY_MS],
    );
  }
}

/** A fresh intent ID (the OAuth `state`). */
export const newIntentId = () => randomToken(32);
