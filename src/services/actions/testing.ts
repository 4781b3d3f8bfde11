import { addMachineUser, type TestPlatform } from "../../../test/helpers.ts";

/** Test support of the actions tests: the callers of each kind (REST calls: restClient of test/helpers.ts). */

/** IAM_OWNER, IAM_OWNER_VIEWER, ORG_OWNER and a user without any role. */
export async function addCallers(platform: TestPlatform) {
  const role = async (username: string, membership?: Parameters<typeof addMachineUser>[1]["membership"]) =>
    (await addMachineUser(platform, { username, membership })).token;
  return {
    owner: await role("owner", { contextType: "instance", roles: ["IAM_OWNER"] }),
    viewer: await role("viewer", { contextType: "instance", roles: ["IAM_OWNER_VIEWER"] }),
    orgOwner: await role("org-owner", { contextType: "org", roles: ["ORG_OWNER"] }),
    nobody: await role("nobody"),
  };
}
