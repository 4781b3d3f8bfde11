import { InvalidArgumentError } from "../../errors.ts";

/**
 * The password complexity policy: at least `minLength` characters (PLATFORM_PASSWORD_MIN_LENGTH, 8 by
 * default) with at least one uppercase letter, one lowercase letter, one digit and one symbol (any
 * character that is neither a letter nor a digit). Throws INVALID_ARGUMENT naming `field`; the message
 * never contains the password.
 */
export function checkPasswordPolicy(password: string, minLength: number, field: string): void {
  const missing: string[] = [];
  if ([...password].length < minLength) missing.push(`at least ${minLength} characters`);
  if (!/\p{Lu}/u.test(password)) missing.push("an uppercase letter");
  if (!/\p{Ll}/u.test(password)) missing.push("a lowercase letter");
  if (!/\p{Nd}/u.test(password)) missing.push("a digit");
  if (!/[^\p{L}\p{N}]/u.test(password)) missing.push("a symbol");
  if (missing.length) {
    throw new InvalidArgumentError(`does not meet the password policy: needs ${missing.join(", ")}`, field);
  }
}
