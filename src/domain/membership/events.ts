export const MEMBERSHIP = "membership";

export const MembershipEvent = {
  added: "membership.added",
  changed: "membership.changed",
  removed: "membership.removed",
} as const;

/** OwnerType numbers of the API, plus projects. */
export const ContextType = { instance: 2, org: 3, project: 4 } as const;
export type ContextType = (typeof ContextType)[keyof typeof ContextType];

export interface MembershipAddedPayload {
  context_type: ContextType;
  context_id: string;
  user_id: string;
  roles: string[];
}

/** `membership.changed`: the new roles; user and context let caches drop the right entry. */
export interface MembershipChangedPayload {
  context_type: ContextType;
  context_id: string;
  user_id: string;
  roles: string[];
}

/** `membership.removed`: releases the (context, user) uniqueness. */
export interface MembershipRemovedPayload {
  context_type: ContextType;
  context_id: string;
  user_id: string;
}
