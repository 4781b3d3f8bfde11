/**
 * Session commands: create a session from a user check (and a password check), add checks to it, end it.
 * They use only the event store and the read models, so the API service and the login UI call the same
 * functions. The decisions themselves (`foldSession` in ./state.ts, `foldUser` in ./user-facts.ts with the reads of
 * a user's check facts, `passwordCheckEvents` in ./lockout.ts) are pure. Second factors plug in through
 * ./factors.ts.
 *
 * Password checks count per user on the user aggregate, under the lockout policy (./lockout.ts): a wrong
 * password appends `user.password.check.failed` (with the end of a temporary lockout it starts, or
 * followed by `user.locked` under a permanent lockout), a right one after failures
 * `user.password.check.succeeded`. Each second factor counts the same way on its own
 * (`user.factor.check.*`), and a right password resets none of those counts. The counts are taken from
 * the user inside the command, so two concurrent wrong answers cannot both be counted as the same attempt
 * (optimistic lock on the user).
 */
import { verifyPassword } from "../../crypto/password.ts";
import { randomToken, sha256 } from "../../crypto/tokens.ts";
import {
  FailedPreconditionError,
  InvalidArgumentError,
  NotFoundError,
  PermissionDeniedError,
} from "../../errors.ts";
import type { EventStore } from "../../eventstore/eventstore.ts";
import type { CommandTx, NewEvent, PushContext, StoredEvent } from "../../eventstore/types.ts";
import { newId } from "../../id.ts";
import { USER } from "../user/events.ts";
import { type ChallengeType, SESSION, type SessionAddedPayload, SessionEvent } from "./events.ts";
import type { ChallengeMaker, FactorCheck, FactorContext } from "./factors.ts";
import {
  FactorLockedOutError,
  factorCheckEvents,
  factorCount,
  lockedOutUntil,
  PasswordLockedOutError,
  type PasswordPolicy,
  passwordCheckEvents,
} from "./lockout.ts";
import { foldSession, type SessionState, sessionEvent, tokenMatches } from "./state.ts";
import {
  assertCheckable,
  type CheckedUser,
  passwordCheckable,
  passwordHashOf,
  type UserForCheck,
  userForCheck,
} from "./user-facts.ts";

export type {
  ChallengeMaker,
  FactorCheck,
  FactorContext,
  FactorOutcome,
  SessionChallenge,
} from "./factors.ts";
export {
  FactorLockedOutError,
  factorCheckEvents,
  PasswordLockedOutError,
  type PasswordPolicy,
  passwordCheckEvents,
  passwordPolicyOf,
} from "./lockout.ts";
export {
  foldSession,
  MAX_CHALLENGE_ATTEMPTS,
  type SessionState,
  sessionEvent,
  tokenMatches,
} from "./state.ts";

export {
  assertCheckable,
  type CheckedUser,
  findUser,
  foldUser,
  passwordHashOf,
  type UserCheck,
  type UserForCheck,
  userForCheck,
} from "./user-facts.ts";

/** The version of a session after a command (for `Details`). */
export interface SessionVersion {
  sessionId: string;
  /** Organization of the session's user. */
  orgId: string;
  sequence: number;
  changeDate: Date;
}

// ---------------------------------------------------------------------------------------------------------
// Commands

/** Verifies one password against hashes, remembering the result per hash (commands may run again). */
function passwordVerifier(password: string) {
  const results = new Map<string, Promise<boolean>>();
  return (hash: string): Promise<boolean> => {
    let result = results.get(hash);
    if (!result) {
      result = verifyPassword(hash, password);
      results.set(hash, result);
    }
    return result;
  };
}

interface CheckRun {
  userId: string;
  sessionId: string;
  orgId: string;
  password?: string;
  /** Second-factor checks, after the password (./factors.ts). */
  factors?: readonly FactorCheck[];
  /** Challenges to make once every check passed. */
  challenges?: readonly ChallengeMaker[];
  /** The session's challenges as `prepare` loaded them (none while the session is created). */
  currentChallenges?: () => SessionState["challenges"];
  /** The user's check facts read already (`CheckedUser.read`): the password is verified against these. */
  read?: UserForCheck & { now: Date };
  /** Runs first in the transaction (e.g. loads the session and proves its token). */
  prepare?: (tx: CommandTx) => Promise<void>;
  /** The session events to append once every check passed. */
  sessionEvents: (user: UserForCheck) => NewEvent[];
}

/**
 * Runs the checks of one command. The (slow) argon2 verification runs before the transaction against the
 * hash then current, and again inside only when the hash changed meanwhile. A wrong password commits the
 * failure (and lockout) events alone, then throws INVALID_ARGUMENT "password is wrong"; while a temporary
 * lockout lasts the password is neither verified nor counted (PasswordLockedOutError, FAILED_PRECONDITION).
 * Each second factor likewise, under its own count (FactorLockedOutError while that factor is locked out).
 */
