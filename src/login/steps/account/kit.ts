/**
 * What the account page's forms share (./index.ts serves the page): the account a form acts on, and the
 * outcome of a post carried to the page it redirects to.
 *
 * The account is always one of the browser's live sessions, found by its `platform_ua` cookie: a form
 * names the session it was shown for (the page's chosen account), never a user, and a session that ended
 * or whose user was locked, deactivated or removed is not among them, so its post is refused (403).
 *
 * Post/redirect/get without an auth request to keep `ui_state` on: the outcome (a notice, or the form's
 * errors and the values typed, never a password) travels in a short-lived HttpOnly cookie that the next
 * GET / reads once and clears. It only ever goes back to the browser that typed the values.
 */
import type { FastifyReply, FastifyRequest } from "fastify";
import type { LoginSession } from "../../sessions.ts";
import { readUserAgent, type UserAgent } from "../../user-agent.ts";
import { type Body, field, type StepKit } from "../kit.ts";

/** The forms of the account page. */
export type AccountForm =
  | "profile"
  | "data"
  | "email"
  | "phone"
  | "password"
  | "links"
  | "passkeys"
  | "sessions"
  | "otp";

/** What a post leaves for the page after its redirect. */
export interface AccountOutcome {
  /** The session the post acted on (the page shows the outcome only for that account). */
  session: string;
  form: AccountForm;
  /** A success message key (shown with role="status"). */
  notice?: string;
  /** An error message key for the form (role="alert"). */
  error?: string;
  /** Field name → message key. */
  fieldErrors?: Record<string, string>;
  /** The values typed (no passwords), shown again with the errors. */
  values?: Record<string, string>;
}

const OUTCOME_COOKIE = "platform_account_form";
/** Long enough for the redirect, short enough not to linger. */
const OUTCOME_MAX_AGE_SECONDS = 120;
/** Browsers keep cookies up to about 4 KB: beyond this the values typed are left out (errors stay). */
const OUTCOME_MAX_BYTES = 3000;

function cookieOptions(request: FastifyRequest, externalSecure: boolean) {
  return {
    path: "/",
    httpOnly: true,
    sameSite: "lax" as const,
    secure: externalSecure || request.protocol === "https",
  };
}

/** The page of an account: `/`, with the chosen session when it is not the browser's most recent one. */
export function accountUrl(sessionId?: string): string {
  return sessionId ? `/?account=${encodeURIComponent(sessionId)}` : "/";
}

/** The account a post acts on, the CSRF token checked. */
export interface AccountPost {
  agent: UserAgent;
  account: LoginSession;
  body: Body;
}

/**
 * Checks a form post of the account page: the CSRF token, then the session it names among the browser's
 * live sessions. Answers the 403 page (and undefined) otherwise.
 */
export async function accountPost(
  kit: StepKit,
  request: FastifyRequest,
  reply: FastifyReply,
): Promise<AccountPost | undefined> {
  const agent = await kit.checkForm(request, reply);
  if (!agent) return undefined;
  const body = request.body as Body;
  const sessionId = field(body, "session");
  const account = sessionId
    ? (await kit.login.accountSessionsOfUserAgent(request)).find((s) => s.id === sessionId)
    : undefined;
  if (!account) {
    await kit.sendMessage(request, reply, {
      status: 403,
      title: "account.title",
      message: "account.sessionEnded",
      link: { url: "/ui/login/loginname", text: "signedout.signIn" },
    });
    return undefined;
  }
  return { agent, account, body };
}

/** Redirects (303) to the account page with `outcome` for its next GET. */
export function redirectWithOutcome(
  kit: StepKit,
  request: FastifyRequest,
  reply: FastifyReply,
  outcome: AccountOutcome,
): FastifyReply {
  let value = Buffer.from(JSON.stringify(outcome)).toString("base64url");
  if (value.length > OUTCOME_MAX_BYTES)
    value = Buffer.from(JSON.stringify({ ...outcome, values: undefined })).toString("base64url");
  reply.setCookie(OUTCOME_COOKIE, value, {
    ...cookieOptions(request, kit.login.deps.config.externalSecure),
    maxAge: OUTCOME_MAX_AGE_SECONDS,
  });
  return reply.redirect(accountUrl(outcome.session), 303);
}

/** The outcome a post left for `sessionId`, read once (the cookie is cleared). */
export function takeOutcome(
  request: FastifyRequest,
  reply: FastifyReply,
  sessionId: string,
  externalSecure: boolean,
): AccountOutcome | undefined {
  const value = request.cookies?.[OUTCOME_COOKIE];
  if (value === undefined) return undefined;
  reply.clearCookie(OUTCOME_COOKIE, cookieOptions(request, externalSecure));
  // only this browser's cookie, and only meant for its pages: anything unreadable is ignored
  if (!readUserAgent(request)) return undefined;
  try {
    const outcome = JSON.parse(Buffer.from(value, "base64url").toString("utf8")) as AccountOutcome;
    return outcome && typeof outcome === "object" && outcome.session === sessionId ? outcome : undefined;
  } catch {
    return undefined;
  }
}
