-- The login policy's second-factor step (docs/factors.md, "Sign-in flow").
-- When the user last chose "Skip" on the prompt to register a second factor (event user.mfa.init.skipped):
-- the prompt stays away for the policy's mfa_init_skip_lifetime.
ALTER TABLE users ADD COLUMN mfa_init_skipped_at timestamptz;
-- The ACR values an authorization request asked for (`acr_values`, e.g. urn:platform:acr:mfa).
ALTER TABLE auth_requests ADD COLUMN acr_values text[] NOT NULL DEFAULT '{}';
