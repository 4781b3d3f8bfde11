export const INSTANCE = "instance";

export const InstanceEvent = {
  added: "instance.added",
  changed: "instance.changed",
  domainAdded: "instance.domain.added",
  domainPrimarySet: "instance.domain.primary.set",
  domainRemoved: "instance.domain.removed",
  defaultOrgSet: "instance.default.org.set",
  iamProjectSet: "instance.iam.project.set",
  /** The administration console's OIDC app (docs/console.md): `app_id`, `client_id`. */
  consoleSet: "instance.console.set",
  /** Block and audit-log retention: only the fields present change. */
  limitsSet: "instance.limits.set",
  removed: "instance.removed",
} as const;

export interface InstanceAddedPayload {
  name: string;
}
export interface InstanceChangedPayload {
  name?: string;
}
export interface InstanceDomainPayload {
  domain: string;
  generated?: boolean;
}
export interface InstanceConsoleSetPayload {
  app_id: string;
  client_id: string;
}
export interface InstanceLimitsPayload {
  block?: boolean;
  /** Seconds; null removes the limit. */
  audit_log_retention_seconds?: number | null;
}

/** Unique-constraint name of instance domains (scope: the system). */
export const INSTANCE_DOMAIN_CONSTRAINT = "instance_domain";
