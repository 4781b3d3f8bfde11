/**
 * Where the login UI's rate limits count (a `store` of @fastify/rate-limit). On PostgreSQL the counters are
 * rows of `login_rate_limits`, shared by every process on the database, so that n processes behind a load
 * balancer allow what one does: one statement per limited request (an upsert that counts and answers).
 * The embedded database serves one process: there the counters stay in that process's memory
 * (@fastify/rate-limit's own store), which costs no write and no fsync.
 *
 * A window is fixed, as in the memory store: it starts with its first attempt, lasts `timeWindow` and counts
 * every attempt in it; the next attempt after it starts a new one. Keys are stored as SHA-256, so the table
 * names neither addresses nor login names.
 */
import type { FastifyRateLimitStore, FastifyRateLimitStoreCtor } from "@fastify/rate-limit";
import { sha256 } from "../crypto/tokens.ts";
import type { Queryable } from "../storage/database.ts";

/** Ended windows are deleted this often per process, at most this many rows at a time (index on the end). */
const PURGE_EVERY_MS = 60_000;
const PURGE_LIMIT = 1_000;

const HIT_SQL = `
  INSERT INTO login_rate_limits AS l (key, hits, window_ends_at)
  VALUES ($1, 1, now() + $2 * interval '1 millisecond')
  ON CONFLICT (key) DO UPDATE SET
    hits = CASE WHEN l.window_ends_at <= now() THEN 1 ELSE l.hits + 1 END,
    window_ends_at = CASE WHEN l.window_ends_at <= now() THEN EXCLUDED.window_ends_at ELSE l.window_ends_at END
  RETURNING hits, greatest(0, ceil(extract(epoch FROM l.window_ends_at - now()) * 1000))::integer AS ttl_ms`;

const PURGE_SQL = `
  DELETE FROM login_rate_limits WHERE key IN (
    SELECT key FROM login_rate_limits WHERE window_ends_at < now() LIMIT ${PURGE_LIMIT})`;

/** Counts one attempt of `key` in its window: the attempts so far and the milliseconds the window has left. */
export async function countAttempt(
  db: Queryable,
  key: string,
  windowMs: number,
): Promise<{ current: number; ttl: number }> {
  const rows = await db.query<{ hits: number; ttl_ms: number }>(HIT_SQL, [
    sha256(`login rate limit\u0000${key}`),
    windowMs,
  ]);
  return { current: Number(rows[0].hits), ttl: Number(rows[0].ttl_ms) };
}

/** The store of @fastify/rate-limit counting in `db` (PostgreSQL). */
export function sharedRateLimitStore(db: Queryable, log: { warn(o: object, m: string): void }) {
  let nextPurge = Date.now() + PURGE_EVERY_MS;
  const purge = () => {
    if (Date.now() < nextPurge) return;
    nextPurge = Date.now() + PURGE_EVERY_MS;
    db.query(PURGE_SQL).catch((error) => log.warn({ err: error }, "login rate limits: purge failed"));
  };
  const store: FastifyRateLimitStore = {
    incr(key, callback, timeWindow) {
      countAttempt(db, key, timeWindow).then(
        (result) => {
          purge();
          callback(null, result);
        },
        (error: Error) => callback(error),
      );
    },
    // every limiter shares the table: their keys differ (a client address, `name:` and a login name)
    child: () => store,
  };
  return function SharedRateLimitStore() {
    return store;
  } as unknown as FastifyRateLimitStoreCtor;
}
