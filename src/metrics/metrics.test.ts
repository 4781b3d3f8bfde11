import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import {
  ADMIN_PASSWORD,
  rawRequest,
  restClient,
  startPlatform,
  type TestPlatform,
} from "../../test/helpers.ts";
import { basic, machineClient, ownerToken, postForm } from "../../test/oidc.ts";
import { ConfigError, loadConfig } from "../config.ts";
import { PlatformUsers } from "../gen/platform/resources/user/v3alpha/user_service_pb.ts";

const TOKEN = "metrics-token-0123456789abcdef";

/** One sample of the exposition: `name{labels} value`. */
interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** The samples of a Prometheus text exposition (comments skipped). */
export function parseExposition(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const match = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    assert.ok(match, `not a sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const [, key, value] of (match[2] ?? "").matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[key] = value;
    samples.push({ name: match[1], labels, value: Number(match[3]) });
  }
  return samples;
}

/** The samples named `name` whose labels include `labels`. */
function find(samples: Sample[], name: string, labels: Record<string, string> = {}): Sample[] {
  return samples.filter(
    (s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v),
  );
}

async function scrape(url: string, token: string | undefined = TOKEN): Promise<Sample[]> {
  const response = await fetch(`${url}/metrics`, {
    headers: token ? { authorization: `Bearer ${token}` } : {},
  });
  const text = await response.text();
  assert.equal(response.status, 200, text);
  assert.match(response.headers.get("content-type") ?? "", /^text\/plain; version=0\.0\.4/);
  return parseExposition(text);
}

describe("metrics: off unless asked for", () => {
  let platform: TestPlatform;
  before(async () => {
    platform = await startPlatform({ listen: true });
  });
  after(() => platform?.stop());

  it("answers /metrics with 404 saying how to turn them on, whatever the token", async () => {
    for (const headers of [{}, { authorization: `Bearer ${TOKEN}` }]) {
      const response = await fetch(`${platform.url}/metrics`, { headers });
      assert.equal(response.status, 404);
      assert.deepEqual(await response.json(), {
        code: 5,
        message: "metrics are not served on this port (PLATFORM_METRICS_PORT, PLATFORM_METRICS_TOKEN)",
        details: [],
      });
    }
    assert.equal(platform.metricsPort, undefined);
  });

  it("refuses a short token and the main port as the metrics port (one line naming the variable)", () => {
    assert.throws(
      () => loadConfig({ PLATFORM_METRICS_TOKEN: "short" }),
      (e: unknown) =>
        e instanceof ConfigError &&
        e.message === "PLATFORM_METRICS_TOKEN: must be at least 16 characters (e.g. `openssl rand -hex 32`)",
    );
    assert.throws(
      () => loadConfig({ PLATFORM_PORT: "9000", PLATFORM_METRICS_PORT: "9000" }),
      (e: unknown) => e instanceof ConfigError && e.variable === "PLATFORM_METRICS_PORT",
    );
    assert.throws(
      () => loadConfig({ PLATFORM_METRICS_PORT: "x" }),
      (e: unknown) => e instanceof ConfigError && e.variable === "PLATFORM_METRICS_PORT",
    );
    assert.deepEqual(loadConfig({ PLATFORM_METRICS_PORT: "9090" }).metrics, { port: 9090, token: undefined });
  });
});

describe("metrics on the main port with PLATFORM_METRICS_TOKEN", () => {
  let platform: TestPlatform;
  let owner: string;
  before(async () => {
    platform = await startPlatform({ listen: true, env: { PLATFORM_METRICS_TOKEN: TOKEN } });
    owner = await ownerToken(platform);
  });
  after(() => platform?.stop());

  it("needs the bearer token: 401 with WWW-Authenticate without it or with another", async () => {
    for (const authorization of [undefined, `Bearer ${TOKEN}x`, `Basic ${TOKEN}`, TOKEN]) {
      const response = await fetch(`${platform.url}/metrics`, {
        headers: authorization ? { authorization } : {},
      });
      assert.equal(response.status, 401, String(authorization));
      assert.equal(response.headers.get("www-authenticate"), 'Bearer realm="metrics"');
      const text = await response.text();
      assert.ok(!text.includes("platform_"), "no metrics without the token");
    }
  });

  it("is served whatever the Host (no instance is resolved), with the process metrics", async () => {
    const response = await rawRequest(`${platform.url}/metrics`, {
      headers: { host: "nowhere.example", authorization: `Bearer ${TOKEN}` },
    });
    assert.equal(response.status, 200, response.body);
    const samples = parseExposition(response.body);
    for (const name of [
      "process_cpu_user_seconds_total",
      "process_resident_memory_bytes",
      "nodejs_eventloop_lag_seconds",
      "nodejs_heap_size_used_bytes",
    ])
      assert.equal(find(samples, name).length, 1, name);
  });

  it("counts requests by protocol, RPC or route template and status: no raw paths, IDs or hosts", async () => {
    const rest = restClient(platform, () => owner);
    for (const id of ["123", "456"]) {
      const reply = await rest("GET", `/resources/v3alpha/users/${id}`);
      assert.equal(reply.status, 404, reply.text);
    }
    for (const path of ["/nothing/1", "/nothing/2/deeper?x=1", "/resources/v3alpha/nothing-here"]) {
      assert.equal((await fetch(`${platform.url}${path}`)).status, 404);
    }
    const users = createClient(
      PlatformUsers,
      createGrpcTransport({ baseUrl: platform.url, interceptors: [] }),
    );
    await assert.rejects(
      users.getUser({ id: "789" }, { headers: { authorization: `Bearer ${owner}` } }),
      (e) => e instanceof ConnectError && e.code === Code.NotFound,
    );
    assert.equal((await rest("GET", "/settings/v3alpha/languages")).status, 200);

    const samples = await scrape(platform.url);
    const count = "platform_http_request_duration_seconds_count";
    const getUser = "platform.resources.user.v3alpha.PlatformUsers/GetUser";
    assert.deepEqual(
      find(samples, count, { route: getUser }).map((s) => [s.labels, s.value]),
      [
        [{ protocol: "rest", method: "GET", route: getUser, status: "404", rpc_code: "NOT_FOUND" }, 2],
        [{ protocol: "grpc", method: "POST", route: getUser, status: "200", rpc_code: "NOT_FOUND" }, 1],
      ],
    );
    const unmatched = find(samples, count, { route: "unmatched" });
    assert.deepEqual(
      unmatched.map((s) => [s.labels, s.value]),
      [[{ protocol: "http", method: "GET", route: "unmatched", status: "404", rpc_code: "" }, 3]],
    );
    const resolveLanguages = "platform.settings.language.v3alpha.PlatformLanguageSettings/ResolveLanguages";
    assert.deepEqual(
      find(samples, count, { route: resolveLanguages }).map((s) => [
        s.labels.status,
        s.labels.rpc_code,
        s.value,
      ]),
      [["200", "OK", 1]],
    );
    // a histogram: buckets up to +Inf for every series
    const buckets = find(samples, "platform_http_request_duration_seconds_bucket", {
      route: getUser,
      protocol: "rest",
    });
    assert.equal(buckets.at(-1)?.labels.le, "+Inf");
    assert.equal(buckets.at(-1)?.value, 2);

    // Bounded: no label value holds an ID, a raw path, a host or an instance.
    const instanceId = platform.bootstrapResult!.instanceId;
    for (const s of samples) {
      for (const value of Object.values(s.labels)) {
        for (const raw of ["123", "456", "789", "nothing", "localhost", "127.0.0.1", instanceId])
          assert.ok(!value.includes(raw), `${s.name} ${JSON.stringify(s.labels)} holds ${raw}`);
      }
    }
  });

  it("counts tokens issued by grant, sign-ins by result, event appends and their latency", async () => {
    const machine = await machineClient(platform, owner, "metrics-client");
    for (let i = 0; i < 2; i++) {
      const token = await postForm(
        `${platform.url}/oauth/v2/token`,
        { grant_type: "client_credentials", scope: "openid" },
        basic(machine.clientId, machine.clientSecret),
      );
      assert.equal(token.status, 200, token.text);
    }
    const refused = await postForm(
      `${platform.url}/oauth/v2/token`,
      { grant_type: "client_credentials" },
      basic(machine.clientId, "wrong"),
    );
    assert.equal(refused.status, 401, refused.text);

    const rest = restClient(platform, () => owner);
    const session = (password: string) =>
      rest("POST", "/resources/v3alpha/sessions", {
        json: { checks: { user: { login_name: "admin" }, password: { password } } },
      });
    assert.equal((await session(ADMIN_PASSWORD)).status, 201);
    assert.equal((await session("wrong-password")).status, 400);
    assert.equal((await session("wrong-password")).status, 400);

    const samples = await scrape(platform.url);
    const value = (name: string, labels: Record<string, string> = {}) =>
      find(samples, name, labels).reduce((sum, s) => sum + s.value, 0);
    assert.equal(value("platform_oidc_tokens_issued_total", { grant: "client_credentials" }), 2);
    assert.equal(value("platform_oidc_tokens_issued_total"), 2, "a refused request issues nothing");
    assert.equal(value("platform_sign_ins_total", { method: "password", result: "succeeded" }), 1);
    assert.equal(value("platform_sign_ins_total", { method: "password", result: "failed" }), 2);
    assert.equal(value("platform_sign_ins_total", { result: "locked" }), 0);

    // users (machine, secret, session checks) and sessions were appended, each push timed
    assert.ok(value("platform_events_appended_total", { aggregate_type: "user" }) >= 3);
    assert.equal(value("platform_events_appended_total", { aggregate_type: "session" }), 3);
    assert.ok(value("platform_event_push_duration_seconds_count", { result: "appended" }) >= 4);
    // a wrong password appends its failure and then fails the call: the push itself committed
    assert.ok(value("platform_event_push_duration_seconds_sum", { result: "appended" }) > 0);
  });

  it("tells the database connections and the outbox backlog at scrape time", async () => {
    const samples = await scrape(platform.url);
    const one = (name: string, labels: Record<string, string> = {}) => {
      const found = find(samples, name, labels);
      assert.equal(found.length, 1, `${name} ${JSON.stringify(labels)}`);
      return found[0].value;
    };
    const max = one("platform_db_connections_max");
    assert.equal(max, platform.db.kind === "pglite" ? 1 : 20);
    const inUse = one("platform_db_connections", { state: "in_use" });
    const idle = one("platform_db_connections", { state: "idle" });
    assert.ok(inUse >= 0 && idle >= 0 && inUse + idle <= max, `${inUse} + ${idle} <= ${max}`);
    assert.equal(one("platform_db_waiting"), 0);
    assert.equal(one("platform_outbox_pending_deliveries"), 0);
    assert.equal(one("platform_outbox_oldest_due_seconds"), 0);
    assert.equal(one("platform_outbox_delivery_lag_seconds_count"), 0);
  });
});

describe("metrics on PLATFORM_METRICS_PORT", () => {
  let platform: TestPlatform;
  let withToken: TestPlatform;
  before(async () => {
    platform = await startPlatform({ listen: true, env: { PLATFORM_METRICS_PORT: "0" } });
    withToken = await startPlatform({
      listen: true,
      env: { PLATFORM_METRICS_PORT: "0", PLATFORM_METRICS_TOKEN: TOKEN },
    });
  });
  after(async () => {
    await platform?.stop();
    await withToken?.stop();
  });

  it("serves /metrics there only (no token needed unless set), not on the main port", async () => {
    assert.ok(platform.metricsPort && platform.metricsPort !== Number(new URL(platform.url).port));
    const metricsUrl = `http://127.0.0.1:${platform.metricsPort}`;
    assert.equal((await fetch(`${platform.url}/healthz`)).status, 200);
    const samples = await scrape(metricsUrl, undefined);
    assert.ok(find(samples, "platform_http_request_duration_seconds_count", { route: "/healthz" }).length);
    assert.equal((await fetch(`${platform.url}/metrics`)).status, 404);
    assert.equal((await fetch(`${metricsUrl}/healthz`)).status, 404);
    const post = await fetch(`${metricsUrl}/metrics`, { method: "POST" });
    assert.equal(post.status, 405);
    assert.equal(post.headers.get("allow"), "GET, HEAD");
  });

  it("needs the token there when one is set", async () => {
    const metricsUrl = `http://127.0.0.1:${withToken.metricsPort}`;
    const response = await fetch(`${metricsUrl}/metrics`);
    assert.equal(response.status, 401);
    assert.equal(response.headers.get("www-authenticate"), 'Bearer realm="metrics"');
    await scrape(metricsUrl, TOKEN);
    assert.equal(
      (await fetch(`${withToken.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })).status,
      404,
    );
  });

  it("closes its listener with the server", async () => {
    const port = platform.metricsPort;
    await platform.stop();
    await assert.rejects(fetch(`http://127.0.0.1:${port}/metrics`));
  });
});
