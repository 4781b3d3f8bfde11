import { randomToken } from "../../crypto/tokens.ts";
import { AlreadyExistsError, FailedPreconditionError, NotFoundError } from "../../errors.ts";
import type { EventStore } from "../../eventstore/eventstore.ts";
import type { CommandTx, NewEvent, StoredEvent, UniqueConstraintAction } from "../../eventstore/types.ts";
import { newId } from "../../id.ts";
import { INSTANCE, InstanceEvent } from "../instance/events.ts";
import { MEMBERSHIP, MembershipEvent } from "../membership/events.ts";
import { PROJECT, ProjectEvent } from "../project/events.ts";
import { USER, UserEvent } from "../user/events.ts";
import { usernameConstraint } from "../user/username.ts";
import { cascadeRemoveUserGrant, type UserGrantRow } from "../usergrant/commands.ts";
import {
  ORG,
  ORG_DOMAIN_CONSTRAINT,
  ORG_NAME_CONSTRAINT,
  type OrgDomainAddedPayload,
  OrgEvent,
  orgSlug,
} from "./events.ts";
import { lockOrgForRemoval } from "./locks.ts";

const nameConstraint = (name: string): UniqueConstraintAction => ({
  action: "add",
  type: ORG_NAME_CONSTRAINT,
  field: name,
  ignoreCase: true,
  message: `organization "${name}" already exists`,
});

const domainConstraint = (domain: string): UniqueConstraintAction => ({
  action: "add",
  type: ORG_DOMAIN_CONSTRAINT,
  field: domain,
  ignoreCase: true,
  message: `domain ${domain} is already verified by an organization of this instance`,
});

/** A new organization with its generated, verified primary domain `<slug>.<instance domain>`. */
export function addOrgEvents(orgId: string, name: string, instanceDomain: string): NewEvent[] {
  const domain = `${orgSlug(name)}.${instanceDomain}`.toLowerCase();
  const base = { aggregateType: ORG, aggregateId: orgId, resourceOwner: orgId };
  return [
    { ...base, type: OrgEvent.added, payload: { name }, uniqueConstraints: [nameConstraint(name)] },
    {
      ...base,
      type: OrgEvent.domainAdded,
      payload: { domain, domain_id: newId(), generated: true },
    },
    {
      ...base,
      type: OrgEvent.domainVerified,
      payload: { domain },
      uniqueConstraints: [domainConstraint(domain)],
    },
    { ...base, type: OrgEvent.domainPrimarySet, payload: { domain } },
  ];
}

/** A domain of an organization, folded from the org's events. */
export interface OrgDomainState {
  id: string;
  domain: string;
  verified: boolean;
  primary: boolean;
  generated: boolean;
  validationToken: string;
}

/** An organization folded from its events. */
export interface OrgAggregate {
  exists: boolean;
  name: string;
  domains: OrgDomainState[];
  sequence: number;
  changeDate?: Date;
}

export function foldOrg(events: StoredEvent[]): OrgAggregate {
  const org: OrgAggregate = { exists: false, name: "", domains: [], sequence: 0 };
  for (const e of events) {
    const p = e.payload ?? {};
    org.sequence = e.sequence;
    org.changeDate = e.createdAt;
    const find = () => org.domains.find((d) => d.domain === p.domain);
    switch (e.type) {
      case OrgEvent.added:
        org.exists = true;
        org.name = String(p.name);
        break;
      case OrgEvent.changed:
        if (typeof p.name === "string") org.name = p.name;
        break;
      case OrgEvent.domainAdded: {
        const added = p as unknown as OrgDomainAddedPayload;
        org.domains.push({
          id: added.domain_id ?? added.domain,
          domain: added.domain,
          verified: false,
          primary: false,
          generated: added.generated === true,
          validationToken: added.validation_token ?? "",
        });
        break;
      }
      case OrgEvent.domainVerified: {
        const d = find();
        if (d) d.verified = true;
        break;
      }
      case OrgEvent.domainPrimarySet:
        for (const d of org.domains) d.primary = d.domain === p.domain;
        break;
      case OrgEvent.domainRemoved:
        org.domains = org.domains.filter((d) => d.domain !== p.domain);
        break;
      case OrgEvent.removed:
        org.exists = false;
        org.domains = [];
        break;
    }
  }
  return org;
}

