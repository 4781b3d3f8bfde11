-- The lockout of each second factor, counted on its own (docs/factors.md "Wrong answers and lockouts"):
-- factor (totp, otp_email, otp_sms, recovery_code, webauthn) → {"failed_attempts": n, "locked_until":
-- RFC 3339 or null}, from `user.factor.check.failed`; a factor's entry goes with a right answer of it
-- (`user.factor.check.succeeded`), all of them with an unlock. A right password resets none of them.
ALTER TABLE users ADD COLUMN factor_lockouts jsonb NOT NULL DEFAULT '{}'::jsonb;
