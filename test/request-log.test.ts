/*
 * The request log as a person reads it: one line per request at info (instance, caller, RPC or route,
 * status, duration), probes at debug, and no secret anywhere in the log, whatever carried it (headers,
 * cookies, query, form and JSON bodies, answers).
 */
import assert from "node:assert/strict";
import { Writable } from "node:stream";
import { after, before, describe, it } from "node:test";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { PlatformUsers } from "../src/gen/platform/resources/user/v3alpha/user_service_pb.ts";
import { TestCompleter } from "../src/login/testing.ts";
import {
  ADMIN_PASSWORD,
  addMachineUser,
  rawRequest,
  restClient,
  startPlatform,
  type TestPlatform,
} from "./helpers.ts";
import { addHuman, createAuthRequest, HttpBrowser } from "./login.ts";
import { basic, machineClient, postForm } from "./oidc.ts";
import { testTime } from "./time.ts";

type Line = Record<string, unknown> & { level: number; msg: string; reqId?: string };

/** A log destination that keeps every line. */
function capture() {
  let text = "";
  const stream = new Writable({
    write(chunk, _encoding, done) {
      text += chunk;
      done();
    },
  });
  return {
    stream,
    text: () => text,
    lines: (): Line[] =>
      text
        .split("\n")
        .filter((l) => l !== "")
        .map((l) => JSON.parse(l)),
  };
}

/** The lines of one request, by the request ID its answer carried. */
const linesOf = (lines: Line[], reqId: string | null) => lines.filter((l) => l.reqId === reqId);

/**
 * The lines of one request once its line is out: the server writes it when the answer has left, which the
 * client may see a moment earlier.
 */
async function settled(log: ReturnType<typeof capture>, reqId: string | null): Promise<Line[]> {
  for (let i = 0; i < testTime(100) && linesOf(log.lines(), reqId).length === 0; i++)
    await new Promise((resolve) => setTimeout(resolve, 20));
  return linesOf(log.lines(), reqId);
}

const METRICS_TOKEN = "metrics-token-for-the-log-test";

