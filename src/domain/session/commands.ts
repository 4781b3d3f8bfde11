/**
 * Session commands: create a session from a user check (and a password check), add checks to it, end it.
 * They use only the event store and the read models, so the API service and the login UI call the same
 * functions. The decisions themselves (`foldUser`, `foldSession`, `passwordCheckEvents`) are pure.
 *
 * Password checks count per user on the user aggregate: a wrong password appends
 * `user.password.check.failed` (and `user.locked` when the failures since the last
 * `user.password.check.succeeded` / `user.unlocked` reach `maxPasswordAttempts`; 0 = never), a right one
 * `user.password.check.succeeded`. The count is taken from the user's events inside the command, so two
 * concurrent wrong passwords cannot both be counted as the same attempt (optimistic lock on the user).
 */
import { verifyPassword } from "../../crypto/password.ts";
import { constantTimeEqual, randomToken, sha256 } from "../../crypto/tokens.ts";
import {
  FailedPreconditionError,
  InvalidArgumentError,
  NotFoundError,
  PermissionDeniedError,
} from "../../errors.ts";
import type { EventStore } from "../../eventstore/eventstore.ts";
import type { CommandTx, NewEvent, PushContext, StoredEvent } from "../../eventstore/types.ts";
import { newId } from "../../id.ts";
import type { Queryable } from "../../storage/database.ts";
import { USER, UserEvent, UserState, UserType } from "../user/events.ts";
import { SESSION, type SessionAddedPayload, SessionEvent } from "./events.ts";

/** The lockout policy (config `maxPasswordAttempts`). */
export interface PasswordPolicy {
  /** Failed password checks after which the user is locked; 0 = never. */
  maxPasswordAttempts: number;
}

/** How a user check names the user. */
export type UserCheck = { userId: string } | { loginName: string };

/** A user found by a user check. */
export interface CheckedUser {
  id: string;
  orgId: string;
}

/** The version of a session after a command (for `Details`). */
export interface SessionVersion {
  sessionId: string;
  /** Organization of the session's user. */
  orgId: string;
  sequence: number;
  changeDate: Date;
}

// ---------------------------------------------------------------------------------------------------------
// Pure decisions

/** What the session checks need to know about a user, folded from its events. */
export interface UserForCheck {
  exists: boolean;
  type?: number;
  state: number;
  orgId?: string;
  passwordHash?: string;
  /** Failed password checks since the last succeeded check or unlock. */
  failedAttempts: number;
}

export function foldUser(events: readonly StoredEvent[]): UserForCheck {
  const user: UserForCheck = { exists: false, state: UserState.active, failedAttempts: 0 };
  for (const e of events) {
    switch (e.type) {
      case UserEvent.humanAdded:
      case UserEvent.machineAdded:
        user.exists = true;
        user.type = e.type === UserEvent.humanAdded ? UserType.human : UserType.machine;
        user.state = UserState.active;
        user.orgId = e.resourceOwner;
        user.passwordHash = (e.payload?.password_hash as string | undefined) ?? undefined;
        user.failedAttempts = 0;
        break;
      case UserEvent.passwordChanged:
        user.passwordHash = (e.payload?.password_hash as string | undefined) ?? undefined;
        break;
      case UserEvent.passwordCheckFailed:
        user.failedAttempts++;
        break;
      case UserEvent.passwordCheckSucceeded:
        user.failedAttempts = 0;
        break;
      case UserEvent.locked:
        user.state = UserState.locked;
        break;
      case UserEvent.unlocked:
        user.state = UserState.active;
        user.failedAttempts = 0;
        break;
      case UserEvent.deactivated:
        user.state = UserState.inactive;
        break;
      case UserEvent.reactivated:
        user.state = UserState.active;
        break;
      case UserEvent.removed:
        user.exists = false;
        break;
    }
  }
  return user;
}

/** Throws unless the user exists and may pass checks (active). */
export function assertCheckable(user: UserForCheck): void {
  if (!user.exists) throw new NotFoundError("user not found");
  if (user.state === UserState.locked) throw new FailedPreconditionError("user is locked");
  if (user.state === UserState.inactive) throw new FailedPreconditionError("user is inactive");
}

