/**
 * The `notification_messages` table (migration 0120): the notification outbox and its record, one of the
 * durable outboxes of ../outbox (the life of a row: ../outbox/table.ts).
 *
 * Written `pending` by `queueMessage` in the transaction of the event that caused it (a command, or an
 * append hook), so the message exists exactly when its event does; claimed with what rendering needs;
 * then `sent`, `pending` again after a back-off, or `failed` (attempts used up, a permanent refusal, no
 * active provider). The one-time code is sealed with the master key and erased once the row is finished.
 * Finished rows are deleted after RETENTION_DAYS.
 */
import { seal } from "../crypto/masterkey.ts";
import { newId } from "../id.ts";
import { claimRows, notifyWorkers, type OutboxTable, RowState } from "../outbox/table.ts";
import type { Queryable } from "../storage/database.ts";
import { MESSAGES, type MessageType } from "./messages/index.ts";

export const MessageState = {
  pending: RowState.pending,
  sent: RowState.done,
  failed: RowState.failed,
} as const;
export type MessageState = (typeof MessageState)[keyof typeof MessageState];
export const ChannelCode = { EMAIL: 1, SMS: 2 } as const;

/** The channel of the notification that new messages were committed (PostgreSQL). */
export const MESSAGE_CHANNEL = "platform_notification_messages";
/** Sent and failed rows are kept this long (the record), then deleted. */
export const RETENTION_DAYS = 30;

export const MESSAGES_TABLE: OutboxTable = {
  name: "notification_messages",
  stateColumn: "state",
  doneAtColumn: "sent_at",
  retentionDays: RETENTION_DAYS,
  clearedWhenFinished: ["sealed_code"],
};

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
  /**
   * The organization whose branding, texts and language settings the message takes instead of its
   * recipient's: a sign-in's under its project's ENFORCE setting (docs/branding.md "Projects: whose
   * branding a sign-in shows"). Undefined: the recipient's organization's.
   */
  brandingOrgId?: string;
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
       sealed_code, code_expires_in, branding_org_id, state, attempts, next_attempt_at, created_at, changed_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, ${MessageState.pending}, 0, now(), now(), now())`,
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
      message.brandingOrgId ?? null,
    ],
  );
  if (notify) await notifyWorkers(tx, MESSAGE_CHANNEL);
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
  /**
   * The organization whose branding, texts and language settings the message takes: the row's
   * `branding_org_id`, else the recipient's organization (null when the user was removed).
   */
  label_org_id: string | null;
  [key: string]: unknown;
}

/**
 * Takes up to `limit` due rows for process `processId` (../outbox/table.ts `claimRows`), leasing each for
 * `leaseSeconds`, with what rendering needs from the read models as they are now.
 */
export function claimMessages(
  db: Queryable,
  limit: number,
  processId: string,
  leaseSeconds: number,
): Promise<ClaimedMessage[]> {
  return claimRows<ClaimedMessage>(
    db,
    MESSAGES_TABLE,
    {
      lease: "$3::double precision",
      leaseSeconds,
      returning: `r.user_id, r.type, r.channel, r.recipient, r.language, r.origin, r.sealed_code,
                  r.code_expires_in, r.created_at, r.branding_org_id`,
      select: `SELECT c.*, u.org_id, u.username, u.given_name, u.family_name, u.display_name, o.name AS org_name,
                 i.name AS instance_name, coalesce(c.branding_org_id, u.org_id) AS label_org_id
               FROM claimed c
               LEFT JOIN users u ON u.instance_id = c.instance_id AND u.id = c.user_id
               LEFT JOIN orgs o ON o.instance_id = u.instance_id AND o.id = u.org_id
               LEFT JOIN instances i ON i.id = c.instance_id`,
    },
    limit,
    processId,
  );
}
