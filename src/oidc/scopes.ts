import { InvalidScope } from "./errors.ts";

/** Standard scopes (OpenID Connect Core §5.4, §11). */
export const Scope = {
  openid: "openid",
  profile: "profile",
  email: "email",
  phone: "phone",
  address: "address",
  offlineAccess: "offline_access",
} as const;

export const STANDARD_SCOPES: readonly string[] = Object.values(Scope);

/** Reserved scopes, prefix `urn:platform:iam:` (docs/oidc.md "Scopes"). */
export const Reserved = {
  prefix: "urn:platform:iam:",
  /** `urn:platform:iam:org:project:id:<id>:aud`: the project joins the audience (`platform` = management). */
  projectAudience: /^urn:platform:iam:org:project:id:([A-Za-z0-9_-]{1,200}):aud$/,
  /** `urn:platform:iam:org:id:<id>`: the organization the user must belong to (authorization endpoint). */
  org: /^urn:platform:iam:org:id:([A-Za-z0-9_-]{1,200})$/,
  /** `urn:platform:iam:org:idp:id:<id>`: the login UI sends the person straight to that identity provider. */
  idp: /^urn:platform:iam:org:idp:id:([A-Za-z0-9_-]{1,200})$/,
  /** `urn:platform:iam:org:project:role:<key>`: asks for the role claim limited to these roles. */
  role: /^urn:platform:iam:org:project:role:(.{1,200})$/,
  /** Every role of the audience's projects. */
  projectsRoles: "urn:platform:iam:org:projects:roles",
  metadata: "urn:platform:iam:user:metadata",
  /** The custom data the user itself may read (docs/user-schemas.md), as the claim of the same name. */
  userData: "urn:platform:iam:user:data",
  resourceOwner: "urn:platform:iam:user:resourceowner",
} as const;

/** The management project's alias in audience scopes. */
export const MANAGEMENT_PROJECT_ALIAS = "platform";

/** RFC 6749 §3.3 scope-token: %x21 / %x23-5B / %x5D-7E. */
const SCOPE_TOKEN = /^[\x21\x23-\x5b\x5d-\x7e]+$/;

/** A requested scope, parsed: what it asks for. */
export interface ParsedScope {
  /** The scope values, in request order, without duplicates. */
  values: string[];
  /** Project IDs (or the `platform` alias) named by audience scopes. */
  audienceProjects: string[];
  /** Role keys named by role scopes (empty: no role scope). */
  roleKeys: string[];
}

/**
 * Parses a `scope` parameter: space-delimited scope tokens (RFC 6749 §3.3). A malformed value or one that is
 * neither standard nor reserved is `invalid_scope`.
 */
export function parseScope(raw: string | undefined): ParsedScope {
  const parsed: ParsedScope = { values: [], audienceProjects: [], roleKeys: [] };
  if (raw === undefined) return parsed;
  for (const value of raw.split(" ")) {
    if (!SCOPE_TOKEN.test(value)) throw new InvalidScope(`the scope is malformed: ${JSON.stringify(raw)}`);
    if (parsed.values.includes(value)) continue;
    if (STANDARD_SCOPES.includes(value) || value === Reserved.projectsRoles) {
      parsed.values.push(value);
      continue;
    }
    if (
      value === Reserved.metadata ||
      value === Reserved.userData ||
      value === Reserved.resourceOwner ||
      Reserved.org.test(value) ||
      Reserved.idp.test(value)
    ) {
      parsed.values.push(value);
      continue;
    }
    const audience = Reserved.projectAudience.exec(value);
    if (audience) {
      parsed.values.push(value);
      parsed.audienceProjects.push(audience[1]);
      continue;
    }
    const role = Reserved.role.exec(value);
    if (role) {
      parsed.values.push(value);
      parsed.roleKeys.push(role[1]);
      continue;
    }
    throw new InvalidScope(`unknown scope ${value}`);
  }
  return parsed;
}

/** A parsed scope from stored values (they were valid when granted). */
export function scopeFromValues(values: readonly string[]): ParsedScope {
  return parseScope(values.length ? values.join(" ") : undefined);
}

/** True when the scope asks for role claims. */
export function wantsRoles(scope: ParsedScope): boolean {
  return scope.roleKeys.length > 0 || scope.values.includes(Reserved.projectsRoles);
}
