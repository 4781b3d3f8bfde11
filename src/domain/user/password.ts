import { InvalidArgumentError } from "../../errors.ts";

/** One rule of the password complexity policy. */
export type PasswordRequirement = "length" | "uppercase" | "lowercase" | "digit" | "symbol";

/** Every rule, in the order they are shown and named. */
export const passwordRequirements: readonly PasswordRequirement[] = [
  "length",
  "uppercase",
  "lowercase",
  "digit",
  "symbol",
];

/** The rules `password` does not meet (empty when it meets the policy). */
export function passwordPolicyGaps(password: string, minLength: number): PasswordRequirement[] {
  const gaps: PasswordRequirement[] = [];
  if ([...password].length < minLength) gaps.push("length");
  if (!/\p{Lu}/u.test(password)) gaps.push("uppercase");
  if (!/\p{Ll}/u.test(password)) gaps.push("lowercase");
  if (!/\p{Nd}/u.test(password)) gaps.push("digit");
  if (!/[^\p{L}\p{N}]/u.test(password)) gaps.push("symbol");
  return gaps;
}

/**
 * The password complexity policy: at least `minLength` characters (PLATFORM_PASSWORD_MIN_LENGTH, 8 by
 * default) with at least one uppercase letter, one lowercase letter, one digit and one symbol (any
 * character that is neither a letter nor a digit). Throws INVALID_ARGUMENT naming `field`; the message
 * never contains the password.
 */
export function checkPasswordPolicy(password: string, minLength: number, field: string): void {
  const describe: Record<PasswordRequirement, string> = {
    length: `at least ${minLength} characters`,
    uppercase: "an uppercase letter",
    lowercase: "a lowercase letter",
    digit: "a digit",
    symbol: "a symbol",
  };
  const missing = passwordPolicyGaps(password, minLength).map((gap) => describe[gap]);
  if (missing.length) {
    throw new InvalidArgumentError(`does not meet the password policy: needs ${missing.join(", ")}`, field);
  }
}