describe("request log", () => {
  let platform: TestPlatform;
  const log = capture();
  let owner: { userId: string; token: string };
  let instanceId: string;

  before(async () => {
    platform = await startPlatform({
      listen: true,
      logDestination: log.stream,
      env: { PLATFORM_LOG_LEVEL: "debug", PLATFORM_METRICS_TOKEN: METRICS_TOKEN },
    });
    instanceId = platform.bootstrapResult!.instanceId;
    owner = await addMachineUser(platform, {
      username: "owner",
      membership: { contextType: "instance", roles: ["IAM_OWNER"] },
    });
  });
  after(() => platform?.stop());

  it("writes one line per request at info: instance, caller, RPC, status, duration", async () => {
    const response = await fetch(`${platform.url}/resources/v3alpha/users/${owner.userId}`, {
      headers: { authorization: `Bearer ${owner.token}` },
    });
    assert.equal(response.status, 200);
    const lines = await settled(log, response.headers.get("x-request-id"));
    assert.equal(lines.length, 1, JSON.stringify(lines));
    const { time, pid, hostname, durationMs, ...line } = lines[0];
    assert.equal(typeof durationMs, "number");
    assert.ok((durationMs as number) >= 0);
    assert.deepEqual(line, {
      level: 30,
      reqId: response.headers.get("x-request-id"),
      instance: instanceId,
      caller: owner.userId,
      protocol: "rest",
      method: "GET",
      route: "platform.resources.user.v3alpha.PlatformUsers/GetUser",
      url: `/resources/v3alpha/users/${owner.userId}`,
      host: new URL(platform.url).host,
      status: 200,
      rpcCode: "OK",
      msg: "request completed",
    });
    assert.ok(!log.lines().some((l) => l.msg === "incoming request"), "no line when a request comes in");
  });

  it("names gRPC calls by their RPC with the gRPC status; other routes by their template", async () => {
    const users = createClient(PlatformUsers, createGrpcTransport({ baseUrl: platform.url }));
    await assert.rejects(
      users.getUser({ id: "404404" }, { headers: { authorization: `Bearer ${owner.token}` } }),
      (e) => e instanceof ConnectError && e.code === Code.NotFound,
    );
    const isGrpc = (l: Line) => l.protocol === "grpc" && l.msg === "request completed";
    for (let i = 0; i < testTime(100) && !log.lines().some(isGrpc); i++)
      await new Promise((r) => setTimeout(r, 20));
    const grpc = log.lines().find(isGrpc);
    assert.ok(grpc, "a line for the gRPC call");
    assert.equal(grpc.route, "platform.resources.user.v3alpha.PlatformUsers/GetUser");
    assert.equal(grpc.status, 200);
    assert.equal(grpc.rpcCode, "NOT_FOUND");
    assert.equal(grpc.caller, owner.userId);
    assert.equal(grpc.level, 30);

    // without a token: no caller; a wrong one: refused, still no caller
    const anonymous = await fetch(`${platform.url}/resources/v3alpha/users/${owner.userId}`);
    assert.equal(anonymous.status, 401);
    const [refused] = await settled(log, anonymous.headers.get("x-request-id"));
    assert.equal(refused.status, 401);
    assert.equal(refused.rpcCode, "UNAUTHENTICATED");
    assert.equal(refused.caller, undefined);

    const discovery = await fetch(`${platform.url}/.well-known/openid-configuration`);
    assert.equal(discovery.status, 200);
    const [oidc] = await settled(log, discovery.headers.get("x-request-id"));
    assert.equal(oidc.route, "/.well-known/openid-configuration");
    assert.equal(oidc.protocol, "http");
    assert.equal(oidc.instance, instanceId);
    assert.equal(oidc.rpcCode, undefined);

    const unknownHost = await rawRequest(`${platform.url}/resources/v3alpha/users/1`, {
      headers: { host: "nowhere.example" },
    });
    assert.equal(unknownHost.status, 404);
    const [nowhere] = await settled(log, String(unknownHost.headers["x-request-id"]));
    assert.equal(nowhere.instance, undefined);
    assert.equal(nowhere.host, "nowhere.example");
    assert.equal(nowhere.status, 404);
    assert.equal(nowhere.level, 30);

    const missing = await fetch(`${platform.url}/no/such/page`);
    const [unmatched] = await settled(log, missing.headers.get("x-request-id"));
    assert.equal(unmatched.route, "unmatched");
    assert.equal(unmatched.url, "/no/such/page");
  });

  it("logs health and readiness probes and scrapes at debug", async () => {
    for (const [path, headers] of [
      ["/healthz", {}],
      ["/ready", {}],
      ["/metrics", { authorization: `Bearer ${METRICS_TOKEN}` }],
    ] as const) {
      const response = await fetch(`${platform.url}${path}`, { headers });
      assert.equal(response.status, 200, path);
      const lines = await settled(log, response.headers.get("x-request-id"));
      assert.equal(lines.length, 1, path);
      assert.equal(lines[0].level, 20, `${path} at debug`);
      assert.equal(lines[0].route, path);
    }
  });
});

describe("request log at info", () => {
  let platform: TestPlatform;
  const log = capture();
  before(async () => {
    platform = await startPlatform({
      listen: true,
      logDestination: log.stream,
      env: { PLATFORM_LOG_LEVEL: "info" },
    });
  });
  after(() => platform?.stop());

  it("leaves the probes out and logs the rest", async () => {
    const probe = await fetch(`${platform.url}/healthz`);
    const ready = await fetch(`${platform.url}/ready`);
    const page = await fetch(`${platform.url}/.well-known/openid-configuration`);
    // the last request's line is out, so are those of the requests before it
    assert.equal((await settled(log, page.headers.get("x-request-id"))).length, 1);
    const lines = log.lines();
    assert.equal(linesOf(lines, probe.headers.get("x-request-id")).length, 0);
    assert.equal(linesOf(lines, ready.headers.get("x-request-id")).length, 0);
  });
});

