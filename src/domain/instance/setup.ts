import type { NewEvent } from "../../eventstore/types.ts";
import { newId } from "../../id.ts";
import { addMembershipEvent } from "../membership/commands.ts";
import { ContextType } from "../membership/events.ts";
import { addOrgEvents } from "../org/commands.ts";
import { PROJECT, ProjectEvent } from "../project/events.ts";
import { addHumanEvent, addMachineEvent, addPatEvent } from "../user/commands.ts";
import { AccessTokenType } from "../user/events.ts";
import { consoleAppEvents } from "./console.ts";
import { INSTANCE, InstanceEvent } from "./events.ts";

export interface InstanceSetup {
  name: string;
  /** The first is the primary domain. */
  domains: string[];
  orgName: string;
  admin: { username: string; passwordHash: string; passwordChangeRequired: boolean };
  /** A machine user with IAM_OWNER and one PAT (bootstrap's `admin-client`). */
  machine?: { username: string; patHash: string; patExpiration?: string };
  /**
   * The instance's external origin (`<scheme>://<primary domain>[:port]`): the administration console's
   * OIDC app is made for it (console.ts). Undefined: no console app (the next start adds it).
   */
  consoleOrigin?: string;
}

export interface InstanceSetupResult {
  instanceId: string;
  orgId: string;
  projectId: string;
  adminUserId: string;
  machineUserId?: string;
  events: NewEvent[];
}

/** Management project name; its audience is what `urn:platform:iam:org:project:id:platform:aud` asks for. */
export const MANAGEMENT_PROJECT_NAME = "Platform";

/**
 * Every event of a new instance: its domains, first organization (the instance default), the
 * management project (with the console's app), a human IAM_OWNER and optionally a machine IAM_OWNER with a PAT.
 */
export function setupInstanceEvents(setup: InstanceSetup): InstanceSetupResult {
  const instanceId = newId();
  const orgId = newId();
  const projectId = newId();
  const adminUserId = newId();
  const instance = {
    aggregateType: INSTANCE,
    aggregateId: instanceId,
    resourceOwner: instanceId,
    instanceId,
  };
  const inInstance = <T extends NewEvent>(event: T): T => ({ ...event, instanceId });

  const events: NewEvent[] = [{ ...instance, type: InstanceEvent.added, payload: { name: setup.name } }];
  for (const domain of setup.domains) {
    events.push({
      ...instance,
      type: InstanceEvent.domainAdded,
      payload: { domain },
      uniqueConstraints: [
        {
          action: "add",
          type: "instance_domain",
          field: domain,
          ignoreCase: true,
          scope: "system",
          message: `domain ${domain} is already used by an instance`,
        },
      ],
    });
  }
  events.push({ ...instance, type: InstanceEvent.domainPrimarySet, payload: { domain: setup.domains[0] } });

  events.push(...addOrgEvents(orgId, setup.orgName, setup.domains[0]).map(inInstance));
  events.push({ ...instance, type: InstanceEvent.defaultOrgSet, payload: { org_id: orgId } });

  events.push(
    inInstance({
      aggregateType: PROJECT,
      aggregateId: projectId,
      resourceOwner: orgId,
      type: ProjectEvent.added,
      payload: { name: MANAGEMENT_PROJECT_NAME, project_role_assertion: false, project_role_check: false },
    }),
  );
  events.push({ ...instance, type: InstanceEvent.iamProjectSet, payload: { project_id: projectId } });
  if (setup.consoleOrigin)
    events.push(...consoleAppEvents(instanceId, { id: projectId, orgId }, setup.consoleOrigin).events);

  events.push(
    inInstance(
      addHumanEvent(adminUserId, orgId, {
        username: setup.admin.username,
        profile: {
          given_name: "Platform",
          family_name: "Administrator",
          display_name: "Platform Administrator",
        },
        email: { address: `${setup.admin.username}@${setup.domains[0]}`, is_verified: true },
        password_hash: setup.admin.passwordHash,
        password_change_required: setup.admin.passwordChangeRequired,
      }),
    ),
  );
  events.push(
    inInstance(
      addMembershipEvent(newId(), instanceId, {
        context_type: ContextType.instance,
        context_id: instanceId,
        user_id: adminUserId,
        roles: ["IAM_OWNER"],
      }),
    ),
  );

  let machineUserId: string | undefined;
  if (setup.machine) {
    machineUserId = newId();
    events.push(
      inInstance(
        addMachineEvent(machineUserId, orgId, {
          username: setup.machine.username,
          name: "Platform administration client",
          access_token_type: AccessTokenType.bearer,
        }),
      ),
      inInstance(
        addPatEvent(machineUserId, orgId, {
          pat_id: newId(),
          token_hash: setup.machine.patHash,
          expiration: setup.machine.patExpiration,
        }),
      ),
      inInstance(
        addMembershipEvent(newId(), instanceId, {
          context_type: ContextType.instance,
          context_id: instanceId,
          user_id: machineUserId,
          roles: ["IAM_OWNER"],
        }),
      ),
    );
  }
  return { instanceId, orgId, projectId, adminUserId, machineUserId, events };
}
