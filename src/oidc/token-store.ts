import { randomBytes } from "node:crypto";
import { constantTimeEqual, sha256 } from "../crypto/tokens.ts";
import { UserState } from "../domain/user/events.ts";
import { Broadcast } from "../eventstore/broadcast.ts";
import type { Database, Queryable } from "../storage/database.ts";
import { Batcher } from "./batch.ts";
import { toUserRecord, USER_COLUMNS, type UserRecord } from "./claims.ts";

/**
 * Opaque tokens and codes are `<base64url(kind ":" id)>.<secret>`: the ID finds the row by primary key, the
 * secret (256 random bits) is compared by SHA-256 in constant time. Kinds: `at` access token, `rt` refresh
 * token, `ac` authorization code.
 */
export type HandleKind = "at" | "rt" | "ac";

export interface Handle {
  kind: HandleKind;
  id: string;
  secret: string;
}

/**
 * 256-bit secrets cut from a pool of random bytes (one `randomBytes` call per 128 secrets, as
 * `crypto.randomUUID` does), which matters when thousands of tokens are issued per second.
 */
let pool = Buffer.alloc(0);
let poolOffset = 0;
function randomSecret(): string {
  if (poolOffset + 32 > pool.length) {
    pool = randomBytes(4096);
    poolOffset = 0;
  }
  const secret = pool.toString("base64url", poolOffset, poolOffset + 32);
  pool.fill(0, poolOffset, poolOffset + 32);
  poolOffset += 32;
  return secret;
}

export function newHandle(kind: HandleKind, id: string): { value: string; secretHash: string } {
  const secret = randomSecret();
  return {
    value: `${Buffer.from(`${kind}:${id}`).toString("base64url")}.${secret}`,
    secretHash: sha256(secret),
  };
}

/** The parts of an opaque token or code; undefined when it is not one of ours (e.g. a JWT, garbage). */
export function parseHandle(value: string): Handle | undefined {
  const dot = value.indexOf(".");
  if (dot <= 0 || dot !== value.lastIndexOf(".") || value.length > 200) return undefined;
  const head = Buffer.from(value.slice(0, dot), "base64url").toString("utf8");
  const match = /^(at|rt|ac):(\d{1,30})$/.exec(head);
  const secret = value.slice(dot + 1);
  if (!match || !/^[A-Za-z0-9_-]{43}$/.test(secret)) return undefined;
  return { kind: match[1] as HandleKind, id: match[2], secret };
}

/** True when the secret of a handle is the one whose SHA-256 is stored. */
export function secretMatches(handle: Handle, secretHash: string | null): boolean {
  return secretHash !== null && constantTimeEqual(sha256(handle.secret), secretHash);
}

/**
 * The `jti` of a JWT, read without checking its signature: the caller then compares the SHA-256 of the
 * whole token with the one stored when it was issued, which only that exact token matches.
 */
export function unverifiedJti(token: string): string | undefined {
  const parts = token.split(".");
  if (parts.length !== 3 || token.length > 8192) return undefined;
  try {
    const jti = JSON.parse(Buffer.from(parts[1], "base64url").toString("utf8"))?.jti;
    return typeof jti === "string" && /^\d{1,30}$/.test(jti) ? jti : undefined;
  } catch {
    return undefined;
  }
}

/** True when `token` is the very JWT whose SHA-256 was stored. */
export function jwtMatches(token: string, stored: { jwt: boolean; secretHash: string }): boolean {
  return stored.jwt && constantTimeEqual(sha256(token), stored.secretHash);
}

/** The RFC 8693 `act` claim: the actor, and the actor before it when an impersonation token is exchanged on. */
export interface ActClaim {
  sub: string;
  act?: ActClaim;
}

/**
 * What an exchanged token descends from (token exchange, docs/token-exchange.md): its actor and every access
 * token, personal access token and browser session it was exchanged from, transitively. It stays active
 * only while they do.
 */
export interface Lineage {
  act?: ActClaim;
  tokenIds: string[];
  patIds: string[];
  /** Browser sessions (login sessions) of the tokens it was exchanged from; absent in older rows. */
  sessionIds?: string[];
}

