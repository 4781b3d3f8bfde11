-- The notification outbox and its record (docs/notifications.md "Delivery"): one row per message, written in
-- the transaction of the event that caused it (src/notifications/outbox.ts), sent and retried by the worker
-- of any process (src/notifications/worker.ts), kept as the record SearchNotifications answers.
CREATE TABLE notification_messages (
  instance_id     text        NOT NULL,
  id              text        NOT NULL,
  user_id         text        NOT NULL,
  type            text        NOT NULL, -- MessageType: INIT, VERIFY_EMAIL, … (src/notifications/messages/types.ts)
  channel         smallint    NOT NULL, -- 1 e-mail, 2 SMS
  recipient       text        NOT NULL, -- e-mail address or phone number, as at the event
  language        text,                 -- the recipient's preferred language at the event (null: the default)
  origin          text        NOT NULL, -- the instance's external origin the links lead to
  -- The one-time code sealed with the master key (AES-256-GCM, bound to the instance and the row), set to
  -- null once the message is sent or failed for good: codes are never in events, logs or clear text.
  sealed_code     text,
  code_expires_in integer,              -- seconds the code is valid (the `Expiry` placeholder)
  state           smallint    NOT NULL, -- 1 pending, 2 sent, 3 failed
  attempts        integer     NOT NULL DEFAULT 0, -- counted when a worker takes the row
  -- Pending: when the row may be taken next. While a worker sends it, the end of its lease: a process that
  -- dies while sending leaves a row that is due again after it.
  next_attempt_at timestamptz NOT NULL,
  leased_by       text,                 -- random ID of the process sending it now
  last_error      text,
  created_at      timestamptz NOT NULL,
  changed_at      timestamptz NOT NULL,
  sent_at         timestamptz,
  PRIMARY KEY (instance_id, id)
);
-- The workers' queue: only pending rows, by due time.
CREATE INDEX notification_messages_due_idx ON notification_messages (next_attempt_at) WHERE state = 1;
-- Searches in creation order, of the instance or of one user.
CREATE INDEX notification_messages_created_idx ON notification_messages (instance_id, created_at, id);
CREATE INDEX notification_messages_user_idx ON notification_messages (instance_id, user_id, created_at);
-- Retention: finished rows are deleted after a while, oldest first.
CREATE INDEX notification_messages_finished_idx ON notification_messages (changed_at) WHERE state <> 1;
