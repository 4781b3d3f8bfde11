-- Second factors of a session (docs/factors.md): when each check last passed. `webauthn_user_verified`
-- says whether the last WebAuthn assertion verified the user (PIN, biometrics: a passkey alone is then two
-- factors), `webauthn_amr` the RFC 8176 method of its key (`hwk` or `swk`).
ALTER TABLE sessions ADD COLUMN totp_checked_at timestamptz;
ALTER TABLE sessions ADD COLUMN otp_email_checked_at timestamptz;
ALTER TABLE sessions ADD COLUMN otp_sms_checked_at timestamptz;
ALTER TABLE sessions ADD COLUMN recovery_code_checked_at timestamptz;
ALTER TABLE sessions ADD COLUMN webauthn_checked_at timestamptz;
ALTER TABLE sessions ADD COLUMN webauthn_user_verified boolean;
ALTER TABLE sessions ADD COLUMN webauthn_amr text;