/** Every user of an `act` chain, newest actor first. */
export function actorsOf(act: ActClaim | undefined): string[] {
  const actors: string[] = [];
  for (let a = act; a && actors.length < 32; a = a.act) actors.push(a.sub);
  return actors;
}

/** What grants store about an access token (opaque or JWT). */
export interface AccessTokenRecord {
  instanceId: string;
  id: string;
  clientId: string;
  /** User ID. */
  subject: string;
  audience: string[];
  scope: string[];
  /** A JWT (else opaque). */
  jwt: boolean;
  /** SHA-256 of an opaque token's secret part, or of the whole JWT. */
  secretHash: string;
  issuer: string;
  issuedAt: Date;
  expiresAt: Date;
  revokedAt?: Date | null;
  familyId?: string | null;
  sessionId?: string | null;
  authTime?: Date | null;
  amr?: string[] | null;
  /** Exchanged tokens only (token exchange). */
  lineage?: Lineage | null;
}

/** An access token read back with its user (undefined user: removed since). */
export interface StoredAccessToken extends AccessTokenRecord {
  user?: UserRecord;
}

export interface RefreshTokenRecord {
  instanceId: string;
  id: string;
  familyId: string;
  clientId: string;
  subject: string;
  audience: string[];
  scope: string[];
  secretHash: string;
  issuer: string;
  issuedAt: Date;
  expiresAt: Date;
  absoluteExpiresAt: Date;
  rotatedAt?: Date | null;
  revokedAt?: Date | null;
  sessionId?: string | null;
  authTime?: Date | null;
  amr?: string[] | null;
  /** Refresh tokens of an exchange only: what their access tokens descend from. */
  lineage?: Lineage | null;
}

export interface AuthorizationCodeRecord {
  instanceId: string;
  id: string;
  clientId: string;
  secretHash: string;
  redirectUri: string;
  scope: string[];
  nonce?: string | null;
  codeChallenge?: string | null;
  codeChallengeMethod?: string | null;
  userId: string;
  sessionId?: string | null;
  authTime: Date;
  amr?: string[] | null;
  issuer: string;
  createdAt: Date;
  expiresAt: Date;
  redeemedAt?: Date | null;
}

/**
 * Something this process revoked (committed): caches of verified tokens drop it at once. `sessionIds`: the
 * tokens issued from these browser sessions (the sessions ended); `userIds`: these users were removed, so
 * every token of theirs goes (the tokens of their sessions are revoked, the others refused at use).
 */
export type Revocation = {
  instanceId: string;
  tokenId?: string;
  familyId?: string;
  sessionIds?: string[];
  userIds?: string[];
};

/** The broadcast topic of revocations made outside events (those of sessions come with their events). */
const REVOKED_TOPIC = "revoked";

/** A revocation as another process sent it; undefined when it is not one. */
function revocationOf(message: unknown): Revocation | undefined {
  const m = message as Record<string, unknown> | null;
  const text = (v: unknown) => v === undefined || typeof v === "string";
  const texts = (v: unknown) =>
    v === undefined || (Array.isArray(v) && v.every((x) => typeof x === "string"));
  if (!m || typeof m.instanceId !== "string" || !text(m.tokenId) || !text(m.familyId)) return undefined;
  if (!texts(m.sessionIds) || !texts(m.userIds)) return undefined;
  return m as Revocation;
}

const ACCESS_COLUMNS = [
  "instance_id",
  "id",
  "client_id",
  "subject",
  "audience",
  "scope",
  "jwt",
  "secret_hash",
  "issuer",
  "issued_at",
  "expires_at",
  "family_id",
  "session_id",
  "auth_time",
  "amr",
  "act",
  "ancestor_token_ids",
  "ancestor_pat_ids",
  "ancestor_session_ids",
] as const;

const REFRESH_COLUMNS = [
  "instance_id",
  "id",
  "family_id",
  "client_id",
  "subject",
  "audience",
  "scope",
  "secret_hash",
  "issuer",
  "issued_at",
  "expires_at",
  "absolute_expires_at",
  "session_id",
  "auth_time",
  "amr",
  "act",
  "ancestor_token_ids",
  "ancestor_pat_ids",
  "ancestor_session_ids",
] as const;