/** Sequence and date of the aggregate's newest event (what `Details` reports). */
export interface Version {
  sequence: number;
  changeDate?: Date;
}

export function versionAfter(stored: StoredEvent[], aggregateType: string, aggregateId: string): Version {
  const last = stored
    .filter((e) => e.aggregateType === aggregateType && e.aggregateId === aggregateId)
    .at(-1);
  return { sequence: last?.sequence ?? 0, changeDate: last?.createdAt };
}

async function loadOrg(tx: CommandTx, orgId: string): Promise<OrgAggregate> {
  const org = foldOrg(await tx.load(ORG, orgId));
  if (!org.exists) throw new NotFoundError("organization not found");
  return org;
}

interface OrgCommand {
  instanceId: string;
  creator: string;
}

/** Creates an organization; its primary domain is `<slug>.<instance domain>`. */
export async function createOrg(
  eventStore: EventStore,
  cmd: OrgCommand & { name: string; instanceDomain: string },
): Promise<{ orgId: string; version: Version }> {
  const orgId = newId();
  const stored = await eventStore.push(cmd, async () => addOrgEvents(orgId, cmd.name, cmd.instanceDomain));
  return { orgId, version: versionAfter(stored, ORG, orgId) };
}

/** Renames an organization; the same name appends nothing. */
export async function changeOrg(
  eventStore: EventStore,
  cmd: OrgCommand & { orgId: string; name?: string },
): Promise<Version> {
  let current: Version = { sequence: 0 };
  const stored = await eventStore.push(cmd, async (tx) => {
    const org = await loadOrg(tx, cmd.orgId);
    current = { sequence: org.sequence, changeDate: org.changeDate };
    if (cmd.name === undefined || cmd.name === org.name) return [];
    return [
      {
        aggregateType: ORG,
        aggregateId: cmd.orgId,
        resourceOwner: cmd.orgId,
        type: OrgEvent.changed,
        payload: { name: cmd.name },
        uniqueConstraints: [
          { action: "remove", type: ORG_NAME_CONSTRAINT, field: org.name, ignoreCase: true },
          nameConstraint(cmd.name),
        ],
      },
    ];
  });
  return stored.length ? versionAfter(stored, ORG, cmd.orgId) : current;
}

/** The instance's default organization, from the instance's events. */
function defaultOrgOf(instanceEvents: StoredEvent[]): string | undefined {
  return instanceEvents.filter((e) => e.type === InstanceEvent.defaultOrgSet).at(-1)?.payload?.org_id as
    | string
    | undefined;
}

/**
 * Removes an organization and, in the same push, its users, projects and the memberships in its
 * context, in its projects' contexts or of its users; the user grants of its users, of its projects and
 * those it gave; the project grants it received. The instance's default organization and the organization
 * of the management project stay.
 */
