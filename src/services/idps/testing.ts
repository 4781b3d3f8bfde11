import { addMachineUser, addOrg, type TestPlatform } from "../../../test/helpers.ts";

/** Test support of the identity provider tests. */

export const IDPS = "/resources/v3alpha/idps";

export type IdpTypePath = "codehost_b" | "codehost_b_self_hosted" | "oidc" | "oauth";
export const TYPE_PATHS: IdpTypePath[] = ["codehost_b", "codehost_b_self_hosted", "oidc", "oauth"];

export const PROVIDER_TYPES: Record<IdpTypePath, string> = {
  codehost_b: "PROVIDER_TYPE_CODEHOST_B",
  codehost_b_self_hosted: "PROVIDER_TYPE_CODEHOST_B_SELF_HOSTED",
  oidc: "PROVIDER_TYPE_OIDC",
  oauth: "PROVIDER_TYPE_OAUTH",
};

/** A valid configuration of each type, with its client secret (as sent; never returned). */
export function validConfig(type: IdpTypePath, secret = `secret-of-${type}`): Record<string, unknown> {
  switch (type) {
    case "codehost_b":
      return { client_id: "cid-b", client_secret: secret, scopes: ["openid", "email"] };
    case "codehost_b_self_hosted":
      return {
        issuer: "https://codehost.example.com",
        client_id: "cid-bsh",
        client_secret: secret,
        scopes: ["openid"],
      };
    case "oidc":
      return {
        issuer: "https://sso.example.com",
        client_id: "cid-oidc",
        client_secret: secret,
        scopes: ["openid", "profile", "email"],
        is_id_token_mapping: true,
      };
    case "oauth":
      return {
        authorization_endpoint: "https://oauth.example.com/authorize",
        token_endpoint: "https://oauth.example.com/token",
        user_endpoint: "https://oauth.example.com/user",
        client_id: "cid-oauth",
        client_secret: secret,
        scopes: ["profile"],
        id_attribute: "id",
      };
  }
}

/** The configuration as read back: the sent one without the client secret. */
export function readConfig(config: Record<string, unknown>): Record<string, unknown> {
  const { client_secret: _, ...rest } = config;
  return rest;
}

export const NO_OPTIONS = {
  is_manual_linking_allowed: false,
  is_manual_creation_allowed: false,
  is_auto_creation: false,
  is_auto_update: false,
  auto_linking: "AUTO_LINKING_OPTION_UNSPECIFIED",
};

/**
 * Two organizations besides the first one and the callers: IAM_OWNER, IAM_OWNER_VIEWER, ORG_OWNER and
 * ORG_OWNER_VIEWER of organization A, ORG_OWNER of organization B, a user without roles.
 */
export async function setUp(platform: TestPlatform) {
  const orgA = await addOrg(platform, "Alpha");
  const orgB = await addOrg(platform, "Beta");
  const user = async (
    username: string,
    orgId: string | undefined,
    membership?: Parameters<typeof addMachineUser>[1]["membership"],
  ) => (await addMachineUser(platform, { username, orgId, membership })).token;
  return {
    instanceId: platform.bootstrapResult!.instanceId,
    orgA,
    orgB,
    owner: await user("owner", undefined, { contextType: "instance", roles: ["IAM_OWNER"] }),
    viewer: await user("viewer", undefined, { contextType: "instance", roles: ["IAM_OWNER_VIEWER"] }),
    ownerA: await user("owner-a", orgA, { contextType: "org", roles: ["ORG_OWNER"] }),
    viewerA: await user("viewer-a", orgA, { contextType: "org", roles: ["ORG_OWNER_VIEWER"] }),
    ownerB: await user("owner-b", orgB, { contextType: "org", roles: ["ORG_OWNER"] }),
    nobody: await user("nobody", undefined),
  };
}
