-- The OpenID Connect provider (src/oidc): signing keys, tokens, authorization codes, used client assertions.
-- Tokens are not events: these rows are written in their own statements (committed before the response),
-- so issuing and revoking are as durable as any write. Secrets are stored as SHA-256 only.

-- Signing keys per instance. The private key is a JWK sealed with AES-256-GCM under PLATFORM_MASTERKEY.
-- A key signs from active_from until active_until (the newest key whose window holds "now" signs) and is
-- published in the JWKS from its creation until publish_until.
CREATE TABLE oidc_signing_keys (
  instance_id   text        NOT NULL,
  id            text        NOT NULL, -- the JWK kid
  alg           text        NOT NULL,
  public_jwk    jsonb       NOT NULL,
  private_key   text        NOT NULL, -- sealed JWK (src/crypto/masterkey.ts)
  created_at    timestamptz NOT NULL,
  active_from   timestamptz NOT NULL,
  active_until  timestamptz NOT NULL,
  publish_until timestamptz NOT NULL,
  PRIMARY KEY (instance_id, id)
);

-- Access tokens, opaque or JWT (id = the JWT's jti). secret_hash is the SHA-256 of an opaque token's secret
-- part, or of the whole JWT: a presented token is checked by one hash comparison, no signature check needed.
CREATE TABLE oidc_access_tokens (
  instance_id text        NOT NULL,
  id          text        NOT NULL,
  client_id   text        NOT NULL,
  subject     text        NOT NULL, -- user ID
  audience    text[]      NOT NULL,
  scope       text[]      NOT NULL,
  jwt         boolean     NOT NULL,
  secret_hash text        NOT NULL, -- SHA-256 (base64url) of the opaque token's secret part / of the JWT
  issuer      text        NOT NULL,
  issued_at   timestamptz NOT NULL,
  expires_at  timestamptz NOT NULL,
  revoked_at  timestamptz,
  family_id   text,                 -- the authorization code / refresh-token family it descends from
  session_id  text,
  auth_time   timestamptz,
  amr         text[],
  PRIMARY KEY (instance_id, id)
);
CREATE INDEX oidc_access_tokens_family_idx ON oidc_access_tokens (instance_id, family_id);
CREATE INDEX oidc_access_tokens_expires_idx ON oidc_access_tokens (expires_at);

-- Refresh tokens: every use rotates (rotated_at set, a new row of the same family); a rotated token used
-- again revokes the family. expires_at is the idle expiry, absolute_expires_at the family's end.
CREATE TABLE oidc_refresh_tokens (
  instance_id         text        NOT NULL,
  id                  text        NOT NULL,
  family_id           text        NOT NULL,
  client_id           text        NOT NULL,
  subject             text        NOT NULL,
  audience            text[]      NOT NULL,
  scope               text[]      NOT NULL, -- the scope granted originally (a refresh may narrow its token)
  secret_hash         text        NOT NULL,
  issuer              text        NOT NULL,
  issued_at           timestamptz NOT NULL,
  expires_at          timestamptz NOT NULL,
  absolute_expires_at timestamptz NOT NULL,
  rotated_at          timestamptz,
  revoked_at          timestamptz,
  session_id          text,
  auth_time           timestamptz,
  amr                 text[],
  PRIMARY KEY (instance_id, id)
);
CREATE INDEX oidc_refresh_tokens_family_idx ON oidc_refresh_tokens (instance_id, family_id);
CREATE INDEX oidc_refresh_tokens_expires_idx ON oidc_refresh_tokens (absolute_expires_at);

-- Authorization codes (issued by the authorization endpoint), single use: redeemed_at is set once.
CREATE TABLE oidc_authorization_codes (
  instance_id           text        NOT NULL,
  id                    text        NOT NULL,
  client_id             text        NOT NULL,
  secret_hash           text        NOT NULL,
  redirect_uri          text        NOT NULL,
  scope                 text[]      NOT NULL,
  nonce                 text,
  code_challenge        text,
  code_challenge_method text,
  user_id               text        NOT NULL,
  session_id            text,
  auth_time             timestamptz NOT NULL,
  amr                   text[],
  issuer                text        NOT NULL,
  created_at            timestamptz NOT NULL,
  expires_at            timestamptz NOT NULL,
  redeemed_at           timestamptz,
  PRIMARY KEY (instance_id, id)
);
CREATE INDEX oidc_authorization_codes_expires_idx ON oidc_authorization_codes (expires_at);

-- `jti` of private_key_jwt client assertions already used (single use), kept until they expire.
CREATE TABLE oidc_used_assertions (
  instance_id text        NOT NULL,
  client_id   text        NOT NULL,
  jti         text        NOT NULL,
  expires_at  timestamptz NOT NULL,
  PRIMARY KEY (instance_id, client_id, jti)
);
CREATE INDEX oidc_used_assertions_expires_idx ON oidc_used_assertions (expires_at);