export async function removeOrg(
  eventStore: EventStore,
  cmd: OrgCommand & { orgId: string },
): Promise<Version> {
  const stored = await eventStore.push(cmd, async (tx) => {
    await lockOrgForRemoval(tx, cmd.instanceId, cmd.orgId);
    const org = await loadOrg(tx, cmd.orgId);
    const instance = await tx.load(INSTANCE, cmd.instanceId);
    if (defaultOrgOf(instance) === cmd.orgId) {
      throw new FailedPreconditionError("the instance's default organization cannot be deleted");
    }
    const management = await tx.query(
      "SELECT 1 FROM projects p JOIN instances i ON i.id = p.instance_id AND i.iam_project_id = p.id WHERE p.instance_id = $1 AND p.org_id = $2",
      [cmd.instanceId, cmd.orgId],
    );
    if (management.length > 0) {
      throw new FailedPreconditionError(
        "the organization holds the instance's management project and cannot be deleted",
      );
    }
    const events: NewEvent[] = [];
    const memberships = await tx.query<{
      id: string;
      context_type: number;
      context_id: string;
      user_id: string;
      owner: string;
    }>(
      `SELECT m.id, m.context_type, m.context_id, m.user_id,
              CASE m.context_type WHEN 2 THEN m.instance_id WHEN 3 THEN m.context_id
                   ELSE coalesce(p.org_id, m.instance_id) END AS owner
       FROM memberships m
       LEFT JOIN projects p ON m.context_type = 4 AND p.instance_id = m.instance_id AND p.id = m.context_id
       WHERE m.instance_id = $1 AND ((m.context_type = 3 AND m.context_id = $2) OR (m.context_type = 4 AND p.org_id = $2)
             OR m.user_id IN (SELECT id FROM users WHERE instance_id = $1 AND org_id = $2))
       ORDER BY m.id`,
      [cmd.instanceId, cmd.orgId],
    );
    for (const m of memberships) {
      events.push({
        aggregateType: MEMBERSHIP,
        aggregateId: m.id,
        resourceOwner: m.owner,
        type: MembershipEvent.removed,
        payload: { user_id: m.user_id, context_type: m.context_type, context_id: m.context_id },
        uniqueConstraints: [
          { action: "remove", type: "membership", field: `${m.context_type}:${m.context_id}:${m.user_id}` },
        ],
      });
    }
    // User grants of its users, of its projects and those it gave through project grants; project grants
    // it received on other organizations' projects.
    const userGrants = await tx.query<UserGrantRow>(
      `SELECT id, user_id, project_id, project_grant_id, org_id, role_keys FROM user_grants
       WHERE instance_id = $1 AND (org_id = $2
         OR user_id IN (SELECT id FROM users WHERE instance_id = $1 AND org_id = $2)
         OR project_id IN (SELECT id FROM projects WHERE instance_id = $1 AND org_id = $2))
       ORDER BY id`,
      [cmd.instanceId, cmd.orgId],
    );
    for (const g of userGrants) events.push(cascadeRemoveUserGrant(g, "org_removed"));
    const received = await tx.query<{ id: string; project_id: string; org_id: string }>(
      "SELECT id, project_id, org_id FROM project_grants WHERE instance_id = $1 AND granted_org_id = $2 ORDER BY id",
      [cmd.instanceId, cmd.orgId],
    );
    for (const g of received) {
      events.push({
        aggregateType: PROJECT,
        aggregateId: g.project_id,
        resourceOwner: g.org_id,
        type: ProjectEvent.grantCascadeRemoved,
        payload: { grant_id: g.id, granted_org_id: cmd.orgId },
      });
    }
    const users = await tx.query<{ id: string; username: string }>(
      "SELECT id, username FROM users WHERE instance_id = $1 AND org_id = $2 ORDER BY id",
      [cmd.instanceId, cmd.orgId],
    );
    for (const u of users) {
      events.push({
        aggregateType: USER,
        aggregateId: u.id,
        resourceOwner: cmd.orgId,
        type: UserEvent.removed,
        payload: { username: u.username, reason: "org_removed" },
        uniqueConstraints: [usernameConstraint("remove", u.username)],
      });
    }
    const projects = await tx.query<{ id: string }>(
      "SELECT id FROM projects WHERE instance_id = $1 AND org_id = $2 ORDER BY id",
      [cmd.instanceId, cmd.orgId],
    );
    for (const p of projects) {
      events.push({
        aggregateType: PROJECT,
        aggregateId: p.id,
        resourceOwner: cmd.orgId,
        type: ProjectEvent.removed,
        payload: { reason: "org_removed" },
      });
    }
    events.push({
      aggregateType: ORG,
      aggregateId: cmd.orgId,
      resourceOwner: cmd.orgId,
      type: OrgEvent.removed,
      payload: { name: org.name },
      uniqueConstraints: [
        { action: "remove", type: ORG_NAME_CONSTRAINT, field: org.name, ignoreCase: true },
        ...org.domains
          .filter((d) => d.verified)
          .map(
            (d): UniqueConstraintAction => ({
              action: "remove",
              type: ORG_DOMAIN_CONSTRAINT,
              field: d.domain,
              ignoreCase: true,
            }),
          ),
      ],
    });
    return events;
  });
  return versionAfter(stored, ORG, cmd.orgId);
}

