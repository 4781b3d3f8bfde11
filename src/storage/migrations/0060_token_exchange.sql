-- Token exchange (RFC 8693, docs/token-exchange.md): what an exchanged token descends from.
-- act: the RFC 8693 `act` claim of an impersonation token ({"sub": <actor user id>}, nested for chains).
-- ancestor_token_ids / ancestor_pat_ids: every access token and personal access token the token was exchanged
-- from, transitively (a token exchanged from an exchanged token inherits its ancestors). A token is only
-- active while its ancestors are: none revoked, no PAT removed, every actor of `act` still active.
-- All three are NULL for tokens of the other grants, so their paths stay as they were.
ALTER TABLE oidc_access_tokens
  ADD COLUMN act                jsonb,
  ADD COLUMN ancestor_token_ids text[],
  ADD COLUMN ancestor_pat_ids   text[];

ALTER TABLE oidc_refresh_tokens
  ADD COLUMN act                jsonb,
  ADD COLUMN ancestor_token_ids text[],
  ADD COLUMN ancestor_pat_ids   text[];
