-- Login UI (src/login).
--
-- Authorization requests while a person signs in (src/login/auth-requests.ts). They are working state of
-- the login flow, not history: a plain table, rows expire after 10 minutes and are deleted later.
CREATE TABLE auth_requests (
  instance_id           text        NOT NULL,
  id                    text        NOT NULL,
  client_id             text        NOT NULL, -- '' for the login UI's own sign-ins (the account page)
  redirect_uri          text        NOT NULL,
  response_type         text        NOT NULL,
  response_mode         text,
  scope                 text[]      NOT NULL,
  state                 text,
  nonce                 text,
  code_challenge        text,
  code_challenge_method text,
  prompt                text[]      NOT NULL,
  login_hint            text,
  max_age               integer,
  ui_locales            text[]      NOT NULL,
  org_id                text,        -- requested organization (scope urn:platform:iam:org:id:<id>)
  hint_session_id       text,        -- session named by id_token_hint (its sid)
  hint_user_id          text,        -- user named by id_token_hint (its sub)
  user_agent_hash       text,        -- SHA-256 of the user-agent cookie that may continue the request
  login_name            text,        -- what the person typed on the login-name page
  session_id            text,        -- the session chosen for the request
  ui_state              jsonb       NOT NULL DEFAULT '{}', -- last error and form values (never passwords)
  created_at            timestamptz NOT NULL,
  expires_at            timestamptz NOT NULL,
  done_at               timestamptz,
  PRIMARY KEY (instance_id, id)
);
CREATE INDEX auth_requests_expires_idx ON auth_requests (expires_at);

-- The browser (user agent) a session was signed in with: SHA-256 of the user-agent cookie, from the
-- session.added event. The login UI lists a browser's sessions by it (SSO, account picker, sign-out).
ALTER TABLE sessions ADD COLUMN user_agent_hash text;
CREATE INDEX sessions_user_agent_idx ON sessions (instance_id, user_agent_hash) WHERE user_agent_hash IS NOT NULL;
