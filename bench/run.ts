// `npm run bench`: starts Platform in a child process on a fresh database (embedded PGlite, or PostgreSQL
// when DATABASE_URL is set) and measures requests per second and latency percentiles with autocannon:
// first the management API scenarios, then the OIDC scenarios side by side with the peer provider
// (panva's node-oidc-provider, in memory; see ../shared/bench/peer/README.md), one scenario after the other
// under the same load generator.
// Options: BENCH_DURATION (seconds per scenario, default 10), BENCH_CONNECTIONS (API scenarios, default 16),
// BENCH_OIDC_CONNECTIONS (OIDC scenarios, default 50 as the peer's), BENCH_WARMUP (OIDC, seconds, default 2),
// BENCH_ONLY (api | oidc; default both), BENCH_PEER_DIR (default ../shared/bench/peer; needs `npm ci` there;
// without it the OIDC scenarios run without the peer), BENCH_ROUNDS (OIDC: each scenario this many times,
// alternating Platform and the peer, medians reported; default 1).
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import autocannon from "autocannon";
import { freshBackend } from "../test/helpers.ts";

const duration = Number(process.env.BENCH_DURATION ?? 10);
const connections = Number(process.env.BENCH_CONNECTIONS ?? 16);
const oidcConnections = Number(process.env.BENCH_OIDC_CONNECTIONS ?? 50);
const warmup = Number(process.env.BENCH_WARMUP ?? 2);
const only = process.env.BENCH_ONLY;
const rounds = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 1));
const root = path.resolve(import.meta.dirname, "..");
const peerDir = path.resolve(process.env.BENCH_PEER_DIR ?? path.join(root, "../shared/bench/peer"));
const dir = mkdtempSync(path.join(os.tmpdir(), "platform-bench-"));
const patPath = path.join(dir, "admin.pat");
const port = 18000 + Math.floor(Math.random() * 1000);
// A fresh database every run: a new PGlite directory, or a new database on the DATABASE_URL server.
const backend = await freshBackend();

const child = spawn(process.execPath, [path.join(root, "bin/platform.js"), "start"], {
  env: {
    ...process.env,
    PLATFORM_PORT: String(port),
    DATABASE_URL: "",
    // PostgreSQL needs a master key; a throw-away one for the throw-away database.
    PLATFORM_MASTERKEY: backend.env.DATABASE_URL ? randomBytes(32).toString("hex") : "",
    ...backend.env,
    PLATFORM_FIRSTINSTANCE_PAT_PATH: patPath,
    PLATFORM_FIRSTINSTANCE_ADMIN_PASSWORD: "Bench-Password1!",
    PLATFORM_LOG_LEVEL: "warn",
  },
  stdio: ["ignore", "pipe", "inherit"],
});
try {
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on("data", (d: Buffer) => {
      if (String(d).includes("Platform is running")) resolve();
    });
    child.on("exit", (code) => reject(new Error(`platform exited with ${code}`)));
  });
} catch (error) {
  await backend.cleanup();
  throw error;
}
const url = `http://localhost:${port}`;
const token = readFileSync(patPath, "utf8").trim();
const auth = { authorization: `Bearer ${token}` };

interface Scenario {
  name: string;
  method?: "GET" | "PATCH" | "POST";
  path: string;
  headers?: Record<string, string>;
  bodies?: string[];
}

const scenarios: Scenario[] = [
  { name: "GET /healthz (no database)", path: "/healthz" },
  { name: "GET /ready (database round trip)", path: "/ready" },
  {
    name: "GET /settings/v3alpha/languages (PAT auth + settings read)",
    path: "/settings/v3alpha/languages",
    headers: auth,
  },
  {
    name: "PATCH /settings/v3alpha/languages (event append + projection)",
    method: "PATCH",
    path: "/settings/v3alpha/languages",
    headers: { ...auth, "content-type": "application/json" },
    bodies: ['{"default_language":{"key":"de"}}', '{"default_language":{"key":"fr"}}'],
  },
  {
    name: "GET /ui/login/loginname (login page: language settings + template)",
    path: "/ui/login/loginname",
    headers: { accept: "text/html", "accept-language": "de" },
  },
  {
    name: "POST /resources/v3alpha/sessions (login: argon2id password check)",
    method: "POST",
    path: "/resources/v3alpha/sessions",
    headers: { ...auth, "content-type": "application/json" },
    bodies: ['{"checks":{"user":{"login_name":"admin"},"password":{"password":"Bench-Password1!"}}}'],
  },
];

const cpu = os.cpus()[0]?.model ?? "unknown CPU";
console.log(
  `Platform benchmark: ${os.cpus().length} × ${cpu}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, node ${process.version}, ` +
    `${process.env.DATABASE_URL ? "PostgreSQL" : "embedded PGlite"}, ${duration} s per scenario; the load generator shares the machine\n`,
);
let peer: ChildProcess | undefined;
try {
  if (only !== "oidc") await apiScenarios();
  if (only !== "api") await oidcScenarios();
} finally {
  peer?.kill("SIGTERM");
  child.kill("SIGTERM");
  await new Promise((resolve) => child.on("exit", resolve));
  rmSync(dir, { recursive: true, force: true });
  await backend.cleanup();
}

