// The cost of tracing on the token endpoint: `BENCH_ONLY=tracing npm run bench` (or
// `node --import tsx bench/tracing.ts`). Starts three Platform processes, each on a fresh database
// (embedded, or a new database on the DATABASE_URL server): tracing off, on with every request sampled,
// and on with 10 % sampled (parentbased_traceidratio), all exporting OTLP/HTTP protobuf (the default) to a
// local receiver that counts and discards. Then it loads each with client_credentials token requests
// (autocannon, HTTP/1.1 keep-alive, 2xx latencies per response), round after round alternating the three
// (each round in another order), and reports the median of each column, with the server's CPU time per
// request (from /proc, so Linux only), which neighbours on a shared machine disturb less than the rate.
// Options: BENCH_DURATION (s, default 10), BENCH_OIDC_CONNECTIONS (default 50), BENCH_WARMUP (s, default 2),
// BENCH_ROUNDS (default 3).
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import autocannon from "autocannon";
import { freshBackend, type TestBackend } from "../test/helpers.ts";

const duration = Number(process.env.BENCH_DURATION ?? 10);
const connections = Number(process.env.BENCH_OIDC_CONNECTIONS ?? 50);
const warmup = Number(process.env.BENCH_WARMUP ?? 2);
const rounds = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 3));
const root = path.resolve(import.meta.dirname, "..");
/** USER_HZ of /proc/<pid>/stat (100 on Linux). */
const CLOCK_TICKS = 100;
const dir = mkdtempSync(path.join(os.tmpdir(), "platform-bench-tracing-"));

// The receiver: accepts every export, keeps only the byte count per server (`/<server>/v1/traces`).
const exportedBytes = new Map<string, number>();
const receiver = createServer((req, res) => {
  const server = (req.url ?? "").split("/")[1];
  req.on("data", (chunk: Buffer) =>
    exportedBytes.set(server, (exportedBytes.get(server) ?? 0) + chunk.length),
  );
  req.on("end", () => res.writeHead(200, { "content-type": "application/x-protobuf" }).end());
});
await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
const endpoint = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;

interface Mode {
  name: string;
  env: Record<string, string>;
}
const modes: Mode[] = [
  { name: "off", env: {} },
  {
    name: "on, every request sampled",
    env: { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${endpoint}/1/v1/traces` },
  },
  {
    name: "on, 10 % sampled",
    env: {
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${endpoint}/2/v1/traces`,
      OTEL_TRACES_SAMPLER: "parentbased_traceidratio",
      OTEL_TRACES_SAMPLER_ARG: "0.1",
    },
  },
];

interface Server {
  mode: Mode;
  url: string;
  child: ChildProcess;
  backend: TestBackend;
  client: { id: string; secret: string };
}

interface Measured {
  rps: number;
  p50: number;
  p99: number;
  errors: number;
  /** CPU time of the server process per answered request (less disturbed by neighbours than req/s). */
  cpuMs: number;
  /** 2xx answers, warm-up included (what the exported bytes are divided by). */
  answered: number;
}

const servers: Server[] = [];
try {
  for (const mode of modes) servers.push(await start(mode, servers.length));
  console.log(
    `Tracing cost, POST /oauth/v2/token (client_credentials, opaque token): ${os.cpus().length} × ${os.cpus()[0]?.model}, ` +
      `node ${process.version}, ${process.env.DATABASE_URL ? "PostgreSQL" : "embedded PGlite"}, ${connections} connections, ` +
      `${warmup} s warm-up, ${duration} s measured, median of ${rounds} alternating rounds\n`,
  );
  const results = new Map<Server, Measured[]>(servers.map((s) => [s, []]));
  // each round in another order, so that no server always follows the same one
  for (let round = 0; round < rounds; round++)
    for (let i = 0; i < servers.length; i++) {
      const server = servers[(i + round) % servers.length];
      results.get(server)!.push(await load(server));
    }
  await stopAll(); // the exporters flush what they still hold
  console.log(
    "| tracing | req/s | p50 ms | p99 ms | server CPU ms per request | exported bytes per request | errors |",
  );
  console.log("|---|---:|---:|---:|---:|---:|---:|");
  for (const [server, runs] of results) {
    const m = (key: keyof Measured) => median(runs.map((r) => r[key]));
    const answered = runs.reduce((n, r) => n + r.answered, 0);
    const perRequest = Math.round((exportedBytes.get(String(servers.indexOf(server))) ?? 0) / answered);
    console.log(
      `| ${server.mode.name} | ${Math.round(m("rps"))} | ${m("p50")} | ${m("p99")} | ${m("cpuMs")} | ${perRequest} | ${runs.reduce((n, r) => n + r.errors, 0)} |`,
    );
  }
} finally {
  await stopAll();
  for (const server of servers) await server.backend.cleanup();
  receiver.close();
  rmSync(dir, { recursive: true, force: true });
}

