/** Login settings (category `login`): what the login UI offers and reveals in a context. */
export const LOGIN = "login";

export interface LoginSettings {
  /** People may register themselves (`prompt=create`, "Create an account"). */
  allow_register: boolean;
  /** The login UI hides "Forgot password?" (the link comes with the password reset and honours it). */
  hide_password_reset: boolean;
  /**
   * The login UI hides that a login name is unknown: any name leads to the password page, which answers
   * an unknown one like a wrong password. Off: the login-name page says so (ZITADEL's default; ours is on,
   * so that the login does not tell which names exist unless an administrator chooses to).
   */
  ignore_unknown_usernames: boolean;
}

/** The values in force where no context sets one (a new instance): ZITADEL's, but ignore_unknown_usernames. */
export const loginDefaults: LoginSettings = {
  allow_register: true,
  hide_password_reset: false,
  ignore_unknown_usernames: true,
};

/** The boolean login settings, as named in the settings events and the API. */
export const LOGIN_FLAGS = ["allow_register", "hide_password_reset", "ignore_unknown_usernames"] as const;
