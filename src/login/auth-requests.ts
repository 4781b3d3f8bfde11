/**
 * The auth request store: OIDC authorization requests while a person signs in.
 *
 * The authorization endpoint (protocol side, src/oidc) validates the request and calls `create` with the
 * validated parameters, then sends the browser to `loginUrl(id)` (`/ui/login?authRequest=<id>`). The login
 * UI reads the request, remembers the login name typed and the session chosen, and once a session
 * authenticated it, `finish` marks it done (once) and hands it to the AuthRequestCompleter
 * (./completer.ts), which answers the client.
 *
 * Requests live 10 minutes (`AUTH_REQUEST_LIFETIME_MS`): afterwards `get` no longer finds them, and rows
 * expired for a day are deleted by later `create` calls. They are not event-sourced: they are short-lived
 * working state of a login, and what matters for the history (sessions, password checks, tokens) is
 * recorded by the domains that own it. The protocol side must copy what the token endpoint needs (nonce,
 * code challenge, scope, redirect URI, session) into its code when it issues one: the row may be gone.
 */
import { randomToken } from "../crypto/tokens.ts";
import type { Queryable } from "../storage/database.ts";

export const AUTH_REQUEST_LIFETIME_MS = 10 * 60 * 1000;
/** Expired rows are kept this long (so a late click still finds "expired" rather than "unknown"). */
const DELETE_AFTER_EXPIRY_MS = 24 * 60 * 60 * 1000;
/** At most one clean-up per process in this interval. */
const CLEANUP_INTERVAL_MS = 60 * 1000;

/** OIDC `prompt` values. */
export type Prompt = "none" | "login" | "consent" | "select_account" | "create";

/** The validated parameters of an authorization request (what the authorization endpoint stores). */
export interface AuthRequestInput {
  instanceId: string;
  /** The client (application) ID; "" for the login UI's own sign-ins (GET / account page). */
  clientId: string;
  /** Exactly as in the request (the code exchange compares it). */
  redirectUri: string;
  /** `code`, `id_token` or `id_token token`. */
  responseType: string;
  /** `query`, `fragment` or `form_post`; undefined: the response type's default. */
  responseMode?: string;
  scope: string[];
  state?: string;
  nonce?: string;
  /** PKCE (`code_challenge_method` is always S256). */
  codeChallenge?: { challenge: string; method: "S256" };
  prompt?: Prompt[];
  /** Prefills the login name; preselects its session. */
  loginHint?: string;
  /** Seconds since the last password check a session may be used without asking again. */
  maxAge?: number;
  /** `ui_locales`, in order of preference (e.g. ["de-CH", "de", "en"]). */
  uiLocales?: string[];
  /** `acr_values` this server supports, in order (e.g. ["urn:platform:acr:mfa"]: a second factor is needed). */
  acrValues?: string[];
  /** The requested organization (scope `urn:platform:iam:org:id:<id>`): only its users can sign in. */
  orgId?: string;
  /** From a verified id_token_hint: its `sid` (session ID) and `sub` (user ID). */
  hintSessionId?: string;
  hintUserId?: string;
  /**
   * The user agent (browser) the request belongs to (`Login.userAgent(request, reply).hash`); when
   * undefined, the first browser that opens the login UI for it claims it.
   */
  userAgentHash?: string;
}

/** Form state kept between a POST and the page it redirects to (never a password). */
export interface UiState {
  /** The page the state is for (`loginname`, `password`, `register`). */
  page?: string;
  /** Message key of the error to show (see src/login/locales/en.json, `error.*`). */
  error?: string;
  /** Values typed into the form, to fill it again. */
  values?: Record<string, string>;
  /** Per-field error message keys. */
  fieldErrors?: Record<string, string>;
  /** The open passkey sign-in challenge of this request (steps/passkey/sign-in.ts), whatever the page. */
  passkey?: { challenge: string; rpId: string; origins: string[]; createdAt: string };
}

