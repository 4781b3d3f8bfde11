/**
 * The bound on one-time codes sent by e-mail and SMS (docs/factors.md "How many codes are sent"): per
 * channel, at most OTP_SENDS_PER_WINDOW codes in any OTP_SEND_WINDOW_SECONDS, and at least
 * OTP_SEND_INTERVAL_SECONDS between two — for a user, and for a recipient (an address or number may be
 * shared by several users of the instance). Beyond it the challenge is RESOURCE_EXHAUSTED (429) with the
 * seconds until a code may be sent again, and nothing is queued.
 *
 * The sends are counted from the notification outbox (`notification_messages`, written in the challenge's
 * transaction), so every process on one database counts the same; the check and the new row are
 * serialized per user and per recipient by transaction-scoped advisory locks, so concurrent requests
 * cannot both take the last send.
 */
import { ResourceExhaustedError } from "../../../errors.ts";
import type { Queryable } from "../../../storage/database.ts";

export const OTP_SENDS_PER_WINDOW = 5;
export const OTP_SEND_WINDOW_SECONDS = 600;
export const OTP_SEND_INTERVAL_SECONDS = 30;

/** The message of a send that would cross the bound (its seconds go in `retryAfterSeconds`). */
const TOO_MANY =
  `at most ${OTP_SENDS_PER_WINDOW} codes per ${OTP_SEND_WINDOW_SECONDS / 60} minutes and one per ` +
  `${OTP_SEND_INTERVAL_SECONDS} seconds for a user and a recipient: try again later`;

/** Seconds until one more message of `type` may go to the rows' key (0: now), from its recent sends. */
async function secondsUntilFree(
  tx: Queryable,
  instanceId: string,
  type: string,
  key: { column: "user_id" | "recipient"; value: string },
): Promise<number> {
  const rows = await tx.query<{ wait: number | string }>(
    `SELECT greatest(0, ceil(extract(epoch FROM created_at + $4 * interval '1 second' - now()))) AS wait
     FROM (SELECT created_at, row_number() OVER (ORDER BY created_at DESC) AS n FROM notification_messages
           WHERE instance_id = $1 AND ${key.column} = $2 AND type = $3
             AND created_at > now() - $4 * interval '1 second'
           ORDER BY created_at DESC LIMIT $5) recent
     WHERE n = $5
     UNION ALL
     SELECT greatest(0, ceil(extract(epoch FROM max(created_at) + $6 * interval '1 second' - now())))
     FROM notification_messages
     WHERE instance_id = $1 AND ${key.column} = $2 AND type = $3
       AND created_at > now() - $6 * interval '1 second'`,
    [instanceId, key.value, type, OTP_SEND_WINDOW_SECONDS, OTP_SENDS_PER_WINDOW, OTP_SEND_INTERVAL_SECONDS],
  );
  return Math.max(0, ...rows.map((r) => Number(r.wait ?? 0)));
}

/**
 * Throws RESOURCE_EXHAUSTED (with `retryAfterSeconds`) when one more message of `type` to `recipient` for
 * `userId` would cross the bound; otherwise holds the locks until the transaction ends, so the message the
 * caller queues next in it is counted before anyone else decides.
 */
export async function boundOtpSends(
  tx: Queryable,
  send: { instanceId: string; userId: string; type: string; recipient: string },
): Promise<void> {
  // users first, then recipients: the same order everywhere, so two sends never wait on each other in a cycle
  for (const key of [`user:${send.userId}`, `recipient:${send.recipient}`])
    await tx.query("SELECT pg_advisory_xact_lock(hashtext($1))", [
      `otp_sends:${send.instanceId}:${send.type}:${key}`,
    ]);
  const wait = Math.max(
    await secondsUntilFree(tx, send.instanceId, send.type, { column: "user_id", value: send.userId }),
    await secondsUntilFree(tx, send.instanceId, send.type, { column: "recipient", value: send.recipient }),
  );
  if (wait > 0) throw new ResourceExhaustedError(TOO_MANY, wait);
}