async function apiScenarios(): Promise<void> {
  console.log(`Management API, ${connections} connections\n`);
  console.log("| scenario | req/s | p50 ms | p90 ms | p99 ms | errors |");
  console.log("|---|---:|---:|---:|---:|---:|");
  for (const scenario of scenarios) {
    let i = 0;
    const result = await autocannon({
      url: `${url}${scenario.path}`,
      method: scenario.method ?? "GET",
      headers: scenario.headers,
      connections,
      duration,
      requests: scenario.bodies
        ? [
            {
              setupRequest: (req: autocannon.Request) => ({
                ...req,
                body: scenario.bodies![i++ % scenario.bodies!.length],
              }),
            },
          ]
        : undefined,
    });
    const errors = result.errors + result.non2xx;
    console.log(
      `| ${scenario.name} | ${Math.round(result.requests.average)} | ${result.latency.p50} | ${result.latency.p90} | ${result.latency.p99} | ${errors} |`,
    );
  }
  console.log();
}

/** One line of the peer's load generator (bench.mjs): `{scenario, rps, p50, p99, errors, non2xx, ...}`. */
interface Measured {
  rps: number;
  p50: number | null;
  p99: number | null;
  errors: number;
  non2xx: number;
}

/** Runs the peer's load generator (bench.mjs) against an issuer. */
function peerLoad(issuer: string, scenario: string, env: Record<string, string> = {}): Promise<Measured> {
  return new Promise((resolve, reject) => {
    const load = spawn(process.execPath, ["bench.mjs", issuer, scenario], {
      cwd: peerDir,
      env: {
        ...process.env,
        DURATION: String(duration),
        CONNECTIONS: String(oidcConnections),
        WARMUP: String(warmup),
        ...env,
      },
      stdio: ["ignore", "pipe", "inherit"],
    });
    let out = "";
    load.stdout.on("data", (d) => (out += d));
    load.on("exit", (code) => {
      if (code !== 0) reject(new Error(`bench.mjs ${scenario} against ${issuer} exited with ${code}`));
      else resolve(JSON.parse(out.trim().split("\n").at(-1)!));
    });
  });
}

/** The same measurement as bench.mjs (2xx latencies per response), for a request it does not know (userinfo). */
async function ownLoad(request: autocannon.Options): Promise<Measured> {
  const run = async (seconds: number) => {
    const latencies: number[] = [];
    const result = await new Promise<autocannon.Result>((resolve, reject) => {
      const instance = autocannon(
        { ...request, connections: oidcConnections, duration: seconds },
        (error, done) => (error ? reject(error) : resolve(done)),
      );
      instance.on("response", (_client, status, _bytes, ms) => {
        if (status >= 200 && status < 300) latencies.push(ms);
      });
    });
    latencies.sort((a, b) => a - b);
    const pct = (p: number) =>
      latencies.length
        ? +latencies[Math.max(0, Math.ceil((p / 100) * latencies.length) - 1)].toFixed(2)
        : null;
    return {
      rps: Math.round(result.requests.average),
      p50: pct(50),
      p99: pct(99),
      errors: result.errors,
      non2xx: result.non2xx,
    };
  };
  if (warmup > 0) await run(warmup);
  return run(duration);
}

async function startPeer(): Promise<string | undefined> {
  if (!existsSync(path.join(peerDir, "node_modules", "oidc-provider"))) {
    console.log(`(no peer: ${peerDir} is missing or lacks node_modules; run npm ci there)\n`);
    return undefined;
  }
  const peerPort = port + 1000;
  peer = spawn(process.execPath, ["peer-server.mjs"], {
    cwd: peerDir,
    env: { ...process.env, PEER_PORT: String(peerPort), NODE_ENV: "production" },
    stdio: ["ignore", "pipe", "inherit"],
  });
  await new Promise<void>((resolve, reject) => {
    peer!.stdout!.on("data", (d: Buffer) => {
      if (String(d).includes("READY")) resolve();
    });
    peer!.on("exit", (code) => reject(new Error(`peer-server exited with ${code}`)));
  });
  return `http://127.0.0.1:${peerPort}`;
}

