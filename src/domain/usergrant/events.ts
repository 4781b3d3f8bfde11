/**
 * The user grant aggregate: roles of one project given to one user, directly by the project's organization
 * or through a project grant by the granted organization (the event's resource owner is the giver).
 * Removing a user, a project, a role, a project grant or an organization appends the `cascade` events
 * below on every grant it touches, in the same push, so the history tells what happened to each grant.
 */
export const USER_GRANT = "user_grant";

export const UserGrantEvent = {
  added: "user_grant.added",
  /** New role keys, set through the API. */
  changed: "user_grant.changed",
  /** New role keys after a role was removed from the project or the project grant. */
  cascadeChanged: "user_grant.cascade.changed",
  removed: "user_grant.removed",
  /** Removed with its user, project, project grant or organization. */
  cascadeRemoved: "user_grant.cascade.removed",
} as const;

export interface UserGrantAddedPayload {
  user_id: string;
  project_id: string;
  project_grant_id?: string;
  role_keys: string[];
}

export interface UserGrantChangedPayload {
  role_keys: string[];
}

export interface UserGrantRemovedPayload {
  user_id: string;
  project_id: string;
  project_grant_id?: string;
  /** For cascades: what was removed ("user", "project", "project_grant", "org"). */
  reason?: string;
}

/** Unique-constraint name: one grant per user, project and project grant. */
export const USER_GRANT_CONSTRAINT = "user_grant";

export function userGrantKey(p: { user_id: string; project_id: string; project_grant_id?: string }): string {
  return `${p.project_id}:${p.project_grant_id ?? ""}:${p.user_id}`;
}