const CODE_COLUMNS = [
  "instance_id",
  "id",
  "client_id",
  "secret_hash",
  "redirect_uri",
  "scope",
  "nonce",
  "code_challenge",
  "code_challenge_method",
  "user_id",
  "session_id",
  "auth_time",
  "amr",
  "issuer",
  "created_at",
  "expires_at",
] as const;

function refreshValues(token: RefreshTokenRecord): unknown[] {
  return [
    token.instanceId,
    token.id,
    token.familyId,
    token.clientId,
    token.subject,
    token.audience,
    token.scope,
    token.secretHash,
    token.issuer,
    token.issuedAt,
    token.expiresAt,
    token.absoluteExpiresAt,
    token.sessionId ?? null,
    token.authTime ?? null,
    token.amr ?? null,
    ...lineageValues(token.lineage),
  ];
}

function accessValues(t: AccessTokenRecord): unknown[] {
  return [
    t.instanceId,
    t.id,
    t.clientId,
    t.subject,
    t.audience,
    t.scope,
    t.jwt,
    t.secretHash,
    t.issuer,
    t.issuedAt,
    t.expiresAt,
    t.familyId ?? null,
    t.sessionId ?? null,
    t.authTime ?? null,
    t.amr ?? null,
    ...lineageValues(t.lineage),
  ];
}

/**
 * The act, ancestor_token_ids, ancestor_pat_ids and ancestor_session_ids columns (all NULL for tokens not
 * exchanged).
 */
function lineageValues(lineage: Lineage | null | undefined): unknown[] {
  if (!lineage) return [null, null, null, null];
  return [
    lineage.act ? JSON.stringify(lineage.act) : null,
    lineage.tokenIds,
    lineage.patIds,
    lineage.sessionIds ?? [],
  ];
}

function toLineage(row: Record<string, unknown>): Lineage | null {
  if (row.act == null && row.ancestor_token_ids == null && row.ancestor_pat_ids == null) return null;
  const act = typeof row.act === "string" ? JSON.parse(row.act) : row.act;
  return {
    ...(act ? { act: act as ActClaim } : {}),
    tokenIds: (row.ancestor_token_ids as string[] | null) ?? [],
    patIds: (row.ancestor_pat_ids as string[] | null) ?? [],
    sessionIds: (row.ancestor_session_ids as string[] | null) ?? [],
  };
}

/** `INSERT INTO table (columns) VALUES (...), (...)` for several rows. */
function insertSql(table: string, columns: readonly string[], rows: number): string {
  const tuples: string[] = [];
  for (let r = 0; r < rows; r++) {
    tuples.push(`(${columns.map((_, c) => `$${r * columns.length + c + 1}`).join(", ")})`);
  }
  return `INSERT INTO ${table} (${columns.join(", ")}) VALUES ${tuples.join(", ")}`;
}

const dateOrNull = (value: unknown) =>
  value === null || value === undefined ? null : new Date(value as Date);

function toAccessToken(row: Record<string, unknown>): StoredAccessToken {
  return {
    instanceId: String(row.instance_id),
    id: String(row.id),
    clientId: String(row.client_id),
    subject: String(row.subject),
    audience: row.audience as string[],
    scope: row.scope as string[],
    jwt: row.jwt === true,
    secretHash: String(row.secret_hash),
    issuer: String(row.issuer),
    issuedAt: new Date(row.issued_at as Date),
    expiresAt: new Date(row.expires_at as Date),
    revokedAt: dateOrNull(row.revoked_at),
    familyId: (row.family_id as string | null) ?? null,
    sessionId: (row.session_id as string | null) ?? null,
    authTime: dateOrNull(row.auth_time),
    amr: (row.amr as string[] | null) ?? null,
    lineage: toLineage(row),
    user: toUserRecord(row),
  };
}

