-- Links between users and identities at external identity providers (events user.idp.link.added /
-- user.idp.link.removed on the user aggregate; src/query/projections/users.ts). The login UI finds the user
-- of an external identity here; the users API lists a user's links (GET /users/{id}/links).
-- idp_id is not a foreign key: a link to a provider deleted since stays readable (and removable).
CREATE TABLE user_idp_links (
  instance_id       text        NOT NULL,
  user_id           text        NOT NULL,
  org_id            text        NOT NULL,
  idp_id            text        NOT NULL,
  external_user_id  text        NOT NULL,
  external_username text        NOT NULL,
  created_at        timestamptz NOT NULL,
  sequence          bigint      NOT NULL,
  PRIMARY KEY (instance_id, user_id, idp_id),
  -- one external identity links to one user per instance (the event's unique constraint guards it first)
  CONSTRAINT user_idp_links_identity_key UNIQUE (instance_id, idp_id, external_user_id)
);

-- A session authenticated by a linked identity provider (event session.idp.checked): counts as the
-- session's authentication (auth_time, amr "fed") like a password check.
ALTER TABLE sessions ADD COLUMN idp_checked_at timestamptz;

-- Sign-ins with an external identity provider in progress (src/login/idp): working state of the login
-- flow like auth_requests, not history. `id` is the OAuth `state` sent to the provider; nonce and PKCE
-- verifier stay here. After the callback, `external` holds the identity the provider answered (for the
-- registration and linking pages). Rows live 10 minutes.
CREATE TABLE login_idp_intents (
  instance_id      text        NOT NULL,
  id               text        NOT NULL,
  auth_request_id  text        NOT NULL,
  idp_id           text        NOT NULL,
  org_id           text        NOT NULL, -- organization of the sign-in
  user_agent_hash  text        NOT NULL, -- the browser that started it (only it may continue)
  nonce            text        NOT NULL,
  code_verifier    text        NOT NULL,
  external         jsonb,
  created_at       timestamptz NOT NULL,
  expires_at       timestamptz NOT NULL,
  done_at          timestamptz,
  PRIMARY KEY (instance_id, id)
);
CREATE INDEX login_idp_intents_expires_idx ON login_idp_intents (expires_at);
