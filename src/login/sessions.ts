/**
 * Browser sessions: the Platform sessions (src/domain/session) a user agent signed in with, and the
 * decision what an auth request needs next given those sessions (`nextStep`, pure).
 *
 * A session created by the login UI carries the SHA-256 of the browser's `platform_ua` cookie
 * (`session.added` → `sessions.user_agent_hash`), so the browser's sessions are a query on the sessions read
 * model: a session ended through the API, or whose user was removed, is gone here too. Only sessions of
 * active human users count.
 */
import { amrOf, type SessionChecks } from "../domain/session/amr.ts";
import { usernameKey } from "../domain/user/username.ts";
import type { FactorType } from "../query/user-factors.ts";
import type { Queryable } from "../storage/database.ts";
import type { AuthRequest } from "./auth-requests.ts";
import { freshEnough, latest, type SignInPolicy, secondFactorStep } from "./second-factor.ts";

export {
  allowedSecondFactors,
  mfaSetupForced,
  type SignInPolicy,
  secondFactorPassed,
  secondFactorStep,
} from "./second-factor.ts";

/** A signed-in session of a browser: what the login UI shows and what the protocol side needs. */
export interface LoginSession {
  /** Platform session ID (the ID token's `sid`). */
  id: string;
  userId: string;
  /** Organization of the user. */
  orgId: string;
  username: string;
  /** `username@<primary domain of the user's organization>` (the username when it has none). */
  loginName: string;
  displayName: string;
  email?: string;
  /**
   * Last authentication (password check, or sign-in with a linked identity provider): the ID token's
   * `auth_time`; undefined when the session was never authenticated.
   */
  authTime?: Date;
  /** Authentication methods (RFC 8176 `amr`, src/domain/session/amr.ts). */
  amr: string[];
  /** When each check of the session last passed (second factors included). */
  checks: SessionChecks;
  /** The kinds of the user's active second factors and passkeys (undefined: none). */
  factors?: FactorType[];
  /**
   * Those of `factors` the user had when the session began (the account page does not ask a session for
   * a factor it added itself).
   */
  priorFactors?: FactorType[];
  /** When the user last chose "Skip" on the prompt to register a second factor. */
  mfaInitSkippedAt?: Date;
  /** The last password check; undefined when the password was never checked in this session. */
  passwordCheckedAt?: Date;
  /**
   * The user's password was set with `change_required`: a sign-in with the password asks for a new one
   * before it completes.
   */
  passwordChangeRequired: boolean;
  createdAt: Date;
  /** Last check of the session (the account picker shows the most recent first). */
  changedAt: Date;
  /**
   * The database's clock when the session was read (check times are the database's): what `max_age` and
   * a required re-check compare with, without a `databaseNow` round trip of their own.
   */
  readAt?: Date;
}

interface SessionRow {
  id: string;
  read_at?: Date | string;
  user_id: string;
  org_id: string;
  password_checked_at: Date | null;
  idp_checked_at: Date | null;
  totp_checked_at: Date | null;
  otp_email_checked_at: Date | null;
  otp_sms_checked_at: Date | null;
  recovery_code_checked_at: Date | null;
  webauthn_checked_at: Date | null;
  webauthn_user_verified: boolean | null;
  webauthn_amr: string | null;
  created_at: Date;
  changed_at: Date;
  username: string;
  display_name: string | null;
  given_name: string | null;
  family_name: string | null;
  email: string | null;
  password_change_required: boolean;
  primary_domain: string | null;
  mfa_init_skipped_at: Date | string | null;
  factor_types: string[] | null;
  prior_factor_types: string[] | null;
  [key: string]: unknown;
}

const date = (value: Date | string) => (value instanceof Date ? value : new Date(value));

const optionalDate = (value: Date | string | null) => (value === null ? undefined : date(value));

