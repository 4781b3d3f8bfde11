/**
 * The page on which a person confirms a sign-out an application asked for (the end-session endpoint,
 * docs/oidc.md "End session"). The account page's sign-out and the signed-out page are the login UI's
 * step ./steps/signout.ts.
 *
 * The confirmation exists because any web page can send a browser to the end-session endpoint: unless the
 * request carries an ID token of one of the browser's sessions, the person is asked first (OpenID Connect
 * RP-Initiated Logout 1.0 §2). The protocol side renders the page at its own address with
 * `sendLogoutConfirmation`; its form posts the request's parameters back there together with the
 * browser's CSRF token (./user-agent.ts), which only a page of ours shown to this browser carries, and the
 * protocol side checks it with `logoutConfirmed` before it ends anything. The page is framed by no one
 * (`frame-ancestors 'none'`), so the button cannot be clicked through another site either.
 */
import type { FastifyReply, FastifyRequest } from "fastify";
import type { Login } from "./login.ts";
import { initials, sendPage } from "./render.ts";
import { csrfToken, csrfValid, readUserAgent } from "./user-agent.ts";

/** The form field of the confirmation that carries the browser's CSRF token. */
export const LOGOUT_CONFIRMATION_FIELD = "csrf";

/** What the protocol side tells the confirmation page. */
export interface LogoutConfirmation {
  /** Where the form posts: the end-session endpoint. */
  action: string;
  /** The end-session request's parameters, posted back with the confirmation. */
  fields: Record<string, string>;
  /** The browser's sessions that end when the person confirms (their accounts are listed). */
  sessionIds: string[];
  /**
   * The application's post-logout redirect URI (with `state`) the browser goes to after signing out, if
   * the request named a registered one. Cancel leads there too (the application already signed the
   * person out on its side), else to the account page.
   */
  redirectTo?: string;
  /** ui_locales of the request. */
  uiLocales: string[];
}

/** "Sign out of <instance>?" with the accounts that end, Sign out (a form post) and Cancel (a link). */
export async function sendLogoutConfirmation(
  login: Login,
  request: FastifyRequest,
  reply: FastifyReply,
  confirmation: LogoutConfirmation,
): Promise<FastifyReply> {
  const agent = login.userAgent(request, reply);
  const context = {
    ...(await login.pageContext(request, { uiLocales: confirmation.uiLocales, csrf: csrfToken(agent) })),
    // browsers apply form-action to the redirect that follows the post, too
    formTargets: confirmation.redirectTo ? [confirmation.redirectTo] : [],
  };
  const { t } = context.translator;
  const accounts = (await login.sessionsOfUserAgent(request))
    .filter((s) => confirmation.sessionIds.includes(s.id))
    .map((s) => ({
      displayName: s.displayName,
      loginName: context.branding?.hideLoginNameSuffix ? s.username : s.loginName,
      initials: initials(s.displayName || s.loginName),
    }));
  return sendPage(reply, context, "logout", {
    title: t("logout.title", { instance: context.instanceName }),
    action: confirmation.action,
    fields: confirmation.fields,
    accounts,
    cancelUrl: confirmation.redirectTo ?? "/",
  });
}

/**
 * Whether a confirmation's token is the CSRF token of the request's browser (constant time): the person
 * confirmed on our page, not another site posting in their name.
 */
export function logoutConfirmed(request: FastifyRequest, token: string | undefined): boolean {
  return csrfValid(readUserAgent(request), token);
}

/** The page for a confirmation whose token is not this browser's (403): nothing was ended. */
export async function sendLogoutRefused(
  login: Login,
  request: FastifyRequest,
  reply: FastifyReply,
  uiLocales: string[],
): Promise<FastifyReply> {
  const context = await login.pageContext(request, { uiLocales });
  const { t } = context.translator;
  return sendPage(
    reply,
    context,
    "templates/message",
    {
      title: t("error.signOutTitle"),
      message: t("error.csrf"),
      alert: true,
      linkUrl: "/",
      linkText: t("error.toAccount"),
    },
    { status: 403 },
  );
}