function toRefreshToken(row: Record<string, unknown>): RefreshTokenRecord {
  return {
    instanceId: String(row.instance_id),
    id: String(row.id),
    familyId: String(row.family_id),
    clientId: String(row.client_id),
    subject: String(row.subject),
    audience: row.audience as string[],
    scope: row.scope as string[],
    secretHash: String(row.secret_hash),
    issuer: String(row.issuer),
    issuedAt: new Date(row.issued_at as Date),
    expiresAt: new Date(row.expires_at as Date),
    absoluteExpiresAt: new Date(row.absolute_expires_at as Date),
    rotatedAt: dateOrNull(row.rotated_at),
    revokedAt: dateOrNull(row.revoked_at),
    sessionId: (row.session_id as string | null) ?? null,
    authTime: dateOrNull(row.auth_time),
    amr: (row.amr as string[] | null) ?? null,
    lineage: toLineage(row),
  };
}

function toCode(row: Record<string, unknown>): AuthorizationCodeRecord {
  return {
    instanceId: String(row.instance_id),
    id: String(row.id),
    clientId: String(row.client_id),
    secretHash: String(row.secret_hash),
    redirectUri: String(row.redirect_uri),
    scope: row.scope as string[],
    nonce: (row.nonce as string | null) ?? null,
    codeChallenge: (row.code_challenge as string | null) ?? null,
    codeChallengeMethod: (row.code_challenge_method as string | null) ?? null,
    userId: String(row.user_id),
    sessionId: (row.session_id as string | null) ?? null,
    authTime: new Date(row.auth_time as Date),
    amr: (row.amr as string[] | null) ?? null,
    issuer: String(row.issuer),
    createdAt: new Date(row.created_at as Date),
    expiresAt: new Date(row.expires_at as Date),
    redeemedAt: dateOrNull(row.redeemed_at),
  };
}

/**
 * Tokens and codes in their tables. Writes are committed before the caller answers. The hot paths
 * (issuing an access token, reading one back for introspection, userinfo and API calls) go through
 * batchers: concurrent requests share one statement.
 */
export class TokenStore {
  private readonly listeners: Array<(revocation: Revocation) => void> = [];

  private readonly accessInserts = new Batcher<AccessTokenRecord, void>(async (tokens) => {
    const params: unknown[] = [];
    for (const t of tokens) params.push(...accessValues(t));
    await this.db.query(insertSql("oidc_access_tokens", ACCESS_COLUMNS, tokens.length), params);
    return tokens.map(() => undefined);
  }, 100);

  private readonly accessLookups = new Batcher<
    { instanceId: string; id: string },
    StoredAccessToken | undefined
  >(async (keys) => {
    const rows = await this.db.query(
      `SELECT t.*, ${USER_COLUMNS}
         FROM oidc_access_tokens t
         LEFT JOIN users u ON u.instance_id = t.instance_id AND u.id = t.subject
         LEFT JOIN orgs o ON o.instance_id = u.instance_id AND o.id = u.org_id
         WHERE (t.instance_id, t.id) IN (SELECT * FROM unnest($1::text[], $2::text[]))`,
      [keys.map((k) => k.instanceId), keys.map((k) => k.id)],
    );
    const found = new Map(rows.map((r) => [`${r.instance_id}\u0000${r.id}`, toAccessToken(r)]));
    return keys.map((k) => found.get(`${k.instanceId}\u0000${k.id}`));
  }, 200);

  constructor(
    private readonly db: Database,
    /**
     * Tells the other processes on the same PostgreSQL database about revocations, and this one about
     * theirs (src/eventstore/broadcast.ts); the embedded database's is disabled.
     */
    private readonly broadcast: Broadcast = new Broadcast(),
  ) {
    broadcast.subscribe(REVOKED_TOPIC, (message) => {
      const revocation = revocationOf(message);
      if (revocation) this.revoked(revocation);
      else broadcast.stale();
    });
  }

  /**
   * Called after a revocation committed: this process's, and other processes' as soon as their
   * notification arrives.
   */
  onRevoked(listener: (revocation: Revocation) => void): void {
    this.listeners.push(listener);
  }

  /** Tells the listeners about a revocation once it is committed (those of revokeSessions: its caller). */
  revoked(revocation: Revocation): void {
    for (const listener of this.listeners) listener(revocation);
  }

  /** A committed revocation of this store: this process's listeners, then the other processes'. */
  private announce(revocation: Revocation): void {
    this.revoked(revocation);
    void this.broadcast.publish(REVOKED_TOPIC, revocation);
  }

