import type { NewEvent } from "../../eventstore/types.ts";
import {
  type HumanAddedPayload,
  type MachineAddedPayload,
  type PatAddedPayload,
  USER,
  UserEvent,
} from "./events.ts";

function usernameConstraint(username: string) {
  return {
    action: "add" as const,
    type: "username",
    field: username,
    ignoreCase: true,
    message: `username "${username}" is already taken`,
  };
}

export function addHumanEvent(userId: string, orgId: string, payload: HumanAddedPayload): NewEvent {
  return {
    aggregateType: USER,
    aggregateId: userId,
    resourceOwner: orgId,
    type: UserEvent.humanAdded,
    payload: { ...payload },
    uniqueConstraints: [usernameConstraint(payload.username)],
  };
}

export function addMachineEvent(userId: string, orgId: string, payload: MachineAddedPayload): NewEvent {
  return {
    aggregateType: USER,
    aggregateId: userId,
    resourceOwner: orgId,
    type: UserEvent.machineAdded,
    payload: { ...payload },
    uniqueConstraints: [usernameConstraint(payload.username)],
  };
}

export function addPatEvent(userId: string, orgId: string, payload: PatAddedPayload): NewEvent {
  return {
    aggregateType: USER,
    aggregateId: userId,
    resourceOwner: orgId,
    type: UserEvent.patAdded,
    payload: { ...payload },
  };
}