/** A machine user with `_generate_secret` credentials, made through the API. */
async function machineClient(username: string, type: "BEARER" | "JWT") {
  const headers = { ...auth, "content-type": "application/json" };
  const created = await fetch(`${url}/resources/v3alpha/users`, {
    method: "POST",
    headers,
    body: JSON.stringify({
      username,
      machine: { name: username, access_token_type: `ACCESS_TOKEN_TYPE_${type}` },
    }),
  });
  const id = ((await created.json()) as { details: { id: string } }).details.id;
  const secret = await fetch(`${url}/resources/v3alpha/users/${id}/_generate_secret`, {
    method: "POST",
    headers,
    body: "{}",
  });
  const { client_id, client_secret } = (await secret.json()) as { client_id: string; client_secret: string };
  return { CLIENT_ID: client_id, CLIENT_SECRET: client_secret };
}

async function oidcScenarios(): Promise<void> {
  const opaque = await machineClient("bench-opaque", "BEARER");
  const jwt = await machineClient("bench-jwt", "JWT");
  const peerUrl = await startPeer();
  // Userinfo needs a user's token with openid: the opaque client's own (the peer has no comparable case:
  // its userinfo refuses client_credentials tokens and a user's token needs its interactive login).
  const tokenResponse = await fetch(`${url}/oauth/v2/token`, {
    method: "POST",
    headers: {
      authorization: `Basic ${Buffer.from(`${opaque.CLIENT_ID}:${opaque.CLIENT_SECRET}`).toString("base64")}`,
      "content-type": "application/x-www-form-urlencoded",
    },
    body: "grant_type=client_credentials&scope=openid%20profile",
  });
  const userToken = ((await tokenResponse.json()) as { access_token: string }).access_token;

  const oidc: Array<{ name: string; ours: () => Promise<Measured>; peer?: string }> = [
    { name: "discovery", ours: () => peerLoad(url, "discovery", opaque), peer: "discovery" },
    { name: "jwks", ours: () => peerLoad(url, "jwks", opaque), peer: "jwks" },
    {
      name: "client_credentials (opaque)",
      ours: () => peerLoad(url, "client_credentials", opaque),
      peer: "client_credentials",
    },
    {
      // RS256 signing per token; the peer issues opaque tokens only, so there is no like-for-like case.
      name: "client_credentials (JWT; no peer case)",
      ours: () => peerLoad(url, "client_credentials", jwt),
    },
    {
      name: "introspection (opaque)",
      ours: () => peerLoad(url, "introspection", opaque),
      peer: "introspection",
    },
    {
      name: "introspection (JWT; peer: opaque)",
      ours: () => peerLoad(url, "introspection", jwt),
      peer: "introspection",
    },
    {
      name: "userinfo (opaque; no peer case)",
      ours: () =>
        ownLoad({ url: `${url}/oidc/v1/userinfo`, headers: { authorization: `Bearer ${userToken}` } }),
    },
  ];

  console.log(
    `OIDC endpoints, ${oidcConnections} connections, ${warmup} s warm-up${rounds > 1 ? `, median of ${rounds} alternating rounds` : ""}; ` +
      "peer = node-oidc-provider (in memory), ratio = ours / peer (latency: peer / ours)\n",
  );
  console.log(
    "| scenario | req/s | p50 ms | p99 ms | peer req/s | peer p50 | peer p99 | req/s ratio | p50 ratio | p99 ratio | errors |",
  );
  console.log("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
  const ratio = (a: number | null, b: number | null) => (a && b ? (a / b).toFixed(2) : "–");
  for (const scenario of oidc) {
    const oursRuns: Measured[] = [];
    const theirRuns: Measured[] = [];
    for (let round = 0; round < rounds; round++) {
      oursRuns.push(await scenario.ours());
      if (peerUrl && scenario.peer) theirRuns.push(await peerLoad(peerUrl, scenario.peer));
    }
    const ours = median(oursRuns);
    const theirs = theirRuns.length ? median(theirRuns) : undefined;
    const errors = ours.errors + ours.non2xx + (theirs ? theirs.errors + theirs.non2xx : 0);
    console.log(
      `| ${scenario.name} | ${ours.rps} | ${ours.p50} | ${ours.p99} | ${theirs?.rps ?? "–"} | ${theirs?.p50 ?? "–"} | ${theirs?.p99 ?? "–"} | ` +
        `${ratio(ours.rps, theirs?.rps ?? null)} | ${ratio(theirs?.p50 ?? null, ours.p50)} | ${ratio(theirs?.p99 ?? null, ours.p99)} | ${errors} |`,
    );
  }
  console.log();
}

/** Per field median of several measurements (errors summed). */
function median(runs: Measured[]): Measured {
  const mid = (values: Array<number | null>) => {
    const sorted = values.filter((v): v is number => v !== null).sort((a, b) => a - b);
    return sorted.length ? sorted[Math.floor(sorted.length / 2)] : null;
  };
  return {
    rps: mid(runs.map((r) => r.rps)) ?? 0,
    p50: mid(runs.map((r) => r.p50)),
    p99: mid(runs.map((r) => r.p99)),
    errors: runs.reduce((n, r) => n + r.errors, 0),
    non2xx: runs.reduce((n, r) => n + r.non2xx, 0),
  };
}