/** The hash a password check verifies against (FAILED_PRECONDITION for machines and users without one). */
export function passwordHashOf(user: UserForCheck): string {
  if (user.type === UserType.machine) throw new FailedPreconditionError("machine users have no password");
  if (!user.passwordHash) throw new FailedPreconditionError("the user has no password");
  return user.passwordHash;
}

/**
 * The user events of a password check: succeeded, or failed plus locked when this failure reaches the
 * policy's maximum.
 */
export function passwordCheckEvents(
  userId: string,
  user: UserForCheck,
  passed: boolean,
  policy: PasswordPolicy,
): NewEvent[] {
  const base = { aggregateType: USER, aggregateId: userId, resourceOwner: user.orgId ?? "" };
  // A right password only needs recording when it resets earlier failures: logins of a user then neither
  // grow the user's history nor contend for its sequence (the session's own events record the check).
  if (passed)
    return user.failedAttempts > 0
      ? [{ ...base, type: UserEvent.passwordCheckSucceeded, payload: null }]
      : [];
  const events: NewEvent[] = [{ ...base, type: UserEvent.passwordCheckFailed, payload: null }];
  const max = policy.maxPasswordAttempts;
  if (max > 0 && user.failedAttempts + 1 >= max)
    events.push({ ...base, type: UserEvent.locked, payload: null });
  return events;
}

/** A session, folded from its events. */
export interface SessionState {
  exists: boolean;
  userId?: string;
  orgId?: string;
  tokenHash?: string;
  sequence: number;
  changeDate?: Date;
}

export function foldSession(events: readonly StoredEvent[]): SessionState {
  const session: SessionState = { exists: false, sequence: 0 };
  for (const e of events) {
    session.sequence = e.sequence;
    session.changeDate = e.createdAt;
    if (e.type === SessionEvent.added) {
      const p = e.payload as unknown as SessionAddedPayload;
      Object.assign(session, { exists: true, userId: p.user_id, orgId: p.org_id, tokenHash: p.token_hash });
    } else if (e.type === SessionEvent.terminated) {
      session.exists = false;
    }
  }
  return session;
}

/** Compares a presented session token with the stored hash in constant time. */
export function tokenMatches(session: SessionState, token: string): boolean {
  return session.tokenHash !== undefined && constantTimeEqual(sha256(token), session.tokenHash);
}

function sessionEvent(
  sessionId: string,
  orgId: string,
  type: string,
  payload: Record<string, unknown> | null,
) {
  return { aggregateType: SESSION, aggregateId: sessionId, resourceOwner: orgId, type, payload };
}

// ---------------------------------------------------------------------------------------------------------
// Commands

/**
 * Finds the user a user check names, in the read model: by ID, or by login name (`username`, or
 * `username@<primary domain of the user's org>`, case-insensitive; an exact username wins). NOT_FOUND
 * "user not found" otherwise.
 */
export async function findUser(db: Queryable, instanceId: string, check: UserCheck): Promise<CheckedUser> {
  let rows: { id: string; org_id: string }[];
  if ("userId" in check) {
    rows = await db.query("SELECT id, org_id FROM users WHERE instance_id = $1 AND id = $2", [
      instanceId,
      check.userId,
    ]);
  } else {
    const name = check.loginName;
    const at = name.lastIndexOf("@");
    rows = await db.query(
      `SELECT u.id, u.org_id FROM users u JOIN orgs o ON o.instance_id = u.instance_id AND o.id = u.org_id
       WHERE u.instance_id = $1
         AND (lower(u.username) = lower($2)
              OR (lower(u.username) = lower($3) AND o.primary_domain <> '' AND lower(o.primary_domain) = lower($4)))
       ORDER BY (lower(u.username) = lower($2)) DESC LIMIT 1`,
      [instanceId, name, at > 0 ? name.slice(0, at) : null, at > 0 ? name.slice(at + 1) : null],
    );
  }
  if (rows.length === 0) throw new NotFoundError("user not found");
  return { id: rows[0].id, orgId: rows[0].org_id };
}

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
  password?: string;
  /** Runs first in the transaction (e.g. loads the session and proves its token). */
  prepare?: (tx: CommandTx) => Promise<void>;
  /** The session events to append once every check passed. */
  sessionEvents: (user: UserForCheck) => NewEvent[];
}

