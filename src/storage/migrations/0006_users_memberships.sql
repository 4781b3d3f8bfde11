-- Users and memberships: failed password checks, machine credentials, metadata, membership organization.

-- Wrong passwords in a row (user.password.check.failed); reset by a right one and by unlocking.
ALTER TABLE users ADD COLUMN password_failed_attempts integer NOT NULL DEFAULT 0;
-- SHA-256 (base64url) of a machine user's client secret (client_credentials); never leaves the server.
ALTER TABLE users ADD COLUMN client_secret_hash text;
CREATE INDEX users_email_idx ON users (instance_id, lower(email));

-- Metadata of users: key → value (base64, as set through the API).
CREATE TABLE user_metadata (
  instance_id text        NOT NULL,
  user_id     text        NOT NULL,
  key         text        NOT NULL,
  value       text        NOT NULL,
  created_at  timestamptz NOT NULL,
  changed_at  timestamptz NOT NULL,
  PRIMARY KEY (instance_id, user_id, key)
);

-- Public keys of machine users (JWT profile / jwt-bearer grant); private keys are never stored.
CREATE TABLE user_keys (
  instance_id text        NOT NULL,
  id          text        NOT NULL,
  user_id     text        NOT NULL,
  public_key  text        NOT NULL, -- PEM (SPKI)
  expires_at  timestamptz,
  created_at  timestamptz NOT NULL,
  PRIMARY KEY (instance_id, id)
);
CREATE INDEX user_keys_user_idx ON user_keys (instance_id, user_id);

-- The organization of an organization or project membership (NULL for instance memberships), so searches
-- can keep the memberships of organizations the caller may read.
ALTER TABLE memberships ADD COLUMN org_id text;
UPDATE memberships SET org_id = context_id WHERE context_type = 3;
UPDATE memberships m SET org_id = p.org_id FROM projects p
  WHERE m.context_type = 4 AND p.instance_id = m.instance_id AND p.id = m.context_id;
CREATE INDEX memberships_org_idx ON memberships (instance_id, org_id);
