-- Actions (docs/actions.md): read models of the `target` and `execution`
-- aggregates, maintained inline by src/query/projections/actions.ts, and the targets' signing keys.

CREATE TABLE action_targets (
  instance_id        text        NOT NULL,
  id                 text        NOT NULL,
  name               text        NOT NULL, -- unique per instance (unique_constraints `target_name`)
  target_type        smallint    NOT NULL, -- 1 rest_webhook, 2 rest_request_response
  url                text        NOT NULL,
  timeout_ns         bigint      NOT NULL,
  execution_choice   smallint    NOT NULL, -- member of execution_type that was set: 1 is_async, 2 interrupt_on_error
  is_async           boolean     NOT NULL,
  interrupt_on_error boolean     NOT NULL,
  created_at         timestamptz NOT NULL,
  changed_at         timestamptz NOT NULL,
  sequence           bigint      NOT NULL,
  PRIMARY KEY (instance_id, id)
);
CREATE INDEX action_targets_created_idx ON action_targets (instance_id, created_at);
CREATE INDEX action_targets_name_idx ON action_targets (instance_id, name);

-- Not a projection (the keys are not in the events): written by the target commands in the transaction
-- of their events, left alone by projection rebuilds.
CREATE TABLE action_target_signing_keys (
  instance_id text NOT NULL,
  target_id   text NOT NULL,
  signing_key text NOT NULL,
  PRIMARY KEY (instance_id, target_id)
);

-- One row per condition; `id` is the execution ID (docs/actions.md: `request./pkg.Service/Method`,
-- `request.pkg.Service`, `request`, `event.user.human.*`, `function.preuserinfo`, ...). The caller of
-- targets finds the most specific execution of a condition with one primary-key lookup over the
-- candidate IDs (src/query/actions.ts `findExecutionTargets`).
CREATE TABLE action_executions (
  instance_id     text        NOT NULL,
  id              text        NOT NULL,
  execution_type  smallint    NOT NULL, -- ExecutionType: 1 request, 2 response, 3 event, 4 function
  condition_kind  text        NOT NULL, -- method, service, all, event, group, function
  condition_value text        NOT NULL, -- '' for all
  targets         text[]      NOT NULL, -- target IDs, in call order
  includes        text[]      NOT NULL, -- execution IDs
  created_at      timestamptz NOT NULL,
  changed_at      timestamptz NOT NULL,
  sequence        bigint      NOT NULL,
  PRIMARY KEY (instance_id, id)
);
CREATE INDEX action_executions_created_idx ON action_executions (instance_id, created_at);
CREATE INDEX action_executions_targets_idx ON action_executions USING gin (targets);
CREATE INDEX action_executions_includes_idx ON action_executions USING gin (includes);