/** The same facts as `foldUser`, from the users read model. */
export async function userForCheck(q: Queryable, instanceId: string, userId: string): Promise<UserForCheck> {
  const rows = await q.query<{
    type: number;
    state: number;
    org_id: string;
    password_hash: string | null;
    password_failed_attempts: number;
  }>(
    "SELECT type, state, org_id, password_hash, password_failed_attempts FROM users WHERE instance_id = $1 AND id = $2",
    [instanceId, userId],
  );
  const row = rows[0];
  if (!row) return { exists: false, state: UserState.active, failedAttempts: 0 };
  return {
    exists: true,
    type: row.type,
    state: row.state,
    orgId: row.org_id,
    passwordHash: row.password_hash ?? undefined,
    failedAttempts: row.password_failed_attempts,
  };
}

/**
 * Runs the checks of one command. The (slow) argon2 verification runs before the transaction against the
 * hash then current, and again inside only when the hash changed meanwhile. A wrong password commits the
 * failure (and lock) events alone, then throws INVALID_ARGUMENT "password is wrong".
 */
async function runChecks(
  store: EventStore,
  actor: PushContext,
  policy: PasswordPolicy,
  run: CheckRun,
): Promise<StoredEvent[]> {
  const verify = run.password === undefined ? undefined : passwordVerifier(run.password);
  if (verify) {
    const user = await userForCheck(store.db, actor.instanceId, run.userId);
    if (user.exists && user.state === UserState.active && user.type === UserType.human && user.passwordHash)
      await verify(user.passwordHash);
  }
  let wrongPassword = false;
  const stored = await store.push(actor, async (tx) => {
    wrongPassword = false;
    await run.prepare?.(tx);
    // A user who logs in often has a long history: decide from the read model (kept in step inside this
    // transaction), with the user's current sequence as the optimistic lock.
    await tx.expect(USER, run.userId);
    const user = await userForCheck(tx, actor.instanceId, run.userId);
    assertCheckable(user);
    const events: NewEvent[] = [];
    if (verify) {
      const passed = await verify(passwordHashOf(user));
      events.push(...passwordCheckEvents(run.userId, user, passed, policy));
      if (!passed) {
        wrongPassword = true;
        return events;
      }
    }
    events.push(...run.sessionEvents(user));
    return events;
  });
  if (wrongPassword) throw new InvalidArgumentError("password is wrong");
  return stored;
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
  input: { user: CheckedUser; password?: string; userAgentHash?: string; idpId?: string },
  policy: PasswordPolicy,
): Promise<SessionVersion & { token: string }> {
  const sessionId = newId();
  const token = randomToken();
  const { id: userId, orgId } = input.user;
  const stored = await runChecks(store, actor, policy, {
    userId,
    password: input.password,
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
  return { ...versionOf(sessionId, orgId, stored), token };
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
  input: { sessionId: string; token?: string; user?: CheckedUser; password?: string; idpId?: string },
  policy: PasswordPolicy,
): Promise<SessionVersion> {
  const { sessionId, token } = input;
  const before = await getSessionState(store, actor.instanceId, sessionId);
  if (token !== undefined) requireToken(before, token);
  const userId = before.userId!;
  const orgId = before.orgId!;
  if (input.user && input.user.id !== userId)
    throw new FailedPreconditionError("the user of a session cannot be changed");
  if (!input.user && input.password === undefined && input.idpId === undefined)
    return versionOf(sessionId, orgId, [], before);

  let current: SessionState = before;
  const stored = await runChecks(store, actor, policy, {
    userId,
    password: input.password,
    prepare: async (tx) => {
      current = await loadSession(tx, sessionId);
      if (token !== undefined) requireToken(current, token);
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
  return versionOf(sessionId, orgId, stored, current);
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
