-- Temporary password lockout: until when password checks of a user are refused after too many wrong
-- passwords in a row (`user.password.check.failed` carries it); NULL when no lockout was started since the
-- last right password, unlock or password change.
ALTER TABLE users ADD COLUMN password_locked_until timestamptz;
