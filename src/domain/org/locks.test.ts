import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { addMachineUser, startPlatform, type TestPlatform } from "../../../test/helpers.ts";

describe("removing an organization or a user while children are added", () => {
  let platform: TestPlatform;
  let token: string;
  const call = async (method: string, path: string, json?: unknown) => {
    const response = await fetch(`${platform.url}/resources/v3alpha${path}`, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        ...(json === undefined ? {} : { "content-type": "application/json" }),
      },
      body: json === undefined ? undefined : JSON.stringify(json),
    });
    return { status: response.status, body: (await response.json()) as { details?: { id: string } } };
  };

  before(async () => {
    platform = await startPlatform({ listen: true });
    ({ token } = await addMachineUser(platform, {
      username: "owner",
      membership: { contextType: "instance", roles: ["IAM_OWNER"] },
    }));
  });
  after(() => platform.stop());

  it("leaves no user in a removed organization and no membership of a removed user", async () => {
    for (let round = 0; round < 8; round++) {
      const org = await call("POST", "/organizations", { name: `Racing ${round}` });
      assert.equal(org.status, 201);
      const orgId = org.body.details!.id;
      const user = await call("POST", `/users?ctx.org_id=${orgId}`, {
        username: `member-${round}`,
        machine: { name: "m" },
      });
      assert.equal(user.status, 201);
      const userId = user.body.details!.id;

      const results = await Promise.all([
        call("POST", `/users?ctx.org_id=${orgId}`, { username: `late-a-${round}`, machine: { name: "a" } }),
        call("POST", `/memberships?ctx.org_id=${orgId}`, { user_id: userId, roles: ["ORG_OWNER_VIEWER"] }),
        call("DELETE", `/organizations/${orgId}`),
        call("POST", `/users?ctx.org_id=${orgId}`, { username: `late-b-${round}`, machine: { name: "b" } }),
      ]);
      assert.equal(results[2].status, 200);
      for (const r of [results[0], results[1], results[3]])
        assert.ok([201, 404].includes(r.status), String(r.status));

      const users = await platform.db.query("SELECT id FROM users WHERE org_id = $1", [orgId]);
      assert.deepEqual(users, [], "no user survives in the removed organization");
      const memberships = await platform.db.query(
        "SELECT id FROM memberships WHERE context_id = $1 OR user_id = $2",
        [orgId, userId],
      );
      assert.deepEqual(memberships, [], "no membership survives");
    }
  });
});