/** The session's check times from its row. */
function checksOf(row: SessionRow): SessionChecks {
  return {
    password: optionalDate(row.password_checked_at),
    idp: optionalDate(row.idp_checked_at),
    totp: optionalDate(row.totp_checked_at),
    otpEmail: optionalDate(row.otp_email_checked_at),
    otpSms: optionalDate(row.otp_sms_checked_at),
    recoveryCode: optionalDate(row.recovery_code_checked_at),
    webauthn: optionalDate(row.webauthn_checked_at),
    webauthnUserVerified: row.webauthn_user_verified === true,
    webauthnAmr: row.webauthn_amr === "swk" ? "swk" : row.webauthn_amr === "hwk" ? "hwk" : undefined,
  };
}

function toLoginSession(row: SessionRow): LoginSession {
  const checks = checksOf(row);
  const displayName =
    row.display_name || [row.given_name, row.family_name].filter(Boolean).join(" ") || row.username;
  return {
    id: row.id,
    userId: row.user_id,
    orgId: row.org_id,
    username: row.username,
    loginName: row.primary_domain ? `${row.username}@${row.primary_domain}` : row.username,
    displayName,
    email: row.email ?? undefined,
    // the last authentication: a first factor (password, identity provider, a passkey) or a second one
    authTime: latest(
      checks.password,
      checks.idp,
      checks.webauthn,
      checks.totp,
      checks.otpEmail,
      checks.otpSms,
      checks.recoveryCode,
    ),
    amr: amrOf(checks),
    checks,
    factors: (row.factor_types ?? []) as FactorType[],
    priorFactors: (row.prior_factor_types ?? []) as FactorType[],
    mfaInitSkippedAt: optionalDate(row.mfa_init_skipped_at),
    passwordCheckedAt: row.password_checked_at ? date(row.password_checked_at) : undefined,
    passwordChangeRequired: row.password_change_required === true,
    createdAt: date(row.created_at),
    changedAt: date(row.changed_at),
    readAt: row.read_at === undefined ? undefined : date(row.read_at),
  };
}

/**
 * `session` as the sessions read model has it once a code factor (`totp`, `otpEmail`, `otpSms`,
 * `recoveryCode`) passed at `at` (the check's event time, the database's clock): the page that checked it
 * decides the next step from this, without reading the session again.
 */
export function withCodeCheck(
  session: LoginSession,
  factor: "totp" | "otpEmail" | "otpSms" | "recoveryCode",
  at: Date,
): LoginSession {
  const checks: SessionChecks = { ...session.checks, [factor]: at };
  return {
    ...session,
    checks,
    amr: amrOf(checks),
    authTime: latest(session.authTime, at),
    changedAt: at,
    readAt: at,
  };
}

const SELECT = `SELECT s.id, s.user_id, s.org_id, s.password_checked_at, s.idp_checked_at, s.created_at, s.changed_at,
    s.totp_checked_at, s.otp_email_checked_at, s.otp_sms_checked_at, s.recovery_code_checked_at,
    s.webauthn_checked_at, s.webauthn_user_verified, s.webauthn_amr,
    u.username, u.display_name, u.given_name, u.family_name, u.email, u.password_change_required, o.primary_domain,
    u.mfa_init_skipped_at,
    ARRAY(SELECT DISTINCT f.type FROM user_factors f
      WHERE f.instance_id = s.instance_id AND f.user_id = s.user_id AND f.state = 2) AS factor_types,
    ARRAY(SELECT DISTINCT f.type FROM user_factors f
      WHERE f.instance_id = s.instance_id AND f.user_id = s.user_id AND f.state = 2
        AND f.created_at <= s.created_at) AS prior_factor_types,
    now() AS read_at
  FROM sessions s
  JOIN users u ON u.instance_id = s.instance_id AND u.id = s.user_id AND u.type = 1 AND u.state = 1
  LEFT JOIN orgs o ON o.instance_id = s.instance_id AND o.id = s.org_id`;