describe("no secrets in the log", () => {
  let platform: TestPlatform;
  const log = capture();
  before(async () => {
    // trace: every line the server can write
    platform = await startPlatform({
      listen: true,
      logDestination: log.stream,
      env: { PLATFORM_LOG_LEVEL: "trace" },
    });
    platform.login.completer = new TestCompleter();
  });
  after(() => platform?.stop());

  it("never writes tokens, passwords, client secrets, cookies or secret query parameters", async () => {
    const secrets: string[] = [];
    const owner = await addMachineUser(platform, {
      username: "owner",
      membership: { contextType: "instance", roles: ["IAM_OWNER"] },
    });
    secrets.push(owner.token);
    const rest = restClient(platform, () => owner.token);

    // a PAT in Authorization, on success and on failure
    assert.equal((await rest("GET", `/resources/v3alpha/users/${owner.userId}`)).status, 200);
    assert.equal((await rest("GET", "/resources/v3alpha/users/1", { token: `${owner.token}x` })).status, 401);

    // passwords in JSON bodies: a session's password check, right and wrong; a new user's password
    const wrongPassword = "Wrong-Passw0rd-in-the-body!";
    secrets.push(ADMIN_PASSWORD, wrongPassword);
    for (const password of [ADMIN_PASSWORD, wrongPassword]) {
      const session = await rest("POST", "/resources/v3alpha/sessions", {
        json: { checks: { user: { login_name: "admin" }, password: { password } } },
      });
      if (password === ADMIN_PASSWORD) {
        assert.equal(session.status, 201, session.text);
        secrets.push(session.json.session_token);
      } else assert.equal(session.status, 400);
    }

    // client secrets (Basic and in the body), the tokens issued, then used as bearer tokens
    const machine = await machineClient(platform, owner.token, "log-client");
    secrets.push(machine.clientSecret, basic(machine.clientId, machine.clientSecret).authorization.slice(6));
    const issued = await postForm(
      `${platform.url}/oauth/v2/token`,
      { grant_type: "client_credentials", scope: "openid" },
      basic(machine.clientId, machine.clientSecret),
    );
    assert.equal(issued.status, 200, issued.text);
    secrets.push(issued.json.access_token);
    const posted = await postForm(`${platform.url}/oauth/v2/token`, {
      grant_type: "client_credentials",
      client_id: machine.clientId,
      client_secret: machine.clientSecret,
    });
    assert.equal(posted.status, 200, posted.text);
    secrets.push(posted.json.access_token);
    const wrongSecret = "not-the-client-secret-0123456789";
    secrets.push(wrongSecret);
    assert.equal(
      (
        await postForm(`${platform.url}/oauth/v2/token`, {
          grant_type: "client_credentials",
          client_id: machine.clientId,
          client_secret: wrongSecret,
        })
      ).status,
      401,
    );
    const introspected = await postForm(
      `${platform.url}/oauth/v2/introspect`,
      { token: issued.json.access_token },
      basic(machine.clientId, machine.clientSecret),
    );
    assert.equal(introspected.status, 200, introspected.text);
    const userinfo = await fetch(`${platform.url}/oidc/v1/userinfo`, {
      headers: { authorization: `Bearer ${issued.json.access_token}` },
    });
    assert.ok(userinfo.status === 200 || userinfo.status === 401 || userinfo.status === 403);

    // secret query parameters, on a route and on no route
    const querySecret = "query-secret-0123456789";
    secrets.push(querySecret);
    for (const path of [
      `/.well-known/openid-configuration?token=${querySecret}&code=${querySecret}&client_secret=${querySecret}`,
      `/no/such/page?password=${querySecret}&refresh_token=${querySecret}`,
      `/oauth/v2/authorize?client_id=x&id_token_hint=${querySecret}`,
    ]) {
      await fetch(`${platform.url}${path}`);
    }

    // the login UI: cookies, the password form
    const human = "Human-Passw0rd-in-a-form!";
    secrets.push(human);
    await addHuman(platform, "alice", human);
    const browser = new HttpBrowser(platform.url);
    const authRequest = await createAuthRequest(platform);
    const loginPage = await browser.follow(`/ui/login?authRequest=${authRequest.id}`);
    assert.equal(loginPage.status, 200, loginPage.text);
    const passwordPage = await browser.submit(loginPage, "/ui/login/loginname", { loginName: "alice" });
    const done = await browser.submit(passwordPage, "/ui/login/password", { password: human });
    assert.equal(done.status, 303, done.text);
    assert.ok(browser.cookies.size > 0, "the browser holds cookies");
    for (const value of browser.cookies.values()) secrets.push(decodeURIComponent(value), value);
    // once more, sending the cookies
    await browser.get(`/ui/login?authRequest=${(await createAuthRequest(platform)).id}`);

    const text = log.text();
    assert.ok(log.lines().length > 15, `the requests were logged: ${log.lines().length} lines`);
    for (const secret of secrets) {
      assert.ok(secret.length >= 8, `a real secret: ${secret}`);
      assert.ok(!text.includes(secret), `the log holds a secret: ${secret.slice(0, 6)}…`);
    }
    assert.match(text, /"url":"\/\.well-known\/openid-configuration\?token=\[redacted\]&code=\[redacted\]/);
  });
});