async function runChecks(
  store: EventStore,
  actor: PushContext,
  policy: PasswordPolicy,
  run: CheckRun,
): Promise<{ stored: StoredEvent[]; answers: Partial<Record<ChallengeType, unknown>> }> {
  const verify = run.password === undefined ? undefined : passwordVerifier(run.password);
  if (verify) {
    const user = run.read ?? (await userForCheck(store.db, actor.instanceId, run.userId));
    if (passwordCheckable(user, user.now)) await verify(user.passwordHash);
  }
  let wrongPassword = false;
  let failure: Error | undefined;
  let answers: Partial<Record<ChallengeType, unknown>> = {};
  const stored = await store.push(actor, async (tx) => {
    wrongPassword = false;
    failure = undefined;
    answers = {};
    await run.prepare?.(tx);
    // A user who logs in often has a long history: decide from the read model (kept in step inside this
    // transaction), with the user's current sequence as the optimistic lock.
    const user = await userForCheck(tx, actor.instanceId, run.userId, { sequence: true });
    tx.expectAt(USER, run.userId, user.sequence ?? 0);
    assertCheckable(user);
    const events: NewEvent[] = [];
    if (verify) {
      const hash = passwordHashOf(user);
      const lockedUntil = lockedOutUntil(user, user.now);
      if (lockedUntil) throw new PasswordLockedOutError(lockedUntil);
      const passed = await verify(hash);
      events.push(...passwordCheckEvents(run.userId, user, passed, policy, user.now));
      if (!passed) {
        wrongPassword = true;
        return events;
      }
    }
    const context: FactorContext = {
      tx,
      instanceId: actor.instanceId,
      sessionId: run.sessionId,
      userId: run.userId,
      orgId: run.orgId,
      now: user.now,
      challenges: run.currentChallenges?.() ?? {},
    };
    const factorEvents: NewEvent[] = [];
    for (const factor of run.factors ?? []) {
      // each factor under its own count: a password (checked above or long ago) resets none of them
      const lockedUntil = lockedOutUntil(factorCount(user, factor.factor), user.now);
      if (lockedUntil) throw new FactorLockedOutError(factor.factor, lockedUntil);
      const outcome = await factor.check(context);
      const lockout = factorCheckEvents(run.userId, user, factor.factor, outcome.passed, policy, user.now);
      if (!outcome.passed) {
        failure = outcome.error;
        // the failure alone is committed: what the earlier checks passed is not recorded
        return [...events.filter((e) => e.aggregateType === USER), ...outcome.events, ...lockout];
      }
      factorEvents.push(...outcome.events, ...lockout);
    }
    events.push(...run.sessionEvents(user), ...factorEvents);
    for (const challenge of run.challenges ?? []) {
      const made = await challenge.make(context);
      events.push(...made.events);
      answers[challenge.type] = made.answer;
    }
    return events;
  });
  if (wrongPassword) throw new InvalidArgumentError("password is wrong");
  if (failure) throw failure;
  return { stored, answers };
}

function versionOf(sessionId: string, orgId: string, stored: StoredEvent[], current?: SessionState) {
  const last = stored.filter((e) => e.aggregateType === SESSION).at(-1);
  return {
    sessionId,
    orgId,
    sequence: last?.sequence ?? current?.sequence ?? 0,
    changeDate: last?.createdAt ?? current?.changeDate ?? new Date(),
  };
}

/**
 * Creates a session for `user` after every check passed; answers the session token (stored only as its
 * SHA-256). The caller decides beforehand whether the actor may create sessions for this user.
 */
export async function createSession(
  store: EventStore,
  actor: PushContext,
  input: {
    user: CheckedUser;
    password?: string;
    userAgentHash?: string;
    idpId?: string;
    factors?: readonly FactorCheck[];
    challenges?: readonly ChallengeMaker[];
  },
  policy: PasswordPolicy,
): Promise<SessionVersion & { token: string; challenges: Partial<Record<ChallengeType, unknown>> }> {
  const sessionId = newId();
  const token = randomToken();
  const { id: userId, orgId } = input.user;
  const { stored, answers } = await runChecks(store, actor, policy, {
    userId,
    sessionId,
    orgId,
    factors: input.factors,
    challenges: input.challenges,
    password: input.password,
    read: input.user.read,
    sessionEvents: () => {
      const added: SessionAddedPayload = { user_id: userId, org_id: orgId, token_hash: sha256(token) };
      if (input.userAgentHash !== undefined) added.user_agent_hash = input.userAgentHash;
      const events: NewEvent[] = [
        sessionEvent(sessionId, orgId, SessionEvent.added, { ...added }),
        sessionEvent(sessionId, orgId, SessionEvent.userChecked, { user_id: userId }),
      ];
      if (input.password !== undefined)
        events.push(sessionEvent(sessionId, orgId, SessionEvent.passwordChecked, null));
      if (input.idpId !== undefined)
        events.push(sessionEvent(sessionId, orgId, SessionEvent.idpChecked, { idp_id: input.idpId }));
      return events;
    },
  });
  return { ...versionOf(sessionId, orgId, stored), token, challenges: answers };
}

