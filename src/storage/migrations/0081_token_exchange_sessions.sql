-- Token exchange (RFC 8693, docs/token-exchange.md): the browser sessions an exchanged token descends from
-- (the session of its subject and actor tokens, an ID token's `sid`, and those of their own ancestors). An
-- exchanged token is only active while each of them lasts, however the session ended (end_session, the
-- login UI's sign-out, DELETE /sessions/{id}, the user's removal). NULL for tokens of the other grants and for
-- exchanged tokens of earlier releases (no session to follow).
ALTER TABLE oidc_access_tokens ADD COLUMN ancestor_session_ids text[];
ALTER TABLE oidc_refresh_tokens ADD COLUMN ancestor_session_ids text[];
