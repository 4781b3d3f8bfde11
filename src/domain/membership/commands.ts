import type { NewEvent } from "../../eventstore/types.ts";
import { MEMBERSHIP, type MembershipAddedPayload, MembershipEvent } from "./events.ts";

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
        field: `${payload.context_type}:${payload.context_id}:${payload.user_id}`,
        message: "the user is already a member in this context",
      },
    ],
  };
}
