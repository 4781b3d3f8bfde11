import { InvalidArgumentError } from "../../errors.ts";
import type { UserChangedPayload } from "./events.ts";

/** The profile members of a change (PatchUser's `human.profile`, the account page's profile form). */
export interface ProfilePatch {
  givenName?: string;
  familyName?: string;
  /** Empty removes it. */
  displayName?: string;
  /** Empty removes it. */
  nickName?: string;
  /** Two lowercase letters; empty removes it. */
  preferredLanguage?: string;
}

/**
 * The `user.changed` members of a profile patch (only the members given). INVALID_ARGUMENT naming
 * `<field>.preferred_language` for a language that is neither two lowercase letters nor empty. The users
 * API (PatchUser) and the login UI's account page both decide a profile change here.
 */
export function profileChange(p: ProfilePatch, field = "user.human.profile"): UserChangedPayload {
  const change: UserChangedPayload = {};
  if (p.givenName !== undefined) change.given_name = p.givenName;
  if (p.familyName !== undefined) change.family_name = p.familyName;
  if (p.displayName !== undefined) change.display_name = p.displayName || null;
  if (p.nickName !== undefined) change.nick_name = p.nickName || null;
  if (p.preferredLanguage !== undefined) {
    if (p.preferredLanguage !== "" && !/^[a-z]{2}$/.test(p.preferredLanguage))
      throw new InvalidArgumentError("must be two lowercase letters or empty", `${field}.preferred_language`);
    change.preferred_language = p.preferredLanguage || null;
  }
  return change;
}
