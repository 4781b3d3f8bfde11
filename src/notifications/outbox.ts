/**
 * The `notification_messages` table (migration 0120): the notification outbox and its record.
 *
 * Life of a row: written `pending` by `queueMessage` in the transaction of the event that caused it (a
 * command, or an append hook), so the message exists exactly when its event does; taken by one worker at a
 * time (`claimMessages`: `FOR UPDATE SKIP LOCKED`, counting the attempt and leasing the row until the send
 * timeout plus a margin, in one statement, so no transaction stays open while the provider is called);
 * then `sent`, `pending` again after a back-off, or `failed` (attempts used up, a permanent refusal, no
 * active provider). A worker that dies while sending leaves its lease to run out: the row is due again.
 * The one-time code is sealed with the master key and erased once the row is finished. Finished rows are
 * deleted after RETENTION_DAYS.
 */
import { seal } from "../crypto/masterkey.ts";
import { newId } from "../id.ts";
import type { Queryable } from "../storage/database.ts";
import { MESSAGES, type MessageType } from "./messages/index.ts";

export const MessageState = { pending: 1, sent: 2, failed: 3 } as const;
export type MessageState = (typeof MessageState)[keyof typeof MessageState];
export const ChannelCode = { EMAIL: 1, SMS: 2 } as const;

/** The channel of the notification that new messages were committed (PostgreSQL). */
export const MESSAGE_CHANNEL = "platform_notification_messages";
/** Seconds a lease lasts beyond the send timeout. */
export const LEASE_MARGIN_SECONDS = 10;
/** Sent and failed rows are kept this long (the record), then deleted. */
export const RETENTION_DAYS = 30;
/** Longest delay between two attempts. */
export const MAX_RETRY_DELAY_MS = 60 * 60 * 1000;

/** What a worker needs to render and send the message later. */
export interface NewMessage {
  instanceId: string;
  userId: string;
  type: MessageType;
  /** The e-mail address or phone number. */
  recipient: string;
  /** The recipient's preferred language (undefined: the default). */
  language?: string;
  /** The instance's external origin the message's links lead to. */
  origin: string;
  /** The one-time code of a code-bearing type, in clear: sealed before it is written. */
  code?: { value: string; expiresIn: number };
}

/** The master key's context of a message's code: a sealed code copied to another row does not open. */
export const codeContext = (instanceId: string, id: string) => `notification_message:${instanceId}:${id}`;

/**
 * Writes a message to the outbox in the transaction `tx` of its event; returns its ID. With `notify` (on
 * PostgreSQL) a `pg_notify` in the same transaction wakes the workers of every process when it commits.
 */
export async function queueMessage(
  tx: Queryable,
  masterKey: Buffer,
  message: NewMessage,
  notify: boolean,
): Promise<string> {
  const spec = MESSAGES[message.type];
  if (spec.code !== (message.code !== undefined))
    throw new Error(`message ${message.type} ${spec.code ? "needs" : "takes no"} code`);
  const id = newId();
  await tx.query(
    `INSERT INTO notification_messages (instance_id, id, user_id, type, channel, recipient, language, origin,
       sealed_code, code_expires_in, state, attempts, next_attempt_at, created_at, changed_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, ${MessageState.pending}, 0, now(), now(), now())`,
    [
      message.instanceId,
      id,
      message.userId,
      message.type,
      ChannelCode[spec.channel],
      message.recipient,
      message.language ?? null,
      message.origin,
      message.code ? seal(masterKey, message.code.value, codeContext(message.instanceId, id)) : null,
      message.code?.expiresIn ?? null,
    ],
  );
  if (notify) await tx.query("SELECT pg_notify($1, '')", [MESSAGE_CHANNEL]);
  return id;
}

/** A row a worker took, with what rendering needs from the read models as they are now. */
export interface ClaimedMessage {
  instance_id: string;
  id: string;
  attempts: number;
  user_id: string;
  type: MessageType;
  channel: number;
  recipient: string;
  language: string | null;
  origin: string;
  sealed_code: string | null;
  code_expires_in: number | null;
  created_at: Date;
  /** null when the user was removed since. */
  username: string | null;
  org_id: string | null;
  given_name: string | null;
  family_name: string | null;
  display_name: string | null;
  org_name: string | null;
  instance_name: string | null;
  [key: string]: unknown;
}

/**
 * Takes up to `limit` due rows for process `processId`: counts the attempt and leases each row for
 * `leaseSeconds`. One statement: rows another worker takes at the same moment are skipped (`SKIP LOCKED`).
 */
