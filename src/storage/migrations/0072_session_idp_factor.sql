-- The identity provider of a session's last sign-in through an external provider (the sessions API's
-- `factors.idp`); `idp_checked_at` (0071) has its time.
ALTER TABLE sessions ADD COLUMN idp_id text;
