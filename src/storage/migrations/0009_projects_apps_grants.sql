-- Projects: roles, applications (OIDC and API clients) with their keys, project grants and user grants.
-- Roles, applications and project grants are part of the project aggregate (their `sequence` is the
-- project's); user grants are aggregates of their own.

CREATE INDEX projects_org_idx ON projects (instance_id, org_id, created_at);

CREATE TABLE project_roles (
  instance_id  text        NOT NULL,
  project_id   text        NOT NULL,
  key          text        NOT NULL,
  org_id       text        NOT NULL, -- the project's organization
  display_name text        NOT NULL,
  group_name   text        NOT NULL DEFAULT '',
  created_at   timestamptz NOT NULL,
  changed_at   timestamptz NOT NULL,
  sequence     bigint      NOT NULL,
  PRIMARY KEY (instance_id, project_id, key)
);

-- OIDC and API applications. Enum columns hold the API's enum numbers (OIDCAppType, OIDCAuthMethodType,
-- ...). The client secret exists only as its SHA-256 (base64url).
CREATE TABLE apps (
  instance_id        text        NOT NULL,
  id                 text        NOT NULL,
  project_id         text        NOT NULL,
  org_id             text        NOT NULL, -- the project's organization
  name               text        NOT NULL,
  type               smallint    NOT NULL, -- 1 OIDC, 2 API
  client_id          text        NOT NULL,
  client_secret_hash text,
  auth_method        smallint    NOT NULL, -- OIDCAuthMethodType (OIDC) or APIAuthMethodType (API)
  -- OIDC configuration (NULL / empty for API apps)
  redirect_uris               text[]   NOT NULL DEFAULT '{}',
  post_logout_redirect_uris   text[]   NOT NULL DEFAULT '{}',
  response_types              smallint[] NOT NULL DEFAULT '{}',
  grant_types                 smallint[] NOT NULL DEFAULT '{}',
  app_type                    smallint,
  access_token_type           smallint,
  access_token_role_assertion boolean  NOT NULL DEFAULT false,
  id_token_role_assertion     boolean  NOT NULL DEFAULT false,
  id_token_userinfo_assertion boolean  NOT NULL DEFAULT false,
  dev_mode                    boolean  NOT NULL DEFAULT false,
  clock_skew_ns               bigint   NOT NULL DEFAULT 0,
  created_at         timestamptz NOT NULL,
  changed_at         timestamptz NOT NULL,
  sequence           bigint      NOT NULL,
  PRIMARY KEY (instance_id, id)
);
-- Client authentication looks an app up by client ID: one index probe (src/query/apps.ts appByClientId).
CREATE UNIQUE INDEX apps_client_id_idx ON apps (instance_id, client_id);
CREATE INDEX apps_project_idx ON apps (instance_id, project_id, created_at);

-- Public keys of applications (private_key_jwt); private keys are never stored.
CREATE TABLE app_keys (
  instance_id text        NOT NULL,
  id          text        NOT NULL,
  app_id      text        NOT NULL,
  project_id  text        NOT NULL,
  public_key  text        NOT NULL, -- PEM (SPKI)
  expires_at  timestamptz,
  created_at  timestamptz NOT NULL,
  sequence    bigint      NOT NULL,
  PRIMARY KEY (instance_id, id)
);
CREATE INDEX app_keys_app_idx ON app_keys (instance_id, app_id);

CREATE TABLE project_grants (
  instance_id    text        NOT NULL,
  id             text        NOT NULL,
  project_id     text        NOT NULL,
  org_id         text        NOT NULL, -- the project's organization
  granted_org_id text        NOT NULL,
  role_keys      text[]      NOT NULL,
  state          smallint    NOT NULL DEFAULT 1, -- ProjectGrantState: 1 active, 2 inactive
  created_at     timestamptz NOT NULL,
  changed_at     timestamptz NOT NULL,
  sequence       bigint      NOT NULL,
  PRIMARY KEY (instance_id, id)
);
CREATE UNIQUE INDEX project_grants_project_org_idx ON project_grants (instance_id, project_id, granted_org_id);
CREATE INDEX project_grants_granted_org_idx ON project_grants (instance_id, granted_org_id);

CREATE TABLE user_grants (
  instance_id      text        NOT NULL,
  id               text        NOT NULL,
  user_id          text        NOT NULL,
  project_id       text        NOT NULL,
  project_grant_id text,                 -- set when given through a project grant
  org_id           text        NOT NULL, -- who gave it: the project's org, or the granted org
  role_keys        text[]      NOT NULL,
  created_at       timestamptz NOT NULL,
  changed_at       timestamptz NOT NULL,
  sequence         bigint      NOT NULL,
  PRIMARY KEY (instance_id, id)
);
CREATE INDEX user_grants_user_idx ON user_grants (instance_id, user_id);
CREATE INDEX user_grants_project_idx ON user_grants (instance_id, project_id);
CREATE INDEX user_grants_project_grant_idx ON user_grants (instance_id, project_grant_id);
CREATE INDEX user_grants_org_idx ON user_grants (instance_id, org_id);