export async function claimMessages(
  db: Queryable,
  limit: number,
  processId: string,
  leaseSeconds: number,
): Promise<ClaimedMessage[]> {
  return db.query<ClaimedMessage>(
    `WITH due AS (
       SELECT m.instance_id, m.id FROM notification_messages m
       WHERE m.state = ${MessageState.pending} AND m.next_attempt_at <= now()
       ORDER BY m.next_attempt_at LIMIT $1
       FOR UPDATE SKIP LOCKED
     ), claimed AS (
       UPDATE notification_messages m
       SET attempts = m.attempts + 1, leased_by = $2, changed_at = now(),
           next_attempt_at = now() + make_interval(secs => $3::double precision)
       FROM due WHERE m.instance_id = due.instance_id AND m.id = due.id
       RETURNING m.instance_id, m.id, m.attempts, m.user_id, m.type, m.channel, m.recipient, m.language,
                 m.origin, m.sealed_code, m.code_expires_in, m.created_at
     )
     SELECT c.*, u.org_id, u.username, u.given_name, u.family_name, u.display_name, o.name AS org_name,
            i.name AS instance_name
     FROM claimed c
     LEFT JOIN users u ON u.instance_id = c.instance_id AND u.id = c.user_id
     LEFT JOIN orgs o ON o.instance_id = u.instance_id AND o.id = u.org_id
     LEFT JOIN instances i ON i.id = c.instance_id`,
    [limit, processId, leaseSeconds],
  );
}

/** When the next pending row is due (undefined: none pending). */
export async function nextDue(db: Queryable): Promise<Date | undefined> {
  const rows = await db.query<{ at: Date | null }>(
    `SELECT min(next_attempt_at) AS at FROM notification_messages WHERE state = ${MessageState.pending}`,
  );
  const at = rows[0]?.at;
  return at ? new Date(at) : undefined;
}

export type Outcome =
  | { state: typeof MessageState.sent }
  | { state: typeof MessageState.pending; error: string; retryInMs: number }
  | { state: typeof MessageState.failed; error: string };

/**
 * The outcomes of attempts, in one statement, each recorded only while its row is still this process's
 * lease. A finished row (sent or failed) loses its sealed code.
 */
export async function recordOutcomes(
  db: Queryable,
  outcomes: { row: Pick<ClaimedMessage, "instance_id" | "id" | "attempts">; outcome: Outcome }[],
  processId: string,
): Promise<void> {
  if (outcomes.length === 0) return;
  await db.query(
    `UPDATE notification_messages m
     SET state = o.state, last_error = coalesce(o.error, m.last_error), leased_by = NULL, changed_at = now(),
         sent_at = CASE WHEN o.state = ${MessageState.sent} THEN now() END,
         sealed_code = CASE WHEN o.state = ${MessageState.pending} THEN m.sealed_code END,
         next_attempt_at = now() + make_interval(secs => o.retry_ms / 1000)
     FROM unnest($1::text[], $2::text[], $3::int[], $4::smallint[], $5::text[], $6::double precision[])
       AS o(instance_id, id, attempts, state, error, retry_ms)
     WHERE m.instance_id = o.instance_id AND m.id = o.id AND m.attempts = o.attempts AND m.leased_by = $7`,
    [
      outcomes.map((o) => o.row.instance_id),
      outcomes.map((o) => o.row.id),
      outcomes.map((o) => o.row.attempts),
      outcomes.map((o) => o.outcome.state),
      outcomes.map((o) => (o.outcome.state === MessageState.sent ? null : o.outcome.error.slice(0, 1000))),
      outcomes.map((o) => (o.outcome.state === MessageState.pending ? o.outcome.retryInMs : 0)),
      processId,
    ],
  );
}

/** Gives a lease back untried (the process is stopping): due at once, the attempt not counted. */
export async function releaseMessage(
  db: Queryable,
  row: Pick<ClaimedMessage, "instance_id" | "id" | "attempts">,
  processId: string,
): Promise<void> {
  await db.query(
    `UPDATE notification_messages SET attempts = attempts - 1, leased_by = NULL, next_attempt_at = now()
     WHERE instance_id = $1 AND id = $2 AND leased_by = $3 AND attempts = $4`,
    [row.instance_id, row.id, processId, row.attempts],
  );
}

/** Deletes up to 1000 finished rows older than RETENTION_DAYS; returns how many. */
export async function purgeMessages(db: Queryable): Promise<number> {
  const rows = await db.query(
    `DELETE FROM notification_messages WHERE (instance_id, id) IN (
       SELECT instance_id, id FROM notification_messages
       WHERE state <> ${MessageState.pending} AND changed_at < now() - make_interval(days => ${RETENTION_DAYS})
       ORDER BY changed_at LIMIT 1000)
     RETURNING id`,
  );
  return rows.length;
}

/**
 * The delay before attempt `attempts + 1` after `attempts` failed ones: `baseMs · 2^(attempts-1)`, at most
 * MAX_RETRY_DELAY_MS, with "equal jitter" (half fixed, half random), so that messages failing together (a
 * provider down) do not all come back at the same moment.
 */
export function retryDelayMs(attempts: number, baseMs: number, random = Math.random()): number {
  const delay = Math.min(MAX_RETRY_DELAY_MS, baseMs * 2 ** Math.max(0, attempts - 1));
  return Math.round(delay / 2 + (random * delay) / 2);
}
