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
