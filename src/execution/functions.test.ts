import assert from "node:assert/strict";
import { after, before, beforeEach, describe, it } from "node:test";
import { addMachineUser, type RestCall, startPlatform, type TestPlatform } from "../../test/helpers.ts";
import { Code, PlatformError } from "../errors.ts";
import { applyClaims, applyUserMetadata, claimRefusal, logClaimName, runFunction } from "./functions.ts";
import { verifySignature } from "./signing.ts";
import { actionsClient, TestTarget } from "./testing.ts";

/** Function conditions against the engine directly (the OIDC endpoints call runFunction the same way). */
describe("executions: function conditions", () => {
  let platform: TestPlatform;
  let target: TestTarget;
  let rest: RestCall;
  let actions: ReturnType<typeof actionsClient>;
  let instanceId: string;
  let names = 0;
  const name = (prefix: string) => `${prefix}-${++names}`;
  const user = { id: "u1", org_id: "o1", preferred_username: "ada" };
  const client = { client_id: "app@project", project_id: "p1" };

  before(async () => {
    platform = await startPlatform({ listen: true });
    target = await TestTarget.start();
    const owner = await addMachineUser(platform, {
      username: "owner",
      membership: { contextType: "instance", roles: ["IAM_OWNER"] },
    });
    actions = actionsClient(platform, owner.token);
    rest = actions.rest;
    instanceId = platform.bootstrapResult!.instanceId;
  });
  after(async () => {
    await platform.stop();
    await target.close();
  });
  beforeEach(async () => {
    for (const fn of ["preuserinfo", "preaccesstoken"])
      await rest("DELETE", `/resources/v3alpha/executions/function.${fn}`);
  });

  const run = (fn: "preuserinfo" | "preaccesstoken", claims: Record<string, unknown>) =>
    runFunction(platform.executions.engine, instanceId, fn, { user, client, claims });

  it("without an execution nothing is called and nothing changes", async () => {
    const before = target.calls.length;
    const result = await run("preuserinfo", { sub: "u1" });
    assert.deepEqual(result, { appendClaims: [], setUserMetadata: [], appendLogClaims: [], refused: [] });
    assert.equal(target.calls.length, before);
  });

  it("preuserinfo: claims are appended, reserved and present ones refused, logs and metadata passed on", async () => {
    const path = `/${name("userinfo")}`;
    target.on(path, () => ({
      body: {
        append_claims: [
          { key: "department", value: "R&D" },
          { key: "groups", value: ["a", "b"] },
          { key: "sub", value: "someone-else" },
          { key: "urn:platform:iam:org:project:roles", value: {} },
          { key: "email", value: "other@example.com" },
        ],
        set_user_metadata: [{ key: "seen", value: Buffer.from("yes").toString("base64") }],
        append_log_claims: ["checked by the HR system"],
      },
    }));
    const { id, signingKey } = await actions.target("hr-claims", target.url(path), {
      type: "rest_request_response",
    });
    await actions.execution({ function: "preuserinfo" }, [id]);

    const claims = { sub: "u1", email: "ada@example.com" };
    const result = await run("preuserinfo", claims);
    const [call] = target.callsTo(path);
    assert.deepEqual(call.json, { function: "preuserinfo", instance_id: instanceId, user, client, claims });
    assert.ok(verifySignature(call.headers["platform-signature"] as string, call.body, signingKey));

    assert.deepEqual(result.appendClaims, [
      { key: "department", value: "R&D" },
      { key: "groups", value: ["a", "b"] },
    ]);
    assert.deepEqual(
      result.refused.map((r) => [r.key, r.reason]),
      [
        ["sub", '"sub" is a reserved claim'],
        [
          "urn:platform:iam:org:project:roles",
          '"urn:platform:iam:org:project:roles" is reserved (urn:platform:iam:*)',
        ],
        ["email", '"email" is already set and cannot be overwritten'],
      ],
    );
    assert.deepEqual(result.setUserMetadata, [{ key: "seen", value: "eWVz" }]);
    assert.equal(result.appendLogClaims[0], 'target hr-claims: claim "sub" is a reserved claim');
    assert.ok(result.appendLogClaims.includes("checked by the HR system"));

    const applied = applyClaims(claims, "preuserinfo", result);
    assert.equal(applied.sub, "u1", "never overwritten");
    assert.equal(applied.email, "ada@example.com");
    assert.equal(applied.department, "R&D");
    assert.deepEqual(applied[logClaimName("preuserinfo")], result.appendLogClaims);
    assert.equal(logClaimName("preuserinfo"), "urn:platform:iam:action:preuserinfo:log");
  });

  it("targets run in order, each seeing the claims the previous ones appended; webhooks are only told", async () => {
    const [first, second, hook] = [`/${name("first")}`, `/${name("second")}`, `/${name("hook")}`];
    target.on(first, () => ({ body: { append_claims: [{ key: "a", value: 1 }] } }));
    target.on(second, (call) => ({
      body: {
        append_claims: [
          { key: "b", value: call.json.claims.a + 1 },
          { key: "a", value: 5 },
        ],
      },
    }));
    target.on(hook, () => ({ body: { append_claims: [{ key: "ignored", value: true }] } }));
    const ids = [
      (await actions.target(name("f"), target.url(first), { type: "rest_request_response" })).id,
      (await actions.target(name("s"), target.url(second), { type: "rest_request_response" })).id,
      (await actions.target(name("h"), target.url(hook))).id,
    ];
    await actions.execution({ function: "preaccesstoken" }, ids);
    const result = await run("preaccesstoken", { sub: "u1" });
    assert.deepEqual(result.appendClaims, [
      { key: "a", value: 1 },
      { key: "b", value: 2 },
    ]);
    assert.deepEqual(target.callsTo(second)[0].json.claims, { sub: "u1", a: 1 });
    assert.deepEqual(target.callsTo(hook)[0].json.claims, { sub: "u1", a: 1, b: 2 });
    assert.deepEqual(
      (await run("preuserinfo", { sub: "u1" })).appendClaims,
      [],
      "preuserinfo has no execution: separate from preaccesstoken",
    );
  });

  it("errors: an interrupting target stops the function; otherwise it is skipped", async () => {
    const path = `/${name("broken")}`;
    target.on(path, () => ({ status: 500 }));
    const { id } = await actions.target("broken-fn", target.url(path));
    await actions.execution({ function: "preuserinfo" }, [id]);
    await assert.rejects(run("preuserinfo", {}), (e) => {
      assert.ok(e instanceof PlatformError);
      assert.equal(e.code, Code.FAILED_PRECONDITION);
      assert.equal(e.message, `target broken-fn (${id}) answered HTTP 500`);
      return true;
    });

    const bad = `/${name("bad-answer")}`;
    target.on(bad, () => ({ body: { append_claims: { key: "not-a-list" } } }));
    const { id: badId } = await actions.target("bad-answer", target.url(bad), {
      type: "rest_request_response",
    });
    await actions.execution({ function: "preuserinfo" }, [badId]);
    await assert.rejects(run("preuserinfo", {}), {
      message: `target bad-answer (${badId}) answered unusable JSON: append_claims: must be a list`,
    });

    const { id: tolerated } = await actions.target("tolerated-fn", target.url(path), { interrupt: false });
    await actions.execution({ function: "preuserinfo" }, [tolerated]);
    assert.deepEqual((await run("preuserinfo", {})).appendClaims, []);
  });

  it("applyUserMetadata stores what the targets set on the user", async () => {
    const created = await rest("POST", "/resources/v3alpha/users", {
      json: { username: "metadata-user", machine: { name: "M" } },
    });
    const userId = created.json.details.id;
    await applyUserMetadata(platform.eventStore, instanceId, userId, [
      { key: "seen", value: Buffer.from("yes").toString("base64") },
    ]);
    const got = await rest("GET", `/resources/v3alpha/users/${userId}`);
    assert.deepEqual(got.json.user.metadata, { seen: Buffer.from("yes").toString("base64") });
  });

  it("with the actions feature off, no target is called", async () => {
    const path = `/${name("off")}`;
    const { id } = await actions.target("feature-off", target.url(path), { type: "rest_request_response" });
    await actions.execution({ function: "preuserinfo" }, [id]);
    const off = await rest("PATCH", "/settings/v3alpha/features", { json: { actions: { set: false } } });
    assert.equal(off.status, 200, off.text);
    try {
      await run("preuserinfo", {});
      assert.equal(target.callsTo(path).length, 0);
    } finally {
      await rest("PATCH", "/settings/v3alpha/features", { json: { actions: { reset: true } } });
    }
  });

  it("claimRefusal: the reserved names", () => {
    for (const key of ["iss", "sub", "aud", "exp", "iat", "nbf", "jti", "azp", "nonce", "auth_time", "amr"])
      assert.ok(claimRefusal(key, {}), key);
    assert.ok(claimRefusal("URN:PLATFORM:IAM:anything", {}));
    assert.equal(claimRefusal("urn:example:custom", {}), undefined);
    assert.equal(claimRefusal("department", {}), undefined);
    assert.ok(claimRefusal("department", { department: "x" }));
  });
});