  /** Stores an access token (batched with concurrent ones; resolved once committed). */
  insertAccessToken(token: AccessTokenRecord, tx?: Queryable): Promise<void> {
    if (tx)
      return tx.query(insertSql("oidc_access_tokens", ACCESS_COLUMNS, 1), accessValues(token)).then(() => {});
    return this.accessInserts.call(token);
  }

  /** An access token of the instance with its user (batched). */
  findAccessToken(instanceId: string, id: string): Promise<StoredAccessToken | undefined> {
    return this.accessLookups.call({ instanceId, id });
  }

  /** Revokes one access token (no-op when it is unknown or revoked already). */
  async revokeAccessToken(instanceId: string, id: string): Promise<void> {
    await this.db.query(
      "UPDATE oidc_access_tokens SET revoked_at = now() WHERE instance_id = $1 AND id = $2 AND revoked_at IS NULL",
      [instanceId, id],
    );
    this.announce({ instanceId, tokenId: id });
  }

  /** Revokes every refresh and access token of a family (a code's or a refresh chain's descendants). */
  async revokeFamily(instanceId: string, familyId: string): Promise<void> {
    await this.db.transaction(async (tx) => {
      await tx.query(
        "UPDATE oidc_refresh_tokens SET revoked_at = now() WHERE instance_id = $1 AND family_id = $2 AND revoked_at IS NULL",
        [instanceId, familyId],
      );
      await tx.query(
        "UPDATE oidc_access_tokens SET revoked_at = now() WHERE instance_id = $1 AND family_id = $2 AND revoked_at IS NULL",
        [instanceId, familyId],
      );
    });
    this.announce({ instanceId, familyId });
  }

  /**
   * Revokes every access and refresh token issued from these browser sessions and voids their codes not yet
   * redeemed (expired now: redeeming one is invalid_grant), in `tx`: the transaction of the events that end
   * the sessions (./session-tokens.ts), which announces it with `revoked` once committed.
   */
  async revokeSessions(tx: Queryable, instanceId: string, sessionIds: string[]): Promise<void> {
    if (sessionIds.length === 0) return;
    const params = [instanceId, sessionIds];
    const revoke = (table: string) =>
      tx.query(
        `UPDATE ${table} SET revoked_at = now()
         WHERE instance_id = $1 AND session_id = ANY($2::text[]) AND revoked_at IS NULL`,
        params,
      );
    // The order matters on PostgreSQL, where a code redemption or a refresh may run concurrently: an UPDATE
    // that meets a row locked by one waits for it to commit, and the statements after it see what it issued;
    // one that comes second finds the code void or the token revoked (redeemCode or markRedeemed, markRotated) and fails.
    // Refresh tokens are revoked twice: the first pass may wait for a rotation whose new token only the
    // statements after it see.
    await tx.query(
      `UPDATE oidc_authorization_codes SET expires_at = now()
       WHERE instance_id = $1 AND session_id = ANY($2::text[]) AND redeemed_at IS NULL AND expires_at > now()`,
      params,
    );
    await revoke("oidc_refresh_tokens");
    await revoke("oidc_access_tokens");
    await revoke("oidc_refresh_tokens");
  }

  async insertRefreshToken(token: RefreshTokenRecord, tx: Queryable = this.db): Promise<void> {
    await tx.query(insertSql("oidc_refresh_tokens", REFRESH_COLUMNS, 1), refreshValues(token));
  }

  async findRefreshToken(instanceId: string, id: string): Promise<RefreshTokenRecord | undefined> {
    const rows = await this.db.query("SELECT * FROM oidc_refresh_tokens WHERE instance_id = $1 AND id = $2", [
      instanceId,
      id,
    ]);
    return rows[0] ? toRefreshToken(rows[0]) : undefined;
  }

  /**
   * Marks a refresh token used; false when it was rotated (a concurrent use won) or revoked already (also
   * meanwhile, by the end of its session).
   */
  async markRotated(tx: Queryable, instanceId: string, id: string): Promise<boolean> {
    const rows = await tx.query(
      `UPDATE oidc_refresh_tokens SET rotated_at = now()
       WHERE instance_id = $1 AND id = $2 AND rotated_at IS NULL AND revoked_at IS NULL RETURNING id`,
      [instanceId, id],
    );
    return rows.length === 1;
  }

