/*
 * A real Prometheus server (Debian's `prometheus` package; .ci/run installs it) scrapes a running
 * `platform start` every second on PLATFORM_METRICS_PORT with the bearer token of PLATFORM_METRICS_TOKEN,
 * and answers PromQL queries over what it scraped.
 */
import assert from "node:assert/strict";
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { ADMIN_PASSWORD, freshBackend, restClient, type TestBackend, tempDir } from "./helpers.ts";
import { basic, machineClient, postForm } from "./oidc.ts";
import { freePort, type RunningProcess, startProcess } from "./process.ts";
import { testTime } from "./time.ts";

const TOKEN = "scrape-token-0123456789abcdef";
const hasPrometheus = spawnSync("prometheus", ["--version"]).status === 0;
// CI installs the package: there a missing binary is a failure, not a reason to skip.
const skip =
  hasPrometheus || process.env.CI ? false : "needs Debian's prometheus package (apt-get install prometheus)";

/** The value of a PromQL query with one result, polled until `accept` takes it (bounded). */
async function waitForQuery(
  prometheusUrl: string,
  query: string,
  accept: (value: number) => boolean,
  timeoutMs = 60_000,
): Promise<number> {
  const deadline = Date.now() + testTime(timeoutMs);
  let last = "no answer";
  while (Date.now() < deadline) {
    const response = await fetch(`${prometheusUrl}/api/v1/query?query=${encodeURIComponent(query)}`);
    const body = (await response.json()) as {
      status: string;
      data?: { resultType: string; result: { metric: Record<string, string>; value: [number, string] }[] };
    };
    last = JSON.stringify(body);
    assert.equal(body.status, "success", last);
    const result = body.data!.result;
    if (result.length === 1) {
      const value = Number(result[0].value[1]);
      if (accept(value)) return value;
    }
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
  throw new Error(`${query}: no accepted answer in ${testTime(timeoutMs)} ms; last: ${last}`);
}

describe("Prometheus scrapes a running Platform", { skip }, () => {
  let backend: TestBackend;
  let platform: RunningProcess;
  let prometheus: ChildProcess | undefined;
  let prometheusUrl: string;
  let prometheusLog = "";
  let dir: string;
  let pat: string;

  before(async () => {
    dir = tempDir("prometheus-");
    backend = await freshBackend();
    const metricsPort = await freePort();
    const patPath = path.join(dir, "admin.pat");
    platform = await startProcess(
      {
        ...backend.env,
        PLATFORM_PORT: String(await freePort()),
        PLATFORM_METRICS_PORT: String(metricsPort),
        PLATFORM_METRICS_TOKEN: TOKEN,
        PLATFORM_FIRSTINSTANCE_PAT_PATH: patPath,
        PLATFORM_FIRSTINSTANCE_ADMIN_PASSWORD: ADMIN_PASSWORD,
      },
      60_000,
    );
    pat = readFileSync(patPath, "utf8").trim();

    const config = path.join(dir, "prometheus.yml");
    writeFileSync(
      config,
      [
        "global:",
        "  scrape_interval: 1s",
        "  evaluation_interval: 1s",
        "scrape_configs:",
        "  - job_name: platform",
        "    authorization:",
        "      type: Bearer",
        `      credentials: ${TOKEN}`,
        "    static_configs:",
        `      - targets: ["127.0.0.1:${metricsPort}"]`,
        "",
      ].join("\n"),
    );
    const prometheusPort = await freePort();
    prometheusUrl = `http://127.0.0.1:${prometheusPort}`;
    prometheus = spawn(
      "prometheus",
      [
        `--config.file=${config}`,
        `--storage.tsdb.path=${path.join(dir, "tsdb")}`,
        `--web.listen-address=127.0.0.1:${prometheusPort}`,
        "--log.level=warn",
      ],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    prometheus.stdout!.on("data", (d) => (prometheusLog += d));
    prometheus.stderr!.on("data", (d) => (prometheusLog += d));
    const deadline = Date.now() + testTime(60_000);
    for (;;) {
      if (prometheus.exitCode !== null) throw new Error(`prometheus exited:\n${prometheusLog}`);
      const ready = await fetch(`${prometheusUrl}/-/ready`).then(
        (r) => r.ok,
        () => false,
      );
      if (ready) break;
      if (Date.now() > deadline) throw new Error(`prometheus not ready in time:\n${prometheusLog}`);
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  });

  after(async () => {
    if (prometheus && prometheus.exitCode === null) {
      const exited = new Promise((resolve) => prometheus!.once("exit", resolve));
      prometheus.kill("SIGTERM");
      await exited;
    }
    await platform?.stop();
    await backend?.cleanup();
  });

  it("prints where the metrics are served", () => {
    assert.match(platform.stdout(), /^ {2}metrics: http:\/\/localhost:\d+\/metrics \(bearer token\)$/m);
  });

  it("scrapes with the token and answers PromQL over requests, tokens and sign-ins", async () => {
    assert.equal(await waitForQuery(prometheusUrl, 'up{job="platform"}', (v) => v === 1), 1);

    const rest = restClient(platform, () => pat);
    for (const id of ["123", "456"]) {
      const reply = await rest("GET", `/resources/v3alpha/users/${id}`);
      assert.equal(reply.status, 404, reply.text);
    }
    const machine = await machineClient(platform as never, pat, "scraped-client");
    const token = await postForm(
      `${platform.url}/oauth/v2/token`,
      { grant_type: "client_credentials" },
      basic(machine.clientId, machine.clientSecret),
    );
    assert.equal(token.status, 200, token.text);
    const session = await rest("POST", "/resources/v3alpha/sessions", {
      json: { checks: { user: { login_name: "admin" }, password: { password: ADMIN_PASSWORD } } },
    });
    assert.equal(session.status, 201, session.text);

    // Both users share one series: the RPC, not the path.
    const getUser = "platform.resources.user.v3alpha.PlatformUsers/GetUser";
    assert.equal(
      await waitForQuery(
        prometheusUrl,
        `sum(platform_http_request_duration_seconds_count{protocol="rest",route="${getUser}",status="404",rpc_code="NOT_FOUND"})`,
        (v) => v === 2,
      ),
      2,
    );
    assert.equal(
      await waitForQuery(
        prometheusUrl,
        `count(platform_http_request_duration_seconds_count{route="${getUser}"})`,
        (v) => v === 1,
      ),
      1,
    );
    assert.equal(
      await waitForQuery(
        prometheusUrl,
        'platform_oidc_tokens_issued_total{grant="client_credentials"}',
        (v) => v === 1,
      ),
      1,
    );
    assert.equal(
      await waitForQuery(
        prometheusUrl,
        'platform_sign_ins_total{method="password",result="succeeded"}',
        (v) => v === 1,
      ),
      1,
    );
    // A latency quantile from the histogram's buckets, as a dashboard would ask for it.
    const p99 = await waitForQuery(
      prometheusUrl,
      `histogram_quantile(0.99, sum by (le) (platform_http_request_duration_seconds_bucket{route="${getUser}"}))`,
      (v) => Number.isFinite(v),
    );
    assert.ok(p99 > 0 && p99 <= 10, String(p99));
    assert.ok(
      (await waitForQuery(prometheusUrl, "process_resident_memory_bytes", (v) => v > 0)) > 10_000_000,
    );
  });
});
