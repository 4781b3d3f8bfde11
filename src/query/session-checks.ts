/**
 * The checks a session passed (the sessions read model): what the rule for changes to how an account signs
 * in decides from (src/domain/session/sign-in-changes.ts) when a user changes its own factors through the
 * API with a token of that session.
 */
import type { SessionChecks } from "../domain/session/amr.ts";
import type { Queryable } from "../storage/database.ts";

interface Row {
  user_id: string;
  password_checked_at: Date | string | null;
  idp_checked_at: Date | string | null;
  totp_checked_at: Date | string | null;
  otp_email_checked_at: Date | string | null;
  otp_sms_checked_at: Date | string | null;
  recovery_code_checked_at: Date | string | null;
  webauthn_checked_at: Date | string | null;
  webauthn_user_verified: boolean | null;
  [key: string]: unknown;
}

const at = (value: Date | string | null) => (value === null ? undefined : new Date(value));

/** The session's user and checks; undefined when the session ended. */
export async function sessionChecks(
  db: Queryable,
  instanceId: string,
  sessionId: string,
): Promise<{ userId: string; checks: SessionChecks } | undefined> {
  const [row] = await db.query<Row>(
    `SELECT user_id, password_checked_at, idp_checked_at, totp_checked_at, otp_email_checked_at,
       otp_sms_checked_at, recovery_code_checked_at, webauthn_checked_at, webauthn_user_verified
     FROM sessions WHERE instance_id = $1 AND id = $2`,
    [instanceId, sessionId],
  );
  if (!row) return undefined;
  return {
    userId: row.user_id,
    checks: {
      password: at(row.password_checked_at),
      idp: at(row.idp_checked_at),
      totp: at(row.totp_checked_at),
      otpEmail: at(row.otp_email_checked_at),
      otpSms: at(row.otp_sms_checked_at),
      recoveryCode: at(row.recovery_code_checked_at),
      webauthn: at(row.webauthn_checked_at),
      webauthnUserVerified: row.webauthn_user_verified === true,
    },
  };
}
