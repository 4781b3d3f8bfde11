import type { NewEvent } from "../../eventstore/types.ts";
import { ORG, OrgEvent, orgSlug } from "./events.ts";

/** A new organization with its generated, verified primary domain `<slug>.<instance domain>`. */
export function addOrgEvents(orgId: string, name: string, instanceDomain: string): NewEvent[] {
  const domain = `${orgSlug(name)}.${instanceDomain}`;
  const base = { aggregateType: ORG, aggregateId: orgId, resourceOwner: orgId };
  return [
    {
      ...base,
      type: OrgEvent.added,
      payload: { name },
      uniqueConstraints: [
        {
          action: "add",
          type: "org_name",
          field: name,
          ignoreCase: true,
          message: `organization "${name}" already exists`,
        },
      ],
    },
    {
      ...base,
      type: OrgEvent.domainAdded,
      payload: { domain, generated: true },
    },
    {
      ...base,
      type: OrgEvent.domainVerified,
      payload: { domain },
      uniqueConstraints: [
        {
          action: "add",
          type: "org_domain",
          field: domain,
          ignoreCase: true,
          message: `domain ${domain} is already taken`,
        },
      ],
    },
    { ...base, type: OrgEvent.domainPrimarySet, payload: { domain } },
  ];
}
