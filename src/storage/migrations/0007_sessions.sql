-- Sessions read model (src/query/projections/sessions.ts). The session token's hash stays in the events
-- only; a terminated session's row is removed.
CREATE TABLE sessions (
  instance_id         text        NOT NULL,
  id                  text        NOT NULL,
  user_id             text        NOT NULL,
  org_id              text        NOT NULL, -- organization of the user: the session's resource owner
  creator             text        NOT NULL, -- who created the session (may read it)
  user_checked_at     timestamptz,
  password_checked_at timestamptz,
  created_at          timestamptz NOT NULL,
  changed_at          timestamptz NOT NULL,
  sequence            bigint      NOT NULL,
  PRIMARY KEY (instance_id, id)
);
CREATE INDEX sessions_created_idx ON sessions (instance_id, created_at);
CREATE INDEX sessions_user_idx ON sessions (instance_id, user_id);
