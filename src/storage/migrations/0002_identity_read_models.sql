-- Read models of the identity aggregates, maintained inline by the projections in src/query.
CREATE TABLE instances (
  id              text PRIMARY KEY,
  name            text        NOT NULL,
  state           smallint    NOT NULL DEFAULT 1,
  default_org_id  text,
  iam_project_id  text,
  blocked         boolean     NOT NULL DEFAULT false,
  audit_log_retention_seconds bigint,
  created_at      timestamptz NOT NULL,
  changed_at      timestamptz NOT NULL,
  sequence        bigint      NOT NULL
);

CREATE TABLE instance_domains (
  domain       text PRIMARY KEY,
  instance_id  text        NOT NULL,
  is_primary   boolean     NOT NULL DEFAULT false,
  is_generated boolean     NOT NULL DEFAULT false,
  created_at   timestamptz NOT NULL
);
CREATE INDEX instance_domains_instance_idx ON instance_domains (instance_id);

CREATE TABLE orgs (
  instance_id    text        NOT NULL,
  id             text        NOT NULL,
  name           text        NOT NULL,
  state          smallint    NOT NULL DEFAULT 1,
  primary_domain text        NOT NULL DEFAULT '',
  created_at     timestamptz NOT NULL,
  changed_at     timestamptz NOT NULL,
  sequence       bigint      NOT NULL,
  PRIMARY KEY (instance_id, id)
);
CREATE INDEX orgs_created_idx ON orgs (instance_id, created_at);

CREATE TABLE org_domains (
  instance_id text        NOT NULL,
  org_id      text        NOT NULL,
  domain      text        NOT NULL,
  is_verified boolean     NOT NULL DEFAULT false,
  is_primary  boolean     NOT NULL DEFAULT false,
  created_at  timestamptz NOT NULL,
  PRIMARY KEY (instance_id, org_id, domain)
);

CREATE TABLE projects (
  instance_id text        NOT NULL,
  id          text        NOT NULL,
  org_id      text        NOT NULL,
  name        text        NOT NULL,
  state       smallint    NOT NULL DEFAULT 1,
  role_assertion boolean  NOT NULL DEFAULT false,
  role_check  boolean     NOT NULL DEFAULT false,
  created_at  timestamptz NOT NULL,
  changed_at  timestamptz NOT NULL,
  sequence    bigint      NOT NULL,
  PRIMARY KEY (instance_id, id)
);

CREATE TABLE users (
  instance_id        text        NOT NULL,
  id                 text        NOT NULL,
  org_id             text        NOT NULL,
  type               smallint    NOT NULL, -- 1 human, 2 machine
  username           text        NOT NULL,
  state              smallint    NOT NULL DEFAULT 1, -- 1 active, 2 inactive, 3 locked
  given_name         text,
  family_name        text,
  display_name       text,
  nick_name          text,
  preferred_language text,
  email              text,
  email_verified     boolean     NOT NULL DEFAULT false,
  phone              text,
  phone_verified     boolean     NOT NULL DEFAULT false,
  password_hash      text,      -- argon2id; never leaves the server
  password_change_required boolean NOT NULL DEFAULT false,
  machine_name       text,
  description        text,
  access_token_type  smallint,
  created_at         timestamptz NOT NULL,
  changed_at         timestamptz NOT NULL,
  sequence           bigint      NOT NULL,
  PRIMARY KEY (instance_id, id)
);
CREATE UNIQUE INDEX users_username_idx ON users (instance_id, lower(username));
CREATE INDEX users_org_idx ON users (instance_id, org_id, created_at);

CREATE TABLE memberships (
  instance_id  text        NOT NULL,
  id           text        NOT NULL,
  context_type smallint    NOT NULL, -- OwnerType: 2 instance, 3 org; 4 project
  context_id   text        NOT NULL,
  user_id      text        NOT NULL,
  roles        text[]      NOT NULL,
  created_at   timestamptz NOT NULL,
  changed_at   timestamptz NOT NULL,
  sequence     bigint      NOT NULL,
  PRIMARY KEY (instance_id, id)
);
CREATE UNIQUE INDEX memberships_context_user_idx ON memberships (instance_id, context_type, context_id, user_id);
CREATE INDEX memberships_user_idx ON memberships (instance_id, user_id);

CREATE TABLE personal_access_tokens (
  instance_id text        NOT NULL,
  id          text        NOT NULL,
  user_id     text        NOT NULL,
  token_hash  text        NOT NULL, -- SHA-256 of the token, base64url
  expires_at  timestamptz,
  created_at  timestamptz NOT NULL,
  PRIMARY KEY (instance_id, id)
);
CREATE UNIQUE INDEX personal_access_tokens_hash_idx ON personal_access_tokens (token_hash);
