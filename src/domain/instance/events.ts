export const INSTANCE = "instance";

export const InstanceEvent = {
  added: "instance.added",
  domainAdded: "instance.domain.added",
  domainPrimarySet: "instance.domain.primary.set",
  domainRemoved: "instance.domain.removed",
  defaultOrgSet: "instance.default.org.set",
  iamProjectSet: "instance.iam.project.set",
  removed: "instance.removed",
} as const;

export interface InstanceAddedPayload {
  name: string;
}
export interface InstanceDomainPayload {
  domain: string;
  generated?: boolean;
}
