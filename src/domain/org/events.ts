export const ORG = "org";

export const OrgEvent = {
  added: "org.added",
  changed: "org.changed",
  domainAdded: "org.domain.added",
  domainVerified: "org.domain.verified",
  domainPrimarySet: "org.domain.primary.set",
  domainRemoved: "org.domain.removed",
  removed: "org.removed",
} as const;

/** Numbers of the API's OrganizationState. */
export const OrgState = { active: 1, inactive: 2 } as const;

export interface OrgAddedPayload {
  name: string;
}
export interface OrgChangedPayload {
  name?: string;
}
export interface OrgDomainAddedPayload {
  domain: string;
  /** Absent in events written before domains had IDs: the domain name is the ID then. */
  domain_id?: string;
  /** The org's generated `<slug>.<instance domain>` (verified at once). */
  generated?: boolean;
  /** Published by the domain's owner to prove control (not a secret). */
  validation_token?: string;
}
export interface OrgDomainPayload {
  domain: string;
  /** DOMAIN_VALIDATION_TYPE number of a verification by HTTP (1) or DNS (2). */
  validation_type?: number;
}

/** Unique-constraint names (scope: the instance). */
export const ORG_NAME_CONSTRAINT = "org_name";
export const ORG_DOMAIN_CONSTRAINT = "org_domain";

/** `My Org!` → `my-org`: the label of an org's generated primary domain. */
export function orgSlug(name: string): string {
  const slug = name
    .normalize("NFKD")
    .replace(/[\u0300-\u036f]/g, "")
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "")
    .slice(0, 63)
    .replace(/-+$/g, "");
  return slug || "org";
}