export interface AuthRequest extends Required<Pick<AuthRequestInput, "prompt" | "uiLocales" | "acrValues">> {
  id: string;
  instanceId: string;
  clientId: string;
  redirectUri: string;
  responseType: string;
  responseMode?: string;
  scope: string[];
  state?: string;
  nonce?: string;
  codeChallenge?: { challenge: string; method: "S256" };
  loginHint?: string;
  maxAge?: number;
  orgId?: string;
  hintSessionId?: string;
  hintUserId?: string;
  userAgentHash?: string;
  /** What the person typed on the login-name page. */
  loginName?: string;
  /** The session chosen for the request (attached by the UI). */
  sessionId?: string;
  uiState: UiState;
  createdAt: Date;
  expiresAt: Date;
  /** Set once the request was handed to the completer. */
  doneAt?: Date;
}

interface AuthRequestRow {
  instance_id: string;
  id: string;
  client_id: string;
  redirect_uri: string;
  response_type: string;
  response_mode: string | null;
  scope: string[];
  state: string | null;
  nonce: string | null;
  code_challenge: string | null;
  code_challenge_method: string | null;
  prompt: string[];
  login_hint: string | null;
  max_age: number | null;
  ui_locales: string[];
  acr_values?: string[] | null;
  org_id: string | null;
  hint_session_id: string | null;
  hint_user_id: string | null;
  user_agent_hash: string | null;
  login_name: string | null;
  session_id: string | null;
  ui_state: UiState | string | null;
  created_at: Date;
  expires_at: Date;
  done_at: Date | null;
  [key: string]: unknown;
}

const opt = <T>(value: T | null): T | undefined => (value === null ? undefined : value);
const date = (value: Date | string) => (value instanceof Date ? value : new Date(value));

function toAuthRequest(row: AuthRequestRow): AuthRequest {
  const uiState = typeof row.ui_state === "string" ? JSON.parse(row.ui_state) : (row.ui_state ?? {});
  return {
    id: row.id,
    instanceId: row.instance_id,
    clientId: row.client_id,
    redirectUri: row.redirect_uri,
    responseType: row.response_type,
    responseMode: opt(row.response_mode),
    scope: row.scope,
    state: opt(row.state),
    nonce: opt(row.nonce),
    codeChallenge: row.code_challenge
      ? { challenge: row.code_challenge, method: (row.code_challenge_method ?? "S256") as "S256" }
      : undefined,
    prompt: row.prompt as Prompt[],
    loginHint: opt(row.login_hint),
    maxAge: opt(row.max_age) === undefined ? undefined : Number(row.max_age),
    uiLocales: row.ui_locales,
    acrValues: row.acr_values ?? [],
    orgId: opt(row.org_id),
    hintSessionId: opt(row.hint_session_id),
    hintUserId: opt(row.hint_user_id),
    userAgentHash: opt(row.user_agent_hash),
    loginName: opt(row.login_name),
    sessionId: opt(row.session_id),
    uiState,
    createdAt: date(row.created_at),
    expiresAt: date(row.expires_at),
    doneAt: row.done_at ? date(row.done_at) : undefined,
  };
}

/** The organization a scope asks for (`urn:platform:iam:org:id:<id>`), if any. */
export function requestedOrgOf(scope: readonly string[]): string | undefined {
  const prefix = "urn:platform:iam:org:id:";
  return scope.find((s) => s.startsWith(prefix) && s.length > prefix.length)?.slice(prefix.length);
}

/** The address of the login UI for an auth request (relative to the instance's origin). */
export function loginUrl(authRequestId: string): string {
  return `/ui/login?authRequest=${encodeURIComponent(authRequestId)}`;
}

/** Reads and writes auth requests (table `auth_requests`, migration 0020). */
export class AuthRequestStore {
  private lastCleanup = 0;

  constructor(
    private readonly db: Queryable,
    private readonly lifetimeMs = AUTH_REQUEST_LIFETIME_MS,
  ) {}