  async insertCode(code: AuthorizationCodeRecord): Promise<void> {
    await this.db.query(insertSql("oidc_authorization_codes", CODE_COLUMNS, 1), [
      code.instanceId,
      code.id,
      code.clientId,
      code.secretHash,
      code.redirectUri,
      code.scope,
      code.nonce ?? null,
      code.codeChallenge ?? null,
      code.codeChallengeMethod ?? null,
      code.userId,
      code.sessionId ?? null,
      code.authTime,
      code.amr ?? null,
      code.issuer,
      code.createdAt,
      code.expiresAt,
    ]);
  }

  async findCode(instanceId: string, id: string): Promise<AuthorizationCodeRecord | undefined> {
    const rows = await this.db.query(
      "SELECT * FROM oidc_authorization_codes WHERE instance_id = $1 AND id = $2",
      [instanceId, id],
    );
    return rows[0] ? toCode(rows[0]) : undefined;
  }

  /**
   * The code and, in the same statement, its user as `loadUser` reads it (`user` undefined when the user no
   * longer exists): the token request's one read.
   */
  async findCodeWithUser(
    instanceId: string,
    id: string,
  ): Promise<{ code: AuthorizationCodeRecord; user: UserRecord | undefined } | undefined> {
    const rows = await this.db.query(
      `SELECT c.*, ${USER_COLUMNS} FROM oidc_authorization_codes c
       LEFT JOIN users u ON u.instance_id = c.instance_id AND u.id = c.user_id
       LEFT JOIN orgs o ON o.instance_id = u.instance_id AND o.id = u.org_id
       WHERE c.instance_id = $1 AND c.id = $2`,
      [instanceId, id],
    );
    return rows[0] ? { code: toCode(rows[0]), user: toUserRecord(rows[0]) } : undefined;
  }

  /**
   * Marks a code redeemed; false when it was redeemed before (a second redemption) or has expired meanwhile
   * (voided by the end of its session: the clock of the moment the row is checked, after waiting for the
   * transaction that voided it, not of this transaction's start).
   */
  async markRedeemed(tx: Queryable, instanceId: string, id: string): Promise<boolean> {
    const rows = await tx.query(
      `UPDATE oidc_authorization_codes SET redeemed_at = now()
       WHERE instance_id = $1 AND id = $2 AND redeemed_at IS NULL AND expires_at > clock_timestamp()
       RETURNING id`,
      [instanceId, id],
    );
    return rows.length === 1;
  }

  /**
   * Redeems a code and stores the tokens issued from it, in one statement (the UPDATE and the INSERTs of
   * one snapshot, atomic as a transaction; the INSERTs take their rows from the UPDATE's): false when the
   * code was redeemed before or has expired meanwhile (as `markRedeemed`), and then nothing is stored.
   */
  async redeemCode(
    instanceId: string,
    id: string,
    access: AccessTokenRecord,
    refresh?: RefreshTokenRecord,
  ): Promise<boolean> {
    const values: unknown[] = [instanceId, id];
    const insert = (table: string, columns: readonly string[], row: unknown[]) => {
      const from = values.length;
      values.push(...row);
      const params = columns.map((_, i) => `$${from + i + 1}`).join(", ");
      return `INSERT INTO ${table} (${columns.join(", ")}) SELECT ${params} FROM redeemed RETURNING 1`;
    };
    const inserts = [`access AS (${insert("oidc_access_tokens", ACCESS_COLUMNS, accessValues(access))})`];
    if (refresh)
      inserts.push(`refresh AS (${insert("oidc_refresh_tokens", REFRESH_COLUMNS, refreshValues(refresh))})`);
    const rows = await this.db.query<{ redeemed: number }>(
      `WITH redeemed AS (
         UPDATE oidc_authorization_codes SET redeemed_at = now()
         WHERE instance_id = $1 AND id = $2 AND redeemed_at IS NULL AND expires_at > clock_timestamp()
         RETURNING id),
       ${inserts.join(",\n")}
       SELECT count(*)::int AS redeemed FROM redeemed`,
      values,
    );
    return rows[0]?.redeemed === 1;
  }

