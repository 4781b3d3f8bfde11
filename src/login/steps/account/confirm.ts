/**
 * The proof the account page asks for before it changes the e-mail address or the phone number: these
 * are where codes and messages for the account go, so a few seconds at a signed-in browser must not be
 * enough to take them (and with them the account) over.
 *
 * - A user with a password types the current one. It is checked as at sign-in, on the account's session
 *   (../../password.ts): a wrong one counts toward the same lockout, and every failure (wrong, locked
 *   out) gets one message; a right one counts as a fresh password check of the session.
 * - A user without a password (signed in through an identity provider or with a passkey) must have signed
 *   in on this session within the last `RECENT_SIGN_IN_SECONDS` (its last first factor: an identity
 *   provider, a passkey, or a password it no longer has), by the database's clock; else the page asks to
 *   sign in again first.
 */
import type { FastifyRequest } from "fastify";
import type { Login } from "../../login.ts";
import { checkPasswordForSignIn } from "../../password.ts";
import type { LoginSession } from "../../sessions.ts";
import type { UserAgent } from "../../user-agent.ts";

/** How recent the sign-in of a user without a password must be (5 minutes, as a sudo-mode window). */
export const RECENT_SIGN_IN_SECONDS = 300;

/** Why a change was not confirmed: a field error (the password field) or the form's error. */
export type Unconfirmed = { field: string; key: string } | { key: string };

/** Whether the user of `userId` has a password (decides which proof the form asks for). */
export async function hasPassword(login: Login, instanceId: string, userId: string): Promise<boolean> {
  const rows = await login.deps.db.query<{ has: boolean }>(
    "SELECT password_hash IS NOT NULL AS has FROM users WHERE instance_id = $1 AND id = $2",
    [instanceId, userId],
  );
  return rows[0]?.has === true;
}

/** Whether the session's last first factor (password, identity provider, passkey) is recent enough. */
export function signedInRecently(session: LoginSession, now: Date): boolean {
  const { password, idp, webauthn } = session.checks;
  const last = Math.max(password?.getTime() ?? 0, idp?.getTime() ?? 0, webauthn?.getTime() ?? 0);
  return last > 0 && now.getTime() - last <= RECENT_SIGN_IN_SECONDS * 1000;
}

/**
 * Checks the proof of a change by `account` (the browser's session): `password` as typed in the form's
 * field `passwordField`. Undefined when confirmed.
 */
export async function confirmChange(
  login: Login,
  request: FastifyRequest,
  input: { agent: UserAgent; account: LoginSession; password: string; passwordField: string },
): Promise<Unconfirmed | undefined> {
  const { agent, account, password, passwordField } = input;
  const instanceId = login.instanceId(request);
  if (await hasPassword(login, instanceId, account.userId)) {
    if (!password) return { field: passwordField, key: "field.required" };
    const checked = await checkPasswordForSignIn(login, {
      instanceId,
      user: { id: account.userId, orgId: account.orgId },
      password,
      sessionId: account.id,
      userAgentHash: agent.hash,
    });
    return checked ? undefined : { field: passwordField, key: "account.currentPasswordWrong" };
  }
  // the session as read for this post, with the database's clock of that read
  return signedInRecently(account, account.readAt ?? new Date()) ? undefined : { key: "account.signInAgain" };
}
