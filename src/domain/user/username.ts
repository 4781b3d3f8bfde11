/**
 * The one comparison of usernames: `usernameKey` decides both uniqueness (the `username` unique
 * constraint) and lookup (login names, the sessions API, machine users as OAuth clients, search ignoring
 * case). It is computed here, in JavaScript, and stored (`users.username_key`, the constraint's value), so
 * the database never folds case itself: PostgreSQL's `lower()` depends on the database's locale and
 * disagrees with JavaScript (`İ`), which once let one value pass the constraint and fail the read model.
 */
import { createHash } from "node:crypto";
import { InvalidArgumentError } from "../../errors.ts";

/** The unique constraint type of usernames (one per instance). */
export const USERNAME_CONSTRAINT = "username";

/** Longest username, in characters, as typed and once normalized. */
export const USERNAME_MAX_LENGTH = 200;

const ignorable = /\p{Default_Ignorable_Code_Point}/gu;

/**
 * The comparison key of a username (NFKC_Casefold, as Unicode recommends for identifiers):
 * - invisible characters (default ignorables: zero-width space and joiners, soft hyphen ...) are dropped;
 * - NFKC: compatibility forms become their plain letters (fullwidth `ａｄｍｉｎ` → `admin`, `ﬁ` → `fi`);
 * - full case folding (`ADMIN`, `Straße`/`STRASSE`, `ΣΑΣ`/`σας` compare equal); JavaScript has no case
 *   fold, so lower → upper → lower gives it (ß → SS → ss), final sigma becomes σ; the Turkish dotted
 *   and dotless i fold to a plain i (`admİn`, `admın` → `admin`), so neither makes a look-alike account;
 * - NFKC again (case mapping can leave unnormalized sequences).
 * A key longer than USERNAME_MAX_LENGTH characters (a few compatibility characters expand to many) is
 * replaced by its SHA-256, so every key fits the database's indexes. Idempotent: key(key(x)) = key(x).
 */
export function usernameKey(username: string): string {
  const folded = fold(username);
  if ([...folded].length <= USERNAME_MAX_LENGTH) return folded;
  return `#sha256:${createHash("sha256").update(folded).digest("hex")}`;
}

function fold(username: string): string {
  return username
    .replace(ignorable, "")
    .normalize("NFKC")
    .toLowerCase()
    .toUpperCase()
    .toLowerCase()
    .replace(/ς/g, "σ")
    .replace(/i\u0307/g, "i")
    .normalize("NFKC");
}

/** Whether two usernames (or login names) are the same for sign-in and uniqueness. */
export function sameUsername(a: string, b: string): boolean {
  return usernameKey(a) === usernameKey(b);
}

/**
 * What is wrong with a new username, or undefined: empty, whitespace or control characters, longer than
 * USERNAME_MAX_LENGTH characters as typed or once normalized, or nothing visible left once invisible
 * characters are dropped.
 */
export function usernameProblem(
  username: string,
): "required" | "whitespace" | "control" | "too_long" | undefined {
  if (username === "") return "required";
  if (/\s/u.test(username)) return "whitespace";
  if (/[\p{Cc}\p{Cs}]/u.test(username)) return "control";
  if ([...username].length > USERNAME_MAX_LENGTH) return "too_long";
  const folded = fold(username);
  if ([...folded].length > USERNAME_MAX_LENGTH) return "too_long";
  if (folded === "") return "required";
  return undefined;
}

const problemText = {
  required: "must contain a visible character",
  whitespace: "must not contain whitespace",
  control: "must not contain control characters",
  too_long: `must have at most ${USERNAME_MAX_LENGTH} characters, also once normalized (NFKC)`,
} as const;

/** Throws INVALID_ARGUMENT naming `field` when the username cannot be used (see usernameProblem). */
export function checkUsername(username: string, field: string): void {
  const problem = usernameProblem(username);
  if (problem) throw new InvalidArgumentError(problemText[problem], field);
}

/** The username unique constraint to claim (`add`) or release (`remove`) for `username`. */
export function usernameConstraint(action: "add" | "remove", username: string) {
  const field = usernameKey(username);
  return action === "add"
    ? {
        action,
        type: USERNAME_CONSTRAINT,
        field,
        message: `username "${username}" is already taken`,
      }
    : { action, type: USERNAME_CONSTRAINT, field };
}
