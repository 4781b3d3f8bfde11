-- Notification providers (docs/notifications.md): read model of the `smtp_provider` and `sms_provider`
-- aggregates, maintained inline by src/query/projections/notification-providers.ts, and their secrets.

CREATE TABLE notification_providers (
  instance_id text        NOT NULL,
  id          text        NOT NULL,
  kind        text        NOT NULL, -- 'smtp' or 'sms'
  description text        NOT NULL,
  state       smallint    NOT NULL, -- ProviderState: 1 active, 2 inactive
  config      jsonb       NOT NULL, -- the configuration without secrets (src/domain/notification/events.ts)
  created_at  timestamptz NOT NULL,
  changed_at  timestamptz NOT NULL,
  sequence    bigint      NOT NULL,
  PRIMARY KEY (instance_id, id)
);
-- Searches: one kind of an instance in creation order (the default sort).
CREATE INDEX notification_providers_search_idx ON notification_providers (instance_id, kind, created_at, id);
-- At most one active provider per kind and instance; the commands keep it so under a per-instance lock,
-- the index makes a violation fail instead of being stored.
CREATE UNIQUE INDEX notification_providers_active_idx ON notification_providers (instance_id, kind)
  WHERE state = 1;

-- Not a projection (secrets are never in events): written by the provider commands in the transaction of
-- their events, left alone by projection rebuilds. `secret` is sealed with the master key (AES-256-GCM,
-- src/crypto/masterkey.ts) bound to the instance, the provider and the secret's name: an SMTP provider's
-- `password` (no row without one), an SMS provider's `signing_key`.
CREATE TABLE notification_provider_secrets (
  instance_id text NOT NULL,
  provider_id text NOT NULL,
  name        text NOT NULL,
  secret      text NOT NULL,
  PRIMARY KEY (instance_id, provider_id, name)
);
