/**
 * A session as its commands decide from it: folded from its events (pure), and the event every session
 * command appends.
 */
import { constantTimeEqual, sha256 } from "../../crypto/tokens.ts";
import type { StoredEvent } from "../../eventstore/types.ts";
import {
  type ChallengeAddedPayload,
  type ChallengeType,
  SESSION,
  type SessionAddedPayload,
  SessionEvent,
} from "./events.ts";
import type { SessionChallenge } from "./factors.ts";

/** A session, folded from its events. */
export interface SessionState {
  exists: boolean;
  userId?: string;
  orgId?: string;
  tokenHash?: string;
  sequence: number;
  changeDate?: Date;
  /** The open challenges, the last of each type (a passed check of its type consumes it). */
  challenges: Partial<Record<ChallengeType, SessionChallenge>>;
}

/** The challenge a passed check of each factor consumes. */
const consumes: Partial<Record<string, ChallengeType>> = {
  [SessionEvent.otpEmailChecked]: "otp_email",
  [SessionEvent.otpSmsChecked]: "otp_sms",
  [SessionEvent.webAuthnChecked]: "webauthn",
};

/** Wrong answers after which a challenge is gone (a new one must be asked for). */
export const MAX_CHALLENGE_ATTEMPTS = 5;

export function foldSession(events: readonly StoredEvent[]): SessionState {
  const session: SessionState = { exists: false, sequence: 0, challenges: {} };
  for (const e of events) {
    session.sequence = e.sequence;
    session.changeDate = e.createdAt;
    if (e.type === SessionEvent.added) {
      const p = e.payload as unknown as SessionAddedPayload;
      Object.assign(session, { exists: true, userId: p.user_id, orgId: p.org_id, tokenHash: p.token_hash });
    } else if (e.type === SessionEvent.terminated) {
      session.exists = false;
    } else if (e.type === SessionEvent.challengeAdded) {
      const { type, ...payload } = e.payload as unknown as ChallengeAddedPayload;
      session.challenges[type] = { type, payload, createdAt: e.createdAt, failedAttempts: 0 };
    } else if (e.type === SessionEvent.challengeCheckFailed) {
      const type = e.payload?.type as ChallengeType;
      const challenge = session.challenges[type];
      if (challenge && ++challenge.failedAttempts >= MAX_CHALLENGE_ATTEMPTS) delete session.challenges[type];
    } else if (consumes[e.type]) {
      delete session.challenges[consumes[e.type]!];
    }
  }
  return session;
}

/** Compares a presented session token with the stored hash in constant time. */
export function tokenMatches(session: SessionState, token: string): boolean {
  return session.tokenHash !== undefined && constantTimeEqual(sha256(token), session.tokenHash);
}

/** An event of the session aggregate `sessionId` (resource owner: the organization of its user). */
export function sessionEvent(
  sessionId: string,
  orgId: string,
  type: string,
  payload: Record<string, unknown> | null,
) {
  return { aggregateType: SESSION, aggregateId: sessionId, resourceOwner: orgId, type, payload };
}