  /** Stores a new request (valid for 10 minutes) and answers it. */
  async create(input: AuthRequestInput): Promise<AuthRequest> {
    await this.cleanup();
    // The database's clock, as the events' (a session's password check is compared with created_at).
    const rows = await this.db.query<AuthRequestRow>(
      `INSERT INTO auth_requests (instance_id, id, client_id, redirect_uri, response_type, response_mode, scope,
         state, nonce, code_challenge, code_challenge_method, prompt, login_hint, max_age, ui_locales, org_id,
         hint_session_id, hint_user_id, user_agent_hash, acr_values, created_at, expires_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $21,
         now(), now() + $20::integer * interval '1 millisecond')
       RETURNING *`,
      [
        input.instanceId,
        // random, not a snowflake: an unbound request cannot be guessed and claimed by another browser
        randomToken(16),
        input.clientId,
        input.redirectUri,
        input.responseType,
        input.responseMode ?? null,
        input.scope,
        input.state ?? null,
        input.nonce ?? null,
        input.codeChallenge?.challenge ?? null,
        input.codeChallenge?.method ?? null,
        input.prompt ?? [],
        input.loginHint ?? null,
        input.maxAge ?? null,
        input.uiLocales ?? [],
        input.orgId ?? null,
        input.hintSessionId ?? null,
        input.hintUserId ?? null,
        input.userAgentHash ?? null,
        this.lifetimeMs,
        input.acrValues ?? [],
      ],
    );
    return toAuthRequest(rows[0]);
  }

  /**
   * The request, also when expired or done (`expired` / `doneAt` say so); undefined when unknown.
   * `expired` is decided by the database's clock.
   */
  async find(instanceId: string, id: string): Promise<(AuthRequest & { expired: boolean }) | undefined> {
    if (!/^[A-Za-z0-9_-]{1,64}$/.test(id)) return undefined;
    const rows = await this.db.query<AuthRequestRow & { expired: boolean }>(
      "SELECT *, expires_at <= now() AS expired FROM auth_requests WHERE instance_id = $1 AND id = $2",
      [instanceId, id],
    );
    return rows[0] ? { ...toAuthRequest(rows[0]), expired: rows[0].expired === true } : undefined;
  }

  /**
   * `find` and `claim` in one statement: the request as `find` answers it and, when it was unclaimed and
   * still usable, bound to `userAgentHash` by the same statement (`userAgentHash` then set). A request
   * still unclaimed in the answer while usable was claimed concurrently: `claim` decides.
   */
  async findClaiming(
    instanceId: string,
    id: string,
    userAgentHash: string,
  ): Promise<(AuthRequest & { expired: boolean }) | undefined> {
    if (!/^[A-Za-z0-9_-]{1,64}$/.test(id)) return undefined;
    // the SELECT reads the row as it was before the CTE's UPDATE (one snapshot): `claimed` tells
    const rows = await this.db.query<AuthRequestRow & { expired: boolean; claimed: boolean }>(
      `WITH claimed AS (
         UPDATE auth_requests SET user_agent_hash = $3
         WHERE instance_id = $1 AND id = $2 AND user_agent_hash IS NULL AND done_at IS NULL AND expires_at > now()
         RETURNING id)
       SELECT r.*, r.expires_at <= now() AS expired, EXISTS (SELECT 1 FROM claimed) AS claimed
       FROM auth_requests r WHERE r.instance_id = $1 AND r.id = $2`,
      [instanceId, id, userAgentHash],
    );
    if (!rows[0]) return undefined;
    const found = { ...toAuthRequest(rows[0]), expired: rows[0].expired === true };
    if (rows[0].claimed === true) found.userAgentHash = userAgentHash;
    return found;
  }