/** The live sessions a user agent signed in with, most recently checked first. */
export async function sessionsOfUserAgentHash(
  db: Queryable,
  instanceId: string,
  userAgentHash: string,
): Promise<LoginSession[]> {
  const rows = await db.query<SessionRow>(
    `${SELECT} WHERE s.instance_id = $1 AND s.user_agent_hash = $2 ORDER BY s.changed_at DESC, s.id DESC`,
    [instanceId, userAgentHash],
  );
  return rows.map(toLoginSession);
}

/**
 * One live session by ID, of an active human user (e.g. for the token endpoint's `auth_time` and `amr`);
 * undefined when it ended.
 */
export async function findLoginSession(
  db: Queryable,
  instanceId: string,
  sessionId: string,
): Promise<LoginSession | undefined> {
  const rows = await db.query<SessionRow>(`${SELECT} WHERE s.instance_id = $1 AND s.id = $2`, [
    instanceId,
    sessionId,
  ]);
  return rows[0] ? toLoginSession(rows[0]) : undefined;
}

/**
 * The database's clock when `sessions` were read (their `readAt`), else now (session check times are the
 * database's).
 */
export async function sessionsNow(db: Queryable, sessions: LoginSession[]): Promise<Date> {
  return sessions.find((s) => s.readAt)?.readAt ?? databaseNow(db);
}

/** The database's clock (session check times are the database's). */
export async function databaseNow(db: Queryable): Promise<Date> {
  const rows = await db.query<{ now: Date }>("SELECT now() AS now");
  return date(rows[0].now);
}

/** What an auth request needs next, given the browser's sessions. */
export type LoginStep =
  /** The session may be used as it is: hand the request to the completer. */
  | { step: "complete"; session: LoginSession }
  /** This session's user must enter the password again (`prompt=login`, `max_age`, a change required). */
  | { step: "password"; session: LoginSession }
  /** This session's user checked the password during this request and must now choose a new one. */
  | { step: "password-change"; session: LoginSession }
  /** This session's user must pass a second factor (the choice page). */
  | { step: "mfa"; session: LoginSession }
  /** This session's user should register a second factor (forced: must). */
  | { step: "mfa-setup"; session: LoginSession }
  /** Ask for a login name (prefilled with `loginName`). */
  | { step: "loginname"; loginName?: string }
  /** Let the person pick one of `sessions` or use another account. */
  | { step: "select"; sessions: LoginSession[] }
  /** `prompt=create`: the registration form. */
  | { step: "register" };

/** What one chosen session may still need (`pendingStep`). */
export type PendingStep = "password" | "password-change" | "mfa" | "mfa-setup";

/** Whether `session` is signed in as `loginName` (username or login name, compared as usernames are). */
export function matchesLoginName(session: LoginSession, loginName: string): boolean {
  const name = usernameKey(loginName.trim());
  return usernameKey(session.username) === name || usernameKey(session.loginName) === name;
}

/** The last first factor of a session: the password, an identity provider, or a passkey. */
function firstFactorTime(session: LoginSession): Date | undefined {
  const { checks } = session;
  return latest(checks.password, checks.idp, checks.webauthn);
}

/**
 * Whether the session's first factor (password, identity provider or passkey) is recent enough for the
 * request: checked at all, after the request started when it says `prompt=login`, within `max_age`
 * seconds, and a password within the policy's `password_check_lifetime` — or during this request.
 */
export function needsPassword(
  request: AuthRequest,
  session: LoginSession,
  now: Date,
  policy?: SignInPolicy,
): boolean {
  const first = firstFactorTime(session);
  if (first === undefined) return true;
  if (!freshEnough(request, first, now)) return true;
  // the policy's lifetime applies to a sign-in that used the password
  const password = session.checks.password;
  if (policy && password && password.getTime() === first.getTime())
    return !freshEnough(request, password, now, policy.password_check_lifetime);
  return false;
}

