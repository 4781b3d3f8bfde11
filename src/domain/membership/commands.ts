import type { NewEvent, StoredEvent } from "../../eventstore/types.ts";
import {
  type ContextType,
  MEMBERSHIP,
  type MembershipAddedPayload,
  type MembershipChangedPayload,
  MembershipEvent,
  type MembershipRemovedPayload,
} from "./events.ts";

export function addMembershipEvent(
  membershipId: string,
  resourceOwner: string,
  payload: MembershipAddedPayload,
): NewEvent {
  return {
    aggregateType: MEMBERSHIP,
    aggregateId: membershipId,
    resourceOwner,
    type: MembershipEvent.added,
    payload: { ...payload },
    uniqueConstraints: [
      {
        action: "add",
        type: "membership",
        field: membershipKey(payload),
        message: "the user is already a member in this context",
      },
    ],
  };
}

function membershipKey(p: { context_type: number; context_id: string; user_id: string }): string {
  return `${p.context_type}:${p.context_id}:${p.user_id}`;
}

/** The state of one membership, folded from its events; undefined when it does not exist. */
export interface MembershipAggregate {
  id: string;
  resourceOwner: string;
  contextType: ContextType;
  contextId: string;
  userId: string;
  roles: string[];
  sequence: number;
  changeDate: Date;
}

export function foldMembership(events: StoredEvent[]): MembershipAggregate | undefined {
  let m: MembershipAggregate | undefined;
  for (const e of events) {
    const p = (e.payload ?? {}) as Record<string, unknown>;
    if (e.type === MembershipEvent.added) {
      const added = p as unknown as MembershipAddedPayload;
      m = {
        id: e.aggregateId,
        resourceOwner: e.resourceOwner,
        contextType: added.context_type,
        contextId: added.context_id,
        userId: added.user_id,
        roles: [...added.roles],
        sequence: e.sequence,
        changeDate: e.createdAt,
      };
    } else if (e.type === MembershipEvent.removed) {
      m = undefined;
    } else if (m) {
      if (e.type === MembershipEvent.changed) m.roles = [...(p.roles as string[])];
      m.sequence = e.sequence;
      m.changeDate = e.createdAt;
    }
  }
  return m;
}

/** New roles for a membership; none when they are the same set. */
export function changeMembershipEvents(m: MembershipAggregate, roles: string[]): NewEvent[] {
  const same = roles.length === m.roles.length && roles.every((r) => m.roles.includes(r));
  if (same) return [];
  const payload: MembershipChangedPayload = {
    context_type: m.contextType,
    context_id: m.contextId,
    user_id: m.userId,
    roles,
  };
  return [
    {
      aggregateType: MEMBERSHIP,
      aggregateId: m.id,
      resourceOwner: m.resourceOwner,
      type: MembershipEvent.changed,
      payload: { ...payload },
    },
  ];
}

/** Removes a membership, releasing its (context, user) uniqueness. */
export function removeMembershipEvent(
  membershipId: string,
  resourceOwner: string,
  payload: MembershipRemovedPayload,
): NewEvent {
  return {
    aggregateType: MEMBERSHIP,
    aggregateId: membershipId,
    resourceOwner,
    type: MembershipEvent.removed,
    payload: { ...payload },
    uniqueConstraints: [{ action: "remove", type: "membership", field: membershipKey(payload) }],
  };
}