  /**
   * The login name typed on the login-name page, in one statement: stored (the session chosen before and
   * the page's error state cleared) when the request is usable and already bound to `userAgentHash`.
   * Answers the request's ID and organization, or undefined when that does not hold (the caller then loads the request and
   * answers as for any page: unknown, done, expired, another browser's, or claims it).
   */
  async setLoginNameOfClaimed(
    instanceId: string,
    id: string,
    userAgentHash: string,
    loginName: string,
  ): Promise<{ id: string; orgId?: string } | undefined> {
    if (!/^[A-Za-z0-9_-]{1,64}$/.test(id)) return undefined;
    const rows = await this.db.query<{ id: string; org_id: string | null }>(
      `UPDATE auth_requests SET login_name = $4, session_id = NULL, ui_state = '{}'
       WHERE instance_id = $1 AND id = $2 AND user_agent_hash = $3 AND done_at IS NULL AND expires_at > now()
       RETURNING id, org_id`,
      [instanceId, id, userAgentHash, loginName],
    );
    return rows[0] && { id: rows[0].id, orgId: opt(rows[0].org_id) };
  }

  /** Binds an unclaimed request to a user agent; false when another user agent holds it already. */
  async claim(request: AuthRequest, userAgentHash: string): Promise<boolean> {
    if (request.userAgentHash !== undefined) return request.userAgentHash === userAgentHash;
    const rows = await this.db.query(
      `UPDATE auth_requests SET user_agent_hash = $3
       WHERE instance_id = $1 AND id = $2 AND (user_agent_hash IS NULL OR user_agent_hash = $3) RETURNING id`,
      [request.instanceId, request.id, userAgentHash],
    );
    if (rows.length === 0) return false;
    request.userAgentHash = userAgentHash;
    return true;
  }

  /** Remembers the login name typed (and clears the session chosen before, which was someone else's). */
  async setLoginName(request: AuthRequest, loginName: string): Promise<void> {
    await this.update(request, "login_name = $3, session_id = NULL", [loginName]);
    request.loginName = loginName;
    request.sessionId = undefined;
  }

  /**
   * Attaches the session chosen for the request (picker, re-authentication, after a password check);
   * `clearUiState`: the page's error state goes in the same statement.
   */
  async attachSession(
    request: AuthRequest,
    sessionId: string,
    options?: { clearUiState?: boolean },
  ): Promise<void> {
    if (options?.clearUiState) {
      await this.update(request, "session_id = $3, ui_state = '{}'", [sessionId]);
      request.uiState = {};
    } else await this.update(request, "session_id = $3", [sessionId]);
    request.sessionId = sessionId;
  }

  /** Keeps the error and form values to show on the next page (never pass passwords here). */
  async setUiState(request: AuthRequest, state: UiState): Promise<void> {
    const empty = (s: UiState) => Object.keys(s).length === 0;
    if (empty(state) && empty(request.uiState)) return; // nothing to clear: no write
    await this.update(request, "ui_state = $3", [JSON.stringify(state)]);
    request.uiState = state;
  }

  /**
   * Marks the request done with `sessionId`, once: undefined when it was done already or expired (a
   * second tab, a double submit, the back button), so a request is handed to the completer at most once.
   */
  async finish(request: AuthRequest, sessionId: string): Promise<AuthRequest | undefined> {
    const rows = await this.db.query<AuthRequestRow>(
      `UPDATE auth_requests SET session_id = $3, done_at = now(), ui_state = '{}'
       WHERE instance_id = $1 AND id = $2 AND done_at IS NULL AND expires_at > now() RETURNING *`,
      [request.instanceId, request.id, sessionId],
    );
    return rows[0] ? toAuthRequest(rows[0]) : undefined;
  }

  private async update(request: AuthRequest, set: string, values: unknown[]): Promise<void> {
    await this.db.query(
      `UPDATE auth_requests SET ${set} WHERE instance_id = $1 AND id = $2 AND done_at IS NULL`,
      [request.instanceId, request.id, ...values],
    );
  }

  /** Deletes requests expired for a day, at most once a minute per process. */
  private async cleanup(): Promise<void> {
    const now = Date.now();
    if (now - this.lastCleanup < CLEANUP_INTERVAL_MS) return;
    this.lastCleanup = now;
    await this.db.query(
      "DELETE FROM auth_requests WHERE expires_at < now() - $1::integer * interval '1 millisecond'",
      [DELETE_AFTER_EXPIRY_MS],
    );
  }
}
