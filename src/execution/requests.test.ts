import assert from "node:assert/strict";
import { after, before, beforeEach, describe, it } from "node:test";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import {
  addMachineUser,
  assertRejected,
  assertRpcError,
  eventCount,
  type RestCall,
  startPlatform,
  type TestPlatform,
  testTime,
  within,
} from "../../test/helpers.ts";
import { PlatformActions } from "../gen/platform/resources/action/v3alpha/action_service_pb.ts";
import { PlatformUsers } from "../gen/platform/resources/user/v3alpha/user_service_pb.ts";
import { verifySignature } from "./signing.ts";
import { actionsClient, TestTarget } from "./testing.ts";

const USERS = "/platform.resources.user.v3alpha.PlatformUsers";
const CREATE_USER = `${USERS}/CreateUser`;
const ACTIONS = "/platform.resources.action.v3alpha.PlatformActions";

const human = (username: string, familyName = "Lovelace") => ({
  username,
  human: {
    profile: { given_name: "Ada", family_name: familyName },
    email: { address: `${username}@example.com`, is_verified: true },
  },
});

describe("executions: request and response conditions", () => {
  let platform: TestPlatform;
  let target: TestTarget;
  let owner: { userId: string; token: string };
  let rest: RestCall;
  let actions: ReturnType<typeof actionsClient>;
  let names = 0;
  const name = (prefix: string) => `${prefix}-${++names}`;

  before(async () => {
    platform = await startPlatform({
      listen: true,
      env: { PLATFORM_EXECUTION_MAX_RESPONSE_BYTES: "65536" },
    });
    target = await TestTarget.start();
    owner = await addMachineUser(platform, {
      username: "owner",
      membership: { contextType: "instance", roles: ["IAM_OWNER"] },
    });
    actions = actionsClient(platform, owner.token);
    rest = actions.rest;
  });
  after(async () => {
    await platform.stop();
    await target.close();
  });
  beforeEach(async () => {
    // every test starts without executions
    const all = await rest("POST", "/resources/v3alpha/executions/_search", { json: [] });
    for (const e of all.json.result) {
      const id = encodeURIComponent(e.details.id);
      const deleted = await rest("DELETE", `/resources/v3alpha/executions/${id}`);
      assert.equal(deleted.status, 200, deleted.text);
    }
  });

  const createUser = (username: string, familyName?: string) =>
    rest("POST", "/resources/v3alpha/users", { json: human(username, familyName) });
  const userCount = async (username: string) =>
    (
      await platform.db.query("SELECT id FROM users WHERE instance_id = $1 AND username = $2", [
        platform.bootstrapResult!.instanceId,
        username,
      ])
    ).length;

  it("the actions walkthrough: creating a user over REST POSTs the request once, in snake_case, signed", async () => {
    const path = `/${name("webhook")}`;
    const { id, signingKey } = await actions.target("local-webhook", target.url(path));
    await actions.execution({ request: { method: CREATE_USER } }, [id]);

    const created = await createUser("ada");
    assert.equal(created.status, 201, created.text);

    const calls = target.callsTo(path);
    assert.equal(calls.length, 1, "exactly one POST");
    const [call] = calls;
    assert.equal(call.headers["content-type"], "application/json");
    assert.deepEqual(Object.keys(call.json).sort(), [
      "fullMethod",
      "instanceID",
      "orgID",
      "projectID",
      "request",
      "userID",
    ]);
    assert.equal(call.json.fullMethod, CREATE_USER);
    assert.equal(call.json.instanceID, platform.bootstrapResult!.instanceId);
    assert.equal(call.json.orgID, platform.bootstrapResult!.orgId);
    assert.equal(call.json.userID, owner.userId);
    assert.equal(call.json.projectID, "");
    assert.equal(call.json.request.user.username, "ada");
    assert.deepEqual(call.json.request.user.human.profile, { given_name: "Ada", family_name: "Lovelace" });
    assert.equal(call.json.request.user.human.email.is_verified, true);
    assert.ok(!("givenName" in call.json.request.user.human.profile), "proto names, not lowerCamelCase");
    const signature = call.headers["platform-signature"] as string;
    assert.match(signature, /^t=\d+,v1=[0-9a-f]{64}$/);
    assert.ok(verifySignature(signature, call.body, signingKey), "the signature verifies with the key");
    assert.ok(!verifySignature(signature, `${call.body} `, signingKey), "and only for that body");
  });

  it("a target that answers 500 interrupts: the client gets the error, nothing is stored", async () => {
    const path = `/${name("failing")}`;
    target.on(path, () => ({ status: 500, body: "database on fire\n\tdetails follow" }));
    const { id } = await actions.target("failing", target.url(path));
    await actions.execution({ request: { method: CREATE_USER } }, [id]);

    const before = await eventCount(platform);
    const reply = await createUser("interrupted");
    assertRpcError(
      reply,
      400,
      Code.FailedPrecondition,
      `target failing (${id}) answered HTTP 500: database on fire details follow`,
    );
    assert.equal(await eventCount(platform), before, "nothing stored");
    assert.equal(await userCount("interrupted"), 0);

    target.on(path, () => ({ status: 204 }));
    const again = await createUser("interrupted");
    assert.equal(again.status, 201, "the same username can be created afterwards");
  });

  it("a target that does not answer within its timeout interrupts with DEADLINE_EXCEEDED (504)", async () => {
    const path = `/${name("slow")}`;
    // the target answers only at the end of the test: the 504 can only come from the 1 s timeout
    let answer = () => {};
    const answered = new Promise<void>((resolve) => (answer = resolve));
    target.on(path, () => ({ until: answered }));
    const { id } = await actions.target("slow", target.url(path), { timeout: "1s" });
    await actions.execution({ request: { method: CREATE_USER } }, [id]);

    const before = await eventCount(platform);
    const reply = await within(
      createUser("too-slow"),
      testTime(10_000),
      "no answer while the target is silent",
    );
    assertRpcError(reply, 504, Code.DeadlineExceeded, `target slow (${id}) timed out after 1s`);
    answer();
    assert.equal(await eventCount(platform), before, "nothing stored");

    await actions.execution({ request: { method: CREATE_USER } }, []);
    assert.equal((await createUser("too-slow")).status, 201, "the same username can be created afterwards");
  });

  it("a target that cannot be reached interrupts with UNAVAILABLE (503)", async () => {
    const { id } = await actions.target("gone", "http://127.0.0.1:1/nothing-listens");
    await actions.execution({ request: { method: CREATE_USER } }, [id]);
    const reply = await createUser("unreached");
    assertRpcError(reply, 503, Code.Unavailable, `target gone (${id}) could not be reached (ECONNREFUSED)`);
    assert.equal(await userCount("unreached"), 0);
  });

  it("without interrupt_on_error a failing target is logged and the call succeeds", async () => {
    const path = `/${name("tolerated")}`;
    target.on(path, () => ({ status: 500 }));
    const { id } = await actions.target("tolerated", target.url(path), { interrupt: false });
    const { id: down } = await actions.target("down-tolerated", "http://127.0.0.1:1/", { interrupt: false });
    await actions.execution({ request: { method: CREATE_USER } }, [id, down]);
    const reply = await createUser("tolerated");
    assert.equal(reply.status, 201, reply.text);
    assert.equal(target.callsTo(path).length, 1);
    assert.equal(await userCount("tolerated"), 1);
  });

  it("is_async: the call returns before the target answers, and the target is still called", async () => {
    const path = `/${name("async")}`;
    // the target answers (500) only once the call has returned: a call that waited for it would not return
    let answer = () => {};
    const answered = new Promise<void>((resolve) => (answer = resolve));
    target.on(path, () => ({ until: answered, status: 500 }));
    // the longest timeout: a call that waited would wait far longer than the limit below
    const { id } = await actions.target("async", target.url(path), { async: true, timeout: "270s" });
    await actions.execution({ request: { method: CREATE_USER } }, [id]);
    const reply = await within(createUser("async-user"), testTime(8_000), "the call waits for the target");
    assert.equal(reply.status, 201, reply.text);
    const [call] = await target.waitFor(path, 1);
    answer();
    assert.equal(call.json.request.user.username, "async-user");
  });

  it("rest_request_response rewrites the request; an invalid answer is an error of the target", async () => {
    const path = `/${name("rewrite")}`;
    target.on(path, (call) => {
      const request = call.json.request;
      request.user.human.profile.family_name = "Byron";
      return { body: request };
    });
    const { id } = await actions.target("rewriter", target.url(path), { type: "rest_request_response" });
    const after = `/${name("after-rewrite")}`;
    const { id: second } = await actions.target("after-rewrite", target.url(after));
    await actions.execution({ request: { method: CREATE_USER } }, [id, second]);

    const reply = await createUser("rewritten", "Lovelace");
    assert.equal(reply.status, 201, reply.text);
    const user = await rest("GET", `/resources/v3alpha/users/${reply.json.details.id}`);
    assert.equal(user.json.user.human.profile.family_name, "Byron");
    assert.equal(
      target.callsTo(after)[0].json.request.user.human.profile.family_name,
      "Byron",
      "later targets see the rewritten request",
    );

    // answers that are not a valid request: parsed and validated like client input
    const cases: Array<[unknown, RegExp]> = [
      ["not json", /answered unusable JSON: not JSON$/],
      [{ user: { username: "x" }, unknown_field: 1 }, /answered unusable JSON: .*unknown_field/],
      [{ user: { username: "", human: {} } }, /answered unusable JSON: user\.username: /],
    ];
    for (const [body, message] of cases) {
      target.on(path, () => ({ body: body as object }));
      const before = await eventCount(platform);
      const bad = await createUser("rewrite-bad");
      assertRpcError(bad, 400, Code.FailedPrecondition, new RegExp(`^target rewriter \\(${id}\\) `));
      assert.match(bad.json.message, message);
      assert.equal(await eventCount(platform), before);
    }
  });

  it("response conditions get the request and the response; rest_request_response rewrites the response", async () => {
    const path = `/${name("response")}`;
    const { id } = await actions.target("response-webhook", target.url(path));
    await actions.execution({ response: { method: CREATE_USER } }, [id]);
    const reply = await createUser("responded");
    assert.equal(reply.status, 201, reply.text);
    const [call] = target.callsTo(path);
    assert.equal(call.json.fullMethod, CREATE_USER);
    assert.equal(call.json.request.user.username, "responded");
    assert.equal(call.json.response.details.id, reply.json.details.id);
    assert.equal(call.json.response.details.sequence, reply.json.details.sequence);

    const rewrite = `/${name("response-rewrite")}`;
    target.on(rewrite, () => ({ body: { functions: ["rewritten"] } }));
    const { id: rewriter } = await actions.target("response-rewriter", target.url(rewrite), {
      type: "rest_request_response",
    });
    await actions.execution({ response: { method: `${ACTIONS}/ListAvailableExecutionFunctions` } }, [
      rewriter,
    ]);
    const functions = await rest("GET", "/resources/v3alpha/executions/functions");
    assert.deepEqual(functions.json, { functions: ["rewritten"] });
    assert.deepEqual(target.callsTo(rewrite)[0].json.response, {
      functions: ["preuserinfo", "preaccesstoken"],
    });
  });

  it("service and all conditions; the most specific execution wins", async () => {
    const paths = { method: `/${name("m")}`, service: `/${name("s")}`, all: `/${name("a")}` };
    const ids = {
      method: (await actions.target("by-method", target.url(paths.method))).id,
      service: (await actions.target("by-service", target.url(paths.service))).id,
      all: (await actions.target("by-all", target.url(paths.all))).id,
    };
    await actions.execution({ request: { all: true } }, [ids.all]);
    const got = await rest("GET", `/resources/v3alpha/targets/${ids.all}`);
    assert.equal(got.status, 200);
    assert.equal(
      target.callsTo(paths.all).at(-1)?.json.fullMethod,
      `${ACTIONS}/GetTarget`,
      "all: any method",
    );

    await actions.execution({ request: { service: USERS.slice(1) } }, [ids.service]);
    await actions.execution({ request: { method: CREATE_USER } }, [ids.method]);
    const counts = () => Object.values(paths).map((p) => target.callsTo(p).length);
    let before = counts();
    assert.equal((await createUser("specific")).status, 201);
    assert.deepEqual(
      counts().map((n, i) => n - before[i]),
      [1, 0, 0],
      "method over service over all",
    );

    before = counts();
    const users = await rest("POST", "/resources/v3alpha/users/_search", { json: [] });
    assert.equal(users.status, 200);
    assert.deepEqual(
      counts().map((n, i) => n - before[i]),
      [0, 1, 0],
      "another method of the service: the service's execution",
    );
    assert.equal(target.callsTo(paths.service).at(-1)?.json.fullMethod, `${USERS}/SearchUsers`);

    const deleted = await rest(
      "DELETE",
      `/resources/v3alpha/executions/${encodeURIComponent(`request.${CREATE_USER}`)}`,
    );
    assert.equal(deleted.status, 200);
    before = counts();
    assert.equal((await createUser("specific-2")).status, 201);
    assert.deepEqual(
      counts().map((n, i) => n - before[i]),
      [0, 1, 0],
      "without the method's execution, the service's applies",
    );
  });

  it("includes: their targets after the execution's own, in order, each target once", async () => {
    const paths = [`/${name("i")}`, `/${name("i")}`, `/${name("i")}`];
    const [a, b, c] = [
      (await actions.target(name("inc-a"), target.url(paths[0]))).id,
      (await actions.target(name("inc-b"), target.url(paths[1]))).id,
      (await actions.target(name("inc-c"), target.url(paths[2]))).id,
    ];
    const inner = await actions.execution(
      { request: { service: "platform.settings.language.v3alpha.PlatformLanguageSettings" } },
      [c, a],
    );
    const middle = await actions.execution({ request: { all: true } }, [b], [inner]);
    await actions.execution({ request: { method: CREATE_USER } }, [a], [middle]);
    const start = target.calls.length;
    assert.equal((await createUser("included")).status, 201);
    const order = target.calls.slice(start).map((call) => paths.indexOf(call.path));
    assert.deepEqual(order, [0, 1, 2], "a (own), b (include), c (include's include); a not again");
  });

  it("a replayed Idempotency-Key calls no target again", async () => {
    const path = `/${name("idem")}`;
    const { id } = await actions.target("idempotent", target.url(path));
    await actions.execution({ request: { method: CREATE_USER } }, [id]);
    const headers = { "idempotency-key": `key-${name("k")}` };
    const first = await rest("POST", "/resources/v3alpha/users", { json: human("idem"), headers });
    const second = await rest("POST", "/resources/v3alpha/users", { json: human("idem"), headers });
    assert.equal(first.status, 201, first.text);
    assert.equal(second.status, 201, second.text);
    assert.equal(second.headers["idempotent-replayed"], "true");
    assert.equal(target.callsTo(path).length, 1);
  });

  it("works over gRPC and Connect: the same payload, the same interruption", async () => {
    const path = `/${name("grpc")}`;
    const { id, signingKey } = await actions.target("grpc-webhook", target.url(path));
    await actions.execution({ request: { method: CREATE_USER } }, [id]);
    const headers = { authorization: `Bearer ${owner.token}` };
    for (const [protocol, transport] of [
      ["grpc", createGrpcTransport({ baseUrl: platform.url })],
      ["connect", createConnectTransport({ baseUrl: platform.url, httpVersion: "1.1" })],
    ] as const) {
      const client = createClient(PlatformUsers, transport);
      const username = `over-${protocol}`;
      await client.createUser(
        {
          user: {
            username,
            type: {
              case: "human",
              value: {
                profile: { givenName: "Over", familyName: protocol },
                email: { address: `${username}@example.com` },
              },
            },
          },
        },
        { headers },
      );
      const call = target.callsTo(path).at(-1)!;
      assert.equal(call.json.fullMethod, CREATE_USER);
      assert.equal(call.json.userID, owner.userId);
      assert.equal(call.json.request.user.username, username);
      assert.equal(call.json.request.user.human.profile.family_name, protocol);
      assert.ok(verifySignature(call.headers["platform-signature"] as string, call.body, signingKey));
    }

    target.on(path, () => ({ status: 403, body: { error: "not allowed" } }));
    for (const transport of [
      createGrpcTransport({ baseUrl: platform.url }),
      createConnectTransport({ baseUrl: platform.url, httpVersion: "1.1" }),
    ]) {
      const before = await eventCount(platform);
      await assert.rejects(
        createClient(PlatformUsers, transport).createUser(
          { user: { username: "refused", type: { case: "machine", value: { name: "m" } } } },
          { headers },
        ),
        (e) =>
          e instanceof ConnectError &&
          e.code === Code.FailedPrecondition &&
          e.rawMessage === `target grpc-webhook (${id}) answered HTTP 403: {"error":"not allowed"}`,
      );
      assert.equal(await eventCount(platform), before);
    }
    // the actions API itself over gRPC: a condition on it applies too
    const functions = await createClient(
      PlatformActions,
      createGrpcTransport({ baseUrl: platform.url }),
    ).listAvailableExecutionFunctions({}, { headers });
    assert.deepEqual(functions.functions, ["preuserinfo", "preaccesstoken"]);
  });

  it("an answer larger than PLATFORM_EXECUTION_MAX_RESPONSE_BYTES is an error of the target", async () => {
    const path = `/${name("big")}`;
    target.on(path, () => ({ body: "x".repeat(100_000) }));
    const { id } = await actions.target("big", target.url(path), { type: "rest_request_response" });
    await actions.execution({ request: { method: CREATE_USER } }, [id]);
    const reply = await createUser("big-answer");
    assertRpcError(reply, 400, Code.FailedPrecondition, `target big (${id}) answered more than 65536 bytes`);
    assert.equal(await userCount("big-answer"), 0);
  });

  it("rotating the signing key: both keys sign during the grace period", async () => {
    const path = `/${name("rotate")}`;
    const { id, signingKey: oldKey } = await actions.target("rotating", target.url(path));
    await actions.execution({ request: { method: CREATE_USER } }, [id]);
    const rotated = await rest("POST", `/resources/v3alpha/targets/${id}/_rotate_signing_key`);
    assert.equal(rotated.status, 200, rotated.text);
    const newKey = rotated.json.signing_key as string;
    assert.equal(newKey.length, 43);
    assert.notEqual(newKey, oldKey);
    assert.equal(rotated.json.details.sequence, "2");
    const got = await rest("GET", `/resources/v3alpha/targets/${id}`);
    assert.equal(got.json.target.target.signing_key, newKey);

    assert.equal((await createUser("rotated")).status, 201);
    const call = target.callsTo(path).at(-1)!;
    const header = call.headers["platform-signature"] as string;
    assert.match(header, /^t=\d+,v1=[0-9a-f]{64},v1=[0-9a-f]{64}$/);
    assert.ok(verifySignature(header, call.body, newKey), "the new key verifies");
    assert.ok(verifySignature(header, call.body, oldKey), "the old key still verifies");
    const [, first] = header.split(",");
    assert.ok(
      verifySignature(`${header.split(",")[0]},${first}`, call.body, newKey),
      "the new key's v1 first",
    );

    const missing = await rest("POST", "/resources/v3alpha/targets/404/_rotate_signing_key");
    assertRpcError(missing, 404, Code.NotFound);
    const tooLong = await rest("POST", `/resources/v3alpha/targets/${"x".repeat(201)}/_rotate_signing_key`);
    assertRpcError(tooLong, 400, Code.InvalidArgument, "id: ");
    const viewer = await addMachineUser(platform, {
      username: "rotation-viewer",
      membership: { contextType: "instance", roles: ["IAM_OWNER_VIEWER"] },
    });
    await assertRejected(
      platform,
      () => rest("POST", `/resources/v3alpha/targets/${id}/_rotate_signing_key`, { token: viewer.token }),
      403,
      Code.PermissionDenied,
    );
    const still = await rest("GET", `/resources/v3alpha/targets/${id}`);
    assert.equal(still.json.target.target.signing_key, newKey, "a refused rotation changes nothing");
  });
});