/**
 * What one chosen session still needs before the request completes with it: the password (too old for
 * `prompt=login` / `max_age` / the policy's lifetime, or a password change is required and the password
 * was not checked during this request), a new password (`change_required`, right after the check), a
 * second factor or its registration (`secondFactorStep`, with the policy of the sign-in), or nothing. A
 * required change applies to sessions that signed in with the password; one signed in only through an
 * identity provider never used it.
 */
export function pendingStep(
  request: AuthRequest,
  session: LoginSession,
  now: Date,
  policy?: SignInPolicy,
): PendingStep | undefined {
  if (needsPassword(request, session, now, policy)) return "password";
  if (session.passwordChangeRequired && session.passwordCheckedAt) {
    // the new password is chosen only by someone who just proved the current one
    return session.passwordCheckedAt.getTime() >= request.createdAt.getTime()
      ? "password-change"
      : "password";
  }
  return policy ? secondFactorStep(request, session, now, policy) : undefined;
}

/**
 * The next step of an auth request. The sessions considered are those of the requested organization;
 * an id_token_hint narrows them to its session (or user), a login_hint to the sessions of that login name.
 *
 * - `prompt=create` (registration allowed) → register;
 * - `prompt=select_account` → the picker (the login-name page when no session qualifies);
 * - no session → the login-name page (prefilled with login_hint);
 * - several → the picker;
 * - one → complete, or the password first when `prompt=login` / `max_age` / the policy ask for a fresh
 *   check, a new password when the user's password must be changed, or the second factor or its
 *   registration (`pendingStep`, with `policyOf` the login policy of the session's sign-in).
 *
 * `prompt=none` maps this onto errors (`selectionFor`).
 */
export function nextStep(
  request: AuthRequest,
  sessions: readonly LoginSession[],
  options: { allowRegister: boolean; now: Date; policyOf?: (session: LoginSession) => SignInPolicy },
): LoginStep {
  if (request.prompt.includes("create") && options.allowRegister) return { step: "register" };
  let candidates = sessions.filter((s) => request.orgId === undefined || s.orgId === request.orgId);
  if (request.hintSessionId !== undefined || request.hintUserId !== undefined) {
    const bySession = candidates.filter((s) => s.id === request.hintSessionId);
    candidates = bySession.length ? bySession : candidates.filter((s) => s.userId === request.hintUserId);
  }
  const hint = request.loginHint;
  const hinted = hint ? candidates.filter((s) => matchesLoginName(s, hint)) : [];
  if (request.prompt.includes("select_account")) {
    if (candidates.length === 0) return { step: "loginname", loginName: hint };
    // the login_hint's sessions first: "preselects a user on select_account"
    return { step: "select", sessions: [...hinted, ...candidates.filter((s) => !hinted.includes(s))] };
  }
  if (hint) candidates = hinted;
  if (candidates.length === 0) return { step: "loginname", loginName: hint };
  if (candidates.length > 1) return { step: "select", sessions: candidates };
  const [session] = candidates;
  const pending = pendingStep(request, session, options.now, options.policyOf?.(session));
  return pending ? { step: pending, session } : { step: "complete", session };
}

/** What `prompt=none` (or the protocol side deciding without the UI) gets for an auth request. */
export type SessionSelection =
  /** Usable without interaction. */
  | { result: "session"; session: LoginSession }
  /**
   * No usable session, or its password or second factor must be checked again: OAuth error
   * `login_required`.
   */
  | { result: "login_required" }
  /**
   * Several sessions to choose from, a registration, a password change or the registration of a second
   * factor: OAuth error `interaction_required`.
   */
  | { result: "interaction_required" };

export function selectionFor(step: LoginStep): SessionSelection {
  switch (step.step) {
    case "complete":
      return { result: "session", session: step.session };
    case "password":
    case "mfa":
    case "loginname":
      return { result: "login_required" };
    default:
      return { result: "interaction_required" };
  }
}