async function stopAll(): Promise<void> {
  await Promise.all(
    servers.map((s) => {
      if (s.child.exitCode !== null || s.child.signalCode !== null) return undefined;
      s.child.kill("SIGTERM");
      return new Promise((resolve) => s.child.once("exit", resolve));
    }),
  );
}

async function start(mode: Mode, index: number): Promise<Server> {
  const backend = await freshBackend();
  const port = 19000 + Math.floor(Math.random() * 900) + index;
  const patPath = path.join(dir, `admin-${index}.pat`);
  const child = spawn(process.execPath, [path.join(root, "bin/platform.js"), "start"], {
    env: {
      ...process.env,
      PLATFORM_PORT: String(port),
      DATABASE_URL: "",
      PLATFORM_MASTERKEY: backend.env.DATABASE_URL ? randomBytes(32).toString("hex") : "",
      ...backend.env,
      PLATFORM_FIRSTINSTANCE_PAT_PATH: patPath,
      PLATFORM_LOG_LEVEL: "warn",
      ...mode.env,
    },
    stdio: ["ignore", "pipe", "inherit"],
  });
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on("data", (d: Buffer) => {
      if (String(d).includes("Platform is running")) resolve();
    });
    child.on("exit", (code) => reject(new Error(`platform (${mode.name}) exited with ${code}`)));
  });
  const url = `http://localhost:${port}`;
  const headers = {
    authorization: `Bearer ${readFileSync(patPath, "utf8").trim()}`,
    "content-type": "application/json",
  };
  const created = await fetch(`${url}/resources/v3alpha/users`, {
    method: "POST",
    headers,
    body: JSON.stringify({ username: "bench", machine: { name: "bench" } }),
  });
  const userId = ((await created.json()) as { details: { id: string } }).details.id;
  const secret = await fetch(`${url}/resources/v3alpha/users/${userId}/_generate_secret`, {
    method: "POST",
    headers,
    body: "{}",
  });
  const { client_id, client_secret } = (await secret.json()) as { client_id: string; client_secret: string };
  return { mode, url, child, backend, client: { id: client_id, secret: client_secret } };
}

async function load(server: Server): Promise<Measured> {
  const request: autocannon.Options = {
    url: `${server.url}/oauth/v2/token`,
    method: "POST",
    headers: {
      authorization: `Basic ${Buffer.from(`${server.client.id}:${server.client.secret}`).toString("base64")}`,
      "content-type": "application/x-www-form-urlencoded",
    },
    body: "grant_type=client_credentials",
    connections,
  };
  let answered = 0;
  const run = async (seconds: number) => {
    const latencies: number[] = [];
    const cpuBefore = cpuTicks(server.child.pid!);
    const result = await new Promise<autocannon.Result>((resolve, reject) => {
      const instance = autocannon({ ...request, duration: seconds }, (error, done) =>
        error ? reject(error) : resolve(done),
      );
      instance.on("response", (_client, status, _bytes, ms) => {
        if (status >= 200 && status < 300) latencies.push(ms);
      });
    });
    const cpuMs = ((cpuTicks(server.child.pid!) - cpuBefore) * 1000) / CLOCK_TICKS / latencies.length;
    answered += latencies.length;
    latencies.sort((a, b) => a - b);
    const pct = (p: number) =>
      +latencies[Math.max(0, Math.ceil((p / 100) * latencies.length) - 1)].toFixed(2);
    return {
      rps: result.requests.average,
      p50: pct(50),
      p99: pct(99),
      errors: result.errors + result.non2xx,
      cpuMs: +cpuMs.toFixed(3),
    };
  };
  if (warmup > 0) await run(warmup);
  return { ...(await run(duration)), answered };
}

/** User and system CPU time of a process so far, in clock ticks (fields 14 and 15 of /proc/<pid>/stat). */
function cpuTicks(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return Number(fields[11]) + Number(fields[12]);
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : +((sorted[mid - 1] + sorted[mid]) / 2).toFixed(2);
}