/** Loads a live session inside a command (NOT_FOUND when it does not exist or ended). */
async function loadSession(tx: CommandTx, sessionId: string): Promise<SessionState> {
  const session = foldSession(await tx.load(SESSION, sessionId));
  if (!session.exists) throw new NotFoundError("session not found");
  return session;
}

/** A live session outside any command (NOT_FOUND when it does not exist or ended). */
export async function getSessionState(
  store: EventStore,
  instanceId: string,
  sessionId: string,
): Promise<SessionState> {
  const session = foldSession(await store.aggregateEvents(instanceId, SESSION, sessionId));
  if (!session.exists) throw new NotFoundError("session not found");
  return session;
}

function requireToken(session: SessionState, token: string): void {
  if (!tokenMatches(session, token)) throw new PermissionDeniedError("session token is invalid");
}

/**
 * Adds checks to a session, proven by its token (PERMISSION_DENIED "session token is invalid" otherwise,
 * checked before any password). Without `token` the caller has proven otherwise that the actor holds the
 * session (the login UI: the session belongs to the browser's user-agent cookie). A user check must name
 * the session's user. No checks: no change.
 */
export async function checkSession(
  store: EventStore,
  actor: PushContext,
  input: {
    sessionId: string;
    token?: string;
    user?: CheckedUser;
    password?: string;
    idpId?: string;
    factors?: readonly FactorCheck[];
    challenges?: readonly ChallengeMaker[];
    /**
     * The session's user and organization as the caller read them (the login's read model, without a
     * token): the session is then read once, in the transaction, and must still be that user's.
     */
    of?: { userId: string; orgId: string };
  },
  policy: PasswordPolicy,
): Promise<SessionVersion & { challenges: Partial<Record<ChallengeType, unknown>> }> {
  const { sessionId, token } = input;
  const unchanged =
    !input.user &&
    input.password === undefined &&
    input.idpId === undefined &&
    !input.factors?.length &&
    !input.challenges?.length;
  // a token is proven before anything else (no password is verified for a wrong one)
  const before =
    input.of && token === undefined && !unchanged
      ? undefined
      : await getSessionState(store, actor.instanceId, sessionId);
  if (before && token !== undefined) requireToken(before, token);
  const userId = before?.userId ?? input.of!.userId;
  const orgId = before?.orgId ?? input.of!.orgId;
  if (input.user && input.user.id !== userId)
    throw new FailedPreconditionError("the user of a session cannot be changed");
  if (unchanged) return { ...versionOf(sessionId, orgId, [], before), challenges: {} };

  let current: SessionState | undefined = before;
  const { stored, answers } = await runChecks(store, actor, policy, {
    userId,
    sessionId,
    orgId,
    factors: input.factors,
    challenges: input.challenges,
    currentChallenges: () => current?.challenges ?? {},
    password: input.password,
    prepare: async (tx) => {
      current = await loadSession(tx, sessionId);
      if (token !== undefined) requireToken(current, token);
      if (current.userId !== userId) throw new NotFoundError("session not found");
    },
    sessionEvents: () => {
      const events: NewEvent[] = [];
      if (input.user)
        events.push(sessionEvent(sessionId, orgId, SessionEvent.userChecked, { user_id: userId }));
      if (input.password !== undefined)
        events.push(sessionEvent(sessionId, orgId, SessionEvent.passwordChecked, null));
      if (input.idpId !== undefined)
        events.push(sessionEvent(sessionId, orgId, SessionEvent.idpChecked, { idp_id: input.idpId }));
      return events;
    },
  });
  return { ...versionOf(sessionId, orgId, stored, current), challenges: answers };
}

/**
 * Ends a session. With `token` the token must match (PERMISSION_DENIED otherwise); without it the caller
 * has decided beforehand that the actor may delete the session.
 */
export async function terminateSession(
  store: EventStore,
  actor: PushContext,
  input: { sessionId: string; token?: string },
): Promise<SessionVersion> {
  let orgId = "";
  const stored = await store.push(actor, async (tx) => {
    const session = await loadSession(tx, input.sessionId);
    if (input.token !== undefined) requireToken(session, input.token);
    orgId = session.orgId!;
    return [sessionEvent(input.sessionId, orgId, SessionEvent.terminated, null)];
  });
  return versionOf(input.sessionId, orgId, stored);
}
