-- The event store: every change is an event; read models below are derived from them.
CREATE SEQUENCE events_position_seq;

CREATE TABLE events (
  instance_id    text        NOT NULL, -- '' for system-level aggregates
  aggregate_type text        NOT NULL,
  aggregate_id   text        NOT NULL,
  sequence       bigint      NOT NULL, -- per aggregate, 1, 2, 3 ...: the optimistic lock
  event_type     text        NOT NULL,
  payload        jsonb,
  creator        text        NOT NULL,
  resource_owner text        NOT NULL,
  created_at     timestamptz NOT NULL,
  position       bigint      NOT NULL DEFAULT nextval('events_position_seq'), -- global order
  PRIMARY KEY (instance_id, aggregate_type, aggregate_id, sequence)
);
CREATE UNIQUE INDEX events_position_idx ON events (position);
CREATE INDEX events_instance_type_idx ON events (instance_id, aggregate_type, position);
CREATE INDEX events_event_type_idx ON events (event_type, position);

-- Values that must be unique (usernames per instance, instance domains ...), claimed and released by
-- events in the same transaction as the append.
CREATE TABLE unique_constraints (
  instance_id  text NOT NULL,
  unique_type  text NOT NULL,
  unique_field text NOT NULL,
  PRIMARY KEY (instance_id, unique_type, unique_field)
);