describe("executions: the deny list", () => {
  let platform: TestPlatform;
  let target: TestTarget;
  let actions: ReturnType<typeof actionsClient>;

  before(async () => {
    platform = await startPlatform({
      listen: true,
      env: {
        PLATFORM_EXECUTION_DENY_LIST: "127.0.0.0/8, ::1, metadata.example",
      },
    });
    target = await TestTarget.start();
    const owner = await addMachineUser(platform, {
      username: "owner",
      membership: { contextType: "instance", roles: ["IAM_OWNER"] },
    });
    actions = actionsClient(platform, owner.token);
  });
  after(async () => {
    await platform.stop();
    await target.close();
  });

  const createUser = (username: string) =>
    actions.rest("POST", "/resources/v3alpha/users", { json: human(username) });

  it("refuses a denied address, also behind a host name that resolves to it; nothing is called", async () => {
    for (const [label, url] of [
      ["literal", target.url("/denied")],
      ["resolved", `http://localhost:${target.port}/denied`],
      ["by-name", "http://metadata.example/latest"],
    ]) {
      const { id } = await actions.target(`denied-${label}`, url);
      await actions.execution({ request: { method: CREATE_USER } }, [id]);
      const reply = await createUser(`denied-${label}`);
      assertRpcError(reply, 400, Code.FailedPrecondition, `target denied-${label} (${id}) `);
      assert.match(reply.json.message, /denied by PLATFORM_EXECUTION_DENY_LIST/);
    }
    assert.equal(target.calls.length, 0, "no call went out");
  });
});
