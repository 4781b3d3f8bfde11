// TEMPORARY (branch idp-login only): the interface helper idp-api provides in src/query/idps.ts. Deleted
// before merging main, which brings the real module.
import type { Queryable } from "../storage/database.ts";

export interface LoginIdp {
  id: string;
  name: string;
  type: "oidc" | "oauth" | "codehost_b" | "codehost_b_self_hosted";
  options: {
    isManualLinkingAllowed: boolean;
    isManualCreationAllowed: boolean;
    isAutoCreation: boolean;
    isAutoUpdate: boolean;
    autoLinking: "unspecified" | "username" | "email";
  };
  config: {
    issuer?: string;
    authorizationEndpoint?: string;
    tokenEndpoint?: string;
    userEndpoint?: string;
    idAttribute?: string;
    clientId: string;
    clientSecret: string;
    scopes: string[];
    isIdTokenMapping?: boolean;
  };
}

/** TEMPORARY: providers a test registers until idp-api's REST API is merged. */
export const stubIdps: Array<{ instanceId: string; orgIds: string[]; idp: LoginIdp }> = [];

export async function activeIdpsForOrg(
  _db: Queryable,
  _masterKey: Buffer,
  instanceId: string,
  orgId: string,
): Promise<LoginIdp[]> {
  return stubIdps
    .filter((s) => s.instanceId === instanceId && s.orgIds.includes(orgId))
    .map((s) => s.idp)
    .sort((a, b) => a.name.localeCompare(b.name));
}

export async function activeIdpForOrg(
  _db: Queryable,
  _masterKey: Buffer,
  instanceId: string,
  orgId: string,
  idpId: string,
): Promise<LoginIdp | null> {
  return (await activeIdpsForOrg(_db, _masterKey, instanceId, orgId)).find((i) => i.id === idpId) ?? null;
}
