/** Login settings (category `login`): what the login UI offers in a context. */
export const LOGIN = "login";

export interface LoginSettings {
  /** People may register themselves (`prompt=create`, "Create an account"). */
  allow_register: boolean;
}

/** The values in force where no context sets one (a new instance). */
export const loginDefaults: LoginSettings = { allow_register: true };
