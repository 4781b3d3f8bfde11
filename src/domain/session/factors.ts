/**
 * The plug-in points of second factors in session commands (docs/factors.md). A session command (create or
 * patch) runs its checks in one transaction: the user check, the password, then each `FactorCheck`, then
 * each `ChallengeMaker`. Each factor lives in its own module (src/domain/user/factors/) and only implements
 * these two interfaces, so the commands stay one piece of code for every factor.
 *
 * A failed factor check commits its failure: the check's own events (e.g. the challenge's wrong-answer
 * count) and a `user.factor.check.failed` that counts towards the password lockout; then the command
 * throws the check's error. A passed one appends its events and `user.factor.check.succeeded` when it
 * resets earlier failures. While a temporary lockout lasts no factor is verified.
 */
import type { CommandTx, NewEvent } from "../../eventstore/types.ts";
import type { SecondFactor } from "../user/events.ts";
import type { ChallengeType } from "./events.ts";

/** A challenge of a session as its events left it. */
export interface SessionChallenge {
  type: ChallengeType;
  /** The `session.challenge.added` payload (the type's own fields). */
  payload: Record<string, unknown>;
  /** When it was made. */
  createdAt: Date;
  /** Wrong answers so far (the fifth removes the challenge). */
  failedAttempts: number;
}

/** What a factor check or a challenge sees of the command it runs in. */
export interface FactorContext {
  tx: CommandTx;
  instanceId: string;
  sessionId: string;
  userId: string;
  /** Organization of the user (the session's resource owner). */
  orgId: string;
  /** The database's clock at the start of the command. */
  now: Date;
  /** The session's current challenges (none for a session being created). */
  challenges: Partial<Record<ChallengeType, SessionChallenge>>;
}

/** The outcome of one factor check. */
export type FactorOutcome =
  /** Passed: the user and session events to append (e.g. `user.totp.used`, `session.totp.checked`). */
  | { passed: true; events: NewEvent[] }
  /** Failed: events committed anyway (e.g. `session.challenge.check.failed`), then `error` is thrown. */
  | { passed: false; events: NewEvent[]; error: Error };

/** One second-factor check of a session command (e.g. `checks.totp`). */
export interface FactorCheck {
  factor: SecondFactor;
  /** Decides inside the command's transaction. Must not store anything itself. */
  check(ctx: FactorContext): Promise<FactorOutcome>;
}

/** One challenge asked for in a session command (e.g. `challenges.otp_email`). */
export interface ChallengeMaker {
  type: ChallengeType;
  /**
   * Makes the challenge inside the command's transaction: the events (`session.challenge.added`, and e.g.
   * the outbox message carrying a code) and the answer for the response's `challenges`.
   */
  make(ctx: FactorContext): Promise<{ events: NewEvent[]; answer: unknown }>;
}