function domainOf(org: OrgAggregate, domainId: string): OrgDomainState {
  const domain = org.domains.find((d) => d.id === domainId);
  if (!domain) throw new NotFoundError("domain not found");
  return domain;
}

/** Adds an unverified domain with a fresh validation token. */
export async function addOrgDomain(
  eventStore: EventStore,
  cmd: OrgCommand & { orgId: string; domain: string },
): Promise<{ domainId: string; validationToken: string; version: Version }> {
  const domain = cmd.domain.toLowerCase();
  const domainId = newId();
  const validationToken = randomToken(24);
  const stored = await eventStore.push(cmd, async (tx) => {
    const org = await loadOrg(tx, cmd.orgId);
    if (org.domains.some((d) => d.domain === domain)) {
      throw new AlreadyExistsError(`domain ${domain} is already a domain of this organization`);
    }
    const payload: OrgDomainAddedPayload = { domain, domain_id: domainId, validation_token: validationToken };
    return [
      {
        aggregateType: ORG,
        aggregateId: cmd.orgId,
        resourceOwner: cmd.orgId,
        type: OrgEvent.domainAdded,
        payload: { ...payload },
      },
    ];
  });
  return { domainId, validationToken, version: versionAfter(stored, ORG, cmd.orgId) };
}

/** Marks a domain verified (claims it among the instance's organizations); already verified: no event. */
export async function verifyOrgDomain(
  eventStore: EventStore,
  cmd: OrgCommand & { orgId: string; domainId: string; validationType: number },
): Promise<Version> {
  let current: Version = { sequence: 0 };
  const stored = await eventStore.push(cmd, async (tx) => {
    const org = await loadOrg(tx, cmd.orgId);
    current = { sequence: org.sequence, changeDate: org.changeDate };
    const domain = domainOf(org, cmd.domainId);
    if (domain.verified) return [];
    return [
      {
        aggregateType: ORG,
        aggregateId: cmd.orgId,
        resourceOwner: cmd.orgId,
        type: OrgEvent.domainVerified,
        payload: { domain: domain.domain, validation_type: cmd.validationType },
        uniqueConstraints: [domainConstraint(domain.domain)],
      },
    ];
  });
  return stored.length ? versionAfter(stored, ORG, cmd.orgId) : current;
}

/** Makes a verified domain the primary one; already primary: no event. */
export async function setPrimaryOrgDomain(
  eventStore: EventStore,
  cmd: OrgCommand & { orgId: string; domainId: string },
): Promise<Version> {
  let current: Version = { sequence: 0 };
  const stored = await eventStore.push(cmd, async (tx) => {
    const org = await loadOrg(tx, cmd.orgId);
    current = { sequence: org.sequence, changeDate: org.changeDate };
    const domain = domainOf(org, cmd.domainId);
    if (!domain.verified) throw new FailedPreconditionError("only a verified domain can become primary");
    if (domain.primary) return [];
    return [
      {
        aggregateType: ORG,
        aggregateId: cmd.orgId,
        resourceOwner: cmd.orgId,
        type: OrgEvent.domainPrimarySet,
        payload: { domain: domain.domain },
      },
    ];
  });
  return stored.length ? versionAfter(stored, ORG, cmd.orgId) : current;
}

/** Removes a domain other than the primary one, releasing it when it was verified. */
export async function removeOrgDomain(
  eventStore: EventStore,
  cmd: OrgCommand & { orgId: string; domainId: string },
): Promise<Version> {
  const stored = await eventStore.push(cmd, async (tx) => {
    const org = await loadOrg(tx, cmd.orgId);
    const domain = domainOf(org, cmd.domainId);
    if (domain.primary) throw new FailedPreconditionError("the primary domain cannot be deleted");
    return [
      {
        aggregateType: ORG,
        aggregateId: cmd.orgId,
        resourceOwner: cmd.orgId,
        type: OrgEvent.domainRemoved,
        payload: { domain: domain.domain },
        uniqueConstraints: domain.verified
          ? [{ action: "remove", type: ORG_DOMAIN_CONSTRAINT, field: domain.domain, ignoreCase: true }]
          : [],
      },
    ];
  });
  return versionAfter(stored, ORG, cmd.orgId);
}
