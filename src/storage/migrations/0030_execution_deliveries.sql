-- The execution engine (src/execution, docs/actions.md "Calling targets").

-- Signing-key rotation: the key a target had before its last rotation stays valid (and is sent as a
-- second `v1`) until `previous_valid_until`.
ALTER TABLE action_target_signing_keys ADD COLUMN previous_signing_key text;
ALTER TABLE action_target_signing_keys ADD COLUMN previous_valid_until timestamptz;

-- The durable outbox of event conditions: one row per event and target, written in the transaction that
-- appends the event (src/execution/outbox.ts), sent and retried by the delivery worker of any process
-- (src/execution/worker.ts), kept as the delivery log (SearchExecutionDeliveries).
CREATE TABLE execution_deliveries (
  instance_id     text        NOT NULL,
  id              text        NOT NULL,
  event_position  bigint      NOT NULL, -- events.position of the event sent
  event_type      text        NOT NULL,
  aggregate_type  text        NOT NULL,
  aggregate_id    text        NOT NULL,
  execution_id    text        NOT NULL, -- the execution that applied (the most specific one)
  target_id       text        NOT NULL,
  status          smallint    NOT NULL, -- 1 pending, 2 delivered, 3 failed (attempts used up, or not sendable)
  attempts        integer     NOT NULL DEFAULT 0, -- counted when a worker takes the row
  -- Pending: when the row may be taken next. While a worker sends it, the end of its lease (the target's
  -- timeout and a margin): a process that dies while sending leaves a row that is due again after it.
  next_attempt_at timestamptz NOT NULL,
  leased_by       text,                 -- random ID of the process sending it now
  last_error      text,                 -- of the last failed attempt, kept once delivered (an excerpt of an answer at most)
  last_status     integer,              -- HTTP status of the last answer, if one came
  created_at      timestamptz NOT NULL,
  changed_at      timestamptz NOT NULL,
  delivered_at    timestamptz,
  PRIMARY KEY (instance_id, id)
);
-- The workers' queue: only pending rows, by due time.
CREATE INDEX execution_deliveries_due_idx ON execution_deliveries (next_attempt_at) WHERE status = 1;
CREATE INDEX execution_deliveries_created_idx ON execution_deliveries (instance_id, created_at);
CREATE INDEX execution_deliveries_target_idx ON execution_deliveries (instance_id, target_id, created_at);
-- Retention: finished rows are deleted after a while, oldest first.
CREATE INDEX execution_deliveries_finished_idx ON execution_deliveries (changed_at) WHERE status <> 1;
