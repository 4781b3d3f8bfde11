-- The OIDC tokens of a browser session: end_session (src/oidc/browser.ts) revokes the access and refresh
-- tokens issued from the sessions it ends, and voids their authorization codes not yet redeemed.
CREATE INDEX oidc_access_tokens_session_idx ON oidc_access_tokens (instance_id, session_id)
  WHERE session_id IS NOT NULL;
CREATE INDEX oidc_refresh_tokens_session_idx ON oidc_refresh_tokens (instance_id, session_id)
  WHERE session_id IS NOT NULL;
CREATE INDEX oidc_authorization_codes_session_idx ON oidc_authorization_codes (instance_id, session_id)
  WHERE session_id IS NOT NULL;
