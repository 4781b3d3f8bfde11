/**
 * The links the messages carry into the login UI, on the instance's own origin. The pages they open belong
 * to the login UI (one step each, src/login/steps/); these builders are the one place their paths and
 * query parameters are spelled, so the messages and the pages agree:
 *
 *   INIT            /ui/login/invite?userID=<id>&code=<code>          set a first password
 *   VERIFY_EMAIL    /ui/login/verify-email?userID=<id>&code=<code>    confirm the e-mail address
 *   PASSWORD_RESET  /ui/login/password-reset?userID=<id>&code=<code>  choose a new password
 *   PASSWORD_CHANGED /ui/login/loginname                              sign in (no code)
 *   EMAIL_CHANGED   /ui/login/loginname                               sign in (no code)
 *
 * Flat step names with a hyphen, like the existing `password-change`. A link carries the user's ID (no
 * secret: it names whose code to check) and the one-time code, nothing else: no login name, no e-mail
 * address, no auth request.
 */

export const LOGIN_PATHS = {
  invite: "/ui/login/invite",
  verifyEmail: "/ui/login/verify-email",
  passwordReset: "/ui/login/password-reset",
  signIn: "/ui/login/loginname",
} as const;

/** The query parameters of a code link. */
export const LINK_PARAMS = { userId: "userID", code: "code" } as const;

/**
 * `origin` checked to be an http(s) origin and nothing more (`https://id.example.com`, no path, query or
 * trailing slash): a message must never link elsewhere, nor through another scheme.
 */
export function checkedOrigin(origin: string): string {
  let url: URL;
  try {
    url = new URL(origin);
  } catch {
    throw new Error(`messages: origin "${origin}" is not a URL`);
  }
  if ((url.protocol !== "https:" && url.protocol !== "http:") || url.origin !== origin) {
    throw new Error(`messages: "${origin}" is not an http(s) origin`);
  }
  return url.origin;
}

function codeLink(path: string, origin: string, userId: string, code: string): string {
  if (!userId || !code) throw new Error("messages: a code link needs the user's ID and the code");
  const query = `${LINK_PARAMS.userId}=${encodeURIComponent(userId)}&${LINK_PARAMS.code}=${encodeURIComponent(code)}`;
  return `${checkedOrigin(origin)}${path}?${query}`;
}

export const inviteUrl = (origin: string, userId: string, code: string) =>
  codeLink(LOGIN_PATHS.invite, origin, userId, code);

export const verifyEmailUrl = (origin: string, userId: string, code: string) =>
  codeLink(LOGIN_PATHS.verifyEmail, origin, userId, code);

export const passwordResetUrl = (origin: string, userId: string, code: string) =>
  codeLink(LOGIN_PATHS.passwordReset, origin, userId, code);

export const signInUrl = (origin: string) => `${checkedOrigin(origin)}${LOGIN_PATHS.signIn}`;
