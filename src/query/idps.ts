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

export async function activeIdpsForOrg(
  _db: Queryable,
  _masterKey: Buffer,
  _instanceId: string,
  _orgId: string,
): Promise<LoginIdp[]> {
  return [];
}

export async function activeIdpForOrg(
  _db: Queryable,
  _masterKey: Buffer,
  _instanceId: string,
  _orgId: string,
  _idpId: string,
): Promise<LoginIdp | null> {
  return null;
}
