-- A user's second factors and passkeys (docs/factors.md; events user.totp.*, user.passkey.*, user.otp_email.*,
-- user.otp_sms.*, user.recovery_code(s).* on the user aggregate; src/query/projections/user-factors.ts).
-- One row per factor: `totp`, `otp_email`, `otp_sms` and `recovery_codes` have that fixed ID, each passkey or
-- security key its own. `data` holds what verifying needs: the TOTP secret sealed with the master key and the
-- last accepted time step; a passkey's credential ID, public key, counter and flags; the recovery codes'
-- hashes and which were used. No plain secret or code is ever stored.
CREATE TABLE user_factors (
  instance_id  text        NOT NULL,
  user_id      text        NOT NULL,
  org_id       text        NOT NULL,
  id           text        NOT NULL,
  -- totp | otp_email | otp_sms | recovery_codes | passkey | u2f
  type         text        NOT NULL,
  -- 1 pending (registered, not verified yet), 2 active
  state        smallint    NOT NULL,
  name         text        NOT NULL DEFAULT '',
  data         jsonb       NOT NULL DEFAULT '{}',
  created_at   timestamptz NOT NULL,
  changed_at   timestamptz NOT NULL,
  last_used_at timestamptz,
  PRIMARY KEY (instance_id, user_id, id)
);
-- a passkey sign-in without a login name finds the credential by its ID
CREATE INDEX user_factors_credential_idx ON user_factors (instance_id, (data->>'credential_id'))
  WHERE type IN ('passkey', 'u2f');