  /**
   * True while what an exchanged token descends from still holds: none of its ancestor access tokens is
   * revoked, none of its ancestor personal access tokens removed or expired, none of its ancestor browser
   * sessions ended, every actor of its `act` chain is an active user. One statement; only exchanged tokens
   * pay for it.
   */
  async lineageActive(instanceId: string, lineage: Lineage): Promise<boolean> {
    const tokenIds = [...new Set(lineage.tokenIds)];
    const patIds = [...new Set(lineage.patIds)];
    const sessionIds = [...new Set(lineage.sessionIds ?? [])];
    const actors = [...new Set(actorsOf(lineage.act))];
    if (tokenIds.length + patIds.length + sessionIds.length + actors.length === 0) return true;
    const [row] = await this.db.query<{ tokens: number; pats: number; sessions: number; actors: number }>(
      `SELECT
         (SELECT count(*)::int FROM oidc_access_tokens
           WHERE instance_id = $1 AND id = ANY($2::text[]) AND revoked_at IS NULL) AS tokens,
         (SELECT count(*)::int FROM personal_access_tokens
           WHERE instance_id = $1 AND id = ANY($3::text[]) AND (expires_at IS NULL OR expires_at > now())) AS pats,
         (SELECT count(*)::int FROM sessions WHERE instance_id = $1 AND id = ANY($6::text[])) AS sessions,
         (SELECT count(*)::int FROM users
           WHERE instance_id = $1 AND id = ANY($4::text[]) AND state = $5) AS actors`,
      [instanceId, tokenIds, patIds, actors, UserState.active, sessionIds],
    );
    return (
      row.tokens === tokenIds.length &&
      row.pats === patIds.length &&
      row.sessions === sessionIds.length &&
      row.actors === actors.length
    );
  }

  /**
   * The user of each of these browser sessions that still exists (a session that ended, by end_session, the
   * login UI's sign-out, DELETE /sessions/{id} or its user's removal, has no row any more).
   */
  async liveSessions(instanceId: string, sessionIds: string[]): Promise<Map<string, string>> {
    if (sessionIds.length === 0) return new Map();
    const rows = await this.db.query<{ id: string; user_id: string }>(
      "SELECT id, user_id FROM sessions WHERE instance_id = $1 AND id = ANY($2::text[])",
      [instanceId, [...new Set(sessionIds)]],
    );
    return new Map(rows.map((r) => [r.id, r.user_id]));
  }

  /** Records a client assertion's jti; false when it was used before (replay). */
  async useAssertion(instanceId: string, clientId: string, jti: string, expiresAt: Date): Promise<boolean> {
    const rows = await this.db.query(
      `INSERT INTO oidc_used_assertions (instance_id, client_id, jti, expires_at) VALUES ($1, $2, $3, $4)
       ON CONFLICT DO NOTHING RETURNING jti`,
      [instanceId, clientId, jti, expiresAt],
    );
    return rows.length === 1;
  }

  /** Deletes what expired more than a day ago (revoked and rotated rows go with their expiry). */
  async sweep(): Promise<void> {
    const cutoff = "now() - interval '1 day'";
    await this.db.query(`DELETE FROM oidc_access_tokens WHERE expires_at < ${cutoff}`);
    await this.db.query(`DELETE FROM oidc_refresh_tokens WHERE absolute_expires_at < ${cutoff}`);
    await this.db.query(`DELETE FROM oidc_authorization_codes WHERE expires_at < ${cutoff}`);
    await this.db.query("DELETE FROM oidc_used_assertions WHERE expires_at < now()");
    // Signing keys whose publication ended: their private keys go at once; their read-model rows too, except
    // each instance's newest one, whose configuration the next key continues with after a long stop.
    await this.db.query(
      `DELETE FROM oidc_signing_key_secrets s USING oidc_signing_keys k
       WHERE k.instance_id = s.instance_id AND k.id = s.id AND k.publish_until < now()`,
    );
    await this.db.query(
      `DELETE FROM oidc_signing_keys k WHERE k.publish_until < now() AND EXISTS (
         SELECT 1 FROM oidc_signing_keys n WHERE n.instance_id = k.instance_id AND n.active_from > k.active_from)`,
    );
  }
}
