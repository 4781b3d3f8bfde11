import {
  SESSION,
  type SessionAddedPayload,
  SessionEvent,
  type SessionWebAuthnCheckedPayload,
} from "../../domain/session/events.ts";
import { USER, UserEvent } from "../../domain/user/events.ts";
import type { AbsorbingHandler, EventHandler, Projection } from "../../eventstore/types.ts";

/** Sets a check time (the event's time) and the version columns. */
function checked(
  column:
    | "user_checked_at"
    | "password_checked_at"
    | "totp_checked_at"
    | "otp_email_checked_at"
    | "otp_sms_checked_at"
    | "recovery_code_checked_at",
): EventHandler {
  return async (tx, e) => {
    await tx.query(
      `UPDATE sessions SET ${column} = $3, changed_at = $3, sequence = $4 WHERE instance_id = $1 AND id = $2`,
      [e.instanceId, e.aggregateId, e.createdAt, e.sequence],
    );
  };
}

/** Moves the session's version only. */
const version: EventHandler = async (tx, e) => {
  await tx.query("UPDATE sessions SET changed_at = $3, sequence = $4 WHERE instance_id = $1 AND id = $2", [
    e.instanceId,
    e.aggregateId,
    e.createdAt,
    e.sequence,
  ]);
};

/**
 * `session.added` with the checks of the same append that follow it (user, password, identity provider):
 * one INSERT with their columns, instead of an INSERT and an UPDATE per check; the row ends as those
 * handlers leave it.
 */
const addedWithChecks: AbsorbingHandler = async (tx, e, following) => {
  const p = e.payload as unknown as SessionAddedPayload;
  const checks: Record<"user" | "password" | "idp", Date | null> = { user: null, password: null, idp: null };
  let idpId: string | null = null;
  let last = e;
  let applied = 0;
  for (const next of following) {
    if (
      next.instanceId !== e.instanceId ||
      next.aggregateType !== SESSION ||
      next.aggregateId !== e.aggregateId
    )
      break;
    if (next.type === SessionEvent.userChecked) checks.user = next.createdAt;
    else if (next.type === SessionEvent.passwordChecked) checks.password = next.createdAt;
    else if (next.type === SessionEvent.idpChecked) {
      checks.idp = next.createdAt;
      idpId = String(next.payload?.idp_id ?? "");
    } else break;
    last = next;
    applied++;
  }
  await tx.query(
    `INSERT INTO sessions (instance_id, id, user_id, org_id, creator, created_at, changed_at, sequence, user_agent_hash,
       user_checked_at, password_checked_at, idp_checked_at, idp_id)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
    [
      e.instanceId,
      e.aggregateId,
      p.user_id,
      p.org_id,
      e.creator,
      e.createdAt,
      last.createdAt,
      last.sequence,
      p.user_agent_hash ?? null,
      checks.user,
      checks.password,
      checks.idp,
      idpId,
    ],
  );
  return applied;
};

/** Sessions and their check times; the token hash is not copied (it stays in the events). */
export const sessionsProjection: Projection = {
  name: "sessions",
  tables: ["sessions"],
  aggregateTypes: [SESSION, USER],
  handlers: {
    // alone (a rebuild applies events one by one): the same INSERT without checks to take in
    [SessionEvent.added]: async (tx, e) => {
      await addedWithChecks(tx, e, []);
    },
    [SessionEvent.userChecked]: checked("user_checked_at"),
    [SessionEvent.passwordChecked]: checked("password_checked_at"),
    [SessionEvent.idpChecked]: async (tx, e) => {
      await tx.query(
        `UPDATE sessions SET idp_checked_at = $3, idp_id = $4, changed_at = $3, sequence = $5
         WHERE instance_id = $1 AND id = $2`,
        [e.instanceId, e.aggregateId, e.createdAt, String(e.payload?.idp_id ?? ""), e.sequence],
      );
    },
    [SessionEvent.totpChecked]: checked("totp_checked_at"),
    [SessionEvent.otpEmailChecked]: checked("otp_email_checked_at"),
    [SessionEvent.otpSmsChecked]: checked("otp_sms_checked_at"),
    [SessionEvent.recoveryCodeChecked]: checked("recovery_code_checked_at"),
    [SessionEvent.webAuthnChecked]: async (tx, e) => {
      const p = e.payload as unknown as SessionWebAuthnCheckedPayload;
      await tx.query(
        `UPDATE sessions SET webauthn_checked_at = $3, webauthn_user_verified = $4, webauthn_amr = $5,
           changed_at = $3, sequence = $6
         WHERE instance_id = $1 AND id = $2`,
        [e.instanceId, e.aggregateId, e.createdAt, p.user_verified === true, p.amr, e.sequence],
      );
    },
    // challenges live in the session's events only (a read of them folds the session)
    [SessionEvent.challengeAdded]: version,
    [SessionEvent.challengeCheckFailed]: version,
    // the browser's new cookie: not a check, so the session keeps its place in the account picker
    [SessionEvent.userAgentChanged]: async (tx, e) => {
      await tx.query(
        "UPDATE sessions SET user_agent_hash = $3, sequence = $4 WHERE instance_id = $1 AND id = $2",
        [e.instanceId, e.aggregateId, String(e.payload?.user_agent_hash ?? ""), e.sequence],
      );
    },
    [SessionEvent.terminated]: async (tx, e) => {
      await tx.query("DELETE FROM sessions WHERE instance_id = $1 AND id = $2", [
        e.instanceId,
        e.aggregateId,
      ]);
    },
    // A removed user's sessions are gone (their events stay; the commands refuse a removed user).
    [UserEvent.removed]: async (tx, e) => {
      await tx.query("DELETE FROM sessions WHERE instance_id = $1 AND user_id = $2", [
        e.instanceId,
        e.aggregateId,
      ]);
    },
  },
  absorbing: { [SessionEvent.added]: addedWithChecks },
};
