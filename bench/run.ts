// `npm run bench`: starts Platform in a child process on a fresh database (embedded PGlite, or PostgreSQL
// when DATABASE_URL is set) and measures requests per second and latency percentiles with autocannon:
// first the management API scenarios, then the OIDC scenarios side by side with the peer provider
// (panva's node-oidc-provider, in memory; see ../shared/bench/peer/README.md), one scenario after the other
// under the same load generator.
// Options: BENCH_DURATION (seconds per scenario, default 10), BENCH_CONNECTIONS (API scenarios, default 16),
// BENCH_OIDC_CONNECTIONS (OIDC scenarios, default 50 as the peer's), BENCH_WARMUP (OIDC, seconds, default 2),
// BENCH_ONLY (api | oidc | signin | contention | tracing | growth | caches | notifications; default all but tracing, growth and notifications; caches: PostgreSQL only, bench/caches.ts), BENCH_PEER_DIR (default ../shared/bench/peer; needs `npm ci` there;
// without it the OIDC scenarios run without the peer), BENCH_ROUNDS (OIDC: each scenario this many times,
// alternating Platform and the peer, medians reported; default 1), BENCH_SIGNIN_CLIENTS (browser sign-in:
// concurrent browsers, default 8), BENCH_TOTP_USERS (the password + TOTP sign-ins' users, default 1000: each
// signs in at most twice per 30 s step), BENCH_WRITERS (contention: concurrent clients creating users while the browsers sign in, default 24), BENCH_SIGNIN_STEPS (after the rounds, that many sign-ins of each
// kind one at a time, CPU per request: ./signin-steps.ts), BENCH_JSON (append every row as a JSON line to this file),
// BENCH_SERVER_DIR (run the server of another checkout; bench/compare.ts), BENCH_SERVER_NODE_ARGS (node
// options for the server only, e.g. a CPU profile), BENCH_API_MATCH (only the API scenarios whose name
// matches this regular expression, e.g. "create human user"; BENCH_OIDC_MATCH likewise for the OIDC ones).
// Every scenario ends as a row of one table (bench/report.ts), printed at the end.
// The browser sign-in scenario (authorize → login name → password → code → token, eight requests) runs
// with the login UI's rate limits off and is reported beside the raw argon2id verifications per second of
// this machine (same parameters, measured in this process while the server is idle).
import { type ChildProcess, spawn } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import autocannon from "autocannon";
import { generate } from "otplib";
import pg from "pg";
import { hashPassword, verifyPassword } from "../src/crypto/password.ts";
import { newTotpSecret, totpStep } from "../src/domain/user/factors/totp.ts";
import { freshBackend } from "../test/helpers.ts";
import { printTable, record } from "./report.ts";
import { StepProbe } from "./signin-steps.ts";

// BENCH_ONLY=tracing: the token endpoint with tracing off and on, servers of its own (./tracing.ts).
if (process.env.BENCH_ONLY === "tracing") {
  await import("./tracing.ts");
  process.exit(0);
}

// BENCH_ONLY=notifications: the notification outbox's worker draining a backlog to a local SMTP server
// (./notifications.ts).
if (process.env.BENCH_ONLY === "notifications") {
  await import("./notifications.ts");
  process.exit(0);
}

// BENCH_ONLY=growth: each search on a small and a loaded database, servers of its own (./growth.ts).
if (process.env.BENCH_ONLY === "growth") {
  await import("./growth.ts");
  process.exit(0);
}

const duration = Number(process.env.BENCH_DURATION ?? 10);
const connections = Number(process.env.BENCH_CONNECTIONS ?? 16);
const oidcConnections = Number(process.env.BENCH_OIDC_CONNECTIONS ?? 50);
const warmup = Number(process.env.BENCH_WARMUP ?? 2);
const only = process.env.BENCH_ONLY;
const rounds = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 1));
const signInClients = Number(process.env.BENCH_SIGNIN_CLIENTS ?? 8);
/**
 * The sign-in browsers' connections: node:http with keep-alive, as a load generator holds them (a browser
 * keeps its connection too). Global `fetch` (undici's WHATWG layer: streams, Headers, Response objects)
 * cost the bench process about as much CPU per request as the server's own work on a login page, on the
 * cores the server uses: see docs/operations.md, "Where the time goes".
 */
const signInAgent = new http.Agent({ keepAlive: true, maxSockets: signInClients });
/** Set while BENCH_SIGNIN_STEPS charges each request's CPU to its step (./signin-steps.ts). */
let stepProbe: StepProbe | undefined;
/** How often a TOTP sign-in waited for the next time step (every user used up: raise BENCH_TOTP_USERS). */
let totpStalls = 0;
const ADMIN_PASSWORD = "Bench-Password1!";
/** The password-only sign-in's account. */
const ADMIN_ACCOUNT: SignInAccount = { loginName: "admin" };
/** The last CPU time read of each PostgreSQL backend of the bench's database (cpuNow). */
const postgresBackendsSeen = new Map<number, number>();
const root = path.resolve(import.meta.dirname, "..");
const peerDir = path.resolve(process.env.BENCH_PEER_DIR ?? path.join(root, "../shared/bench/peer"));
const dir = mkdtempSync(path.join(os.tmpdir(), "platform-bench-"));
const patPath = path.join(dir, "admin.pat");
const port = 18000 + Math.floor(Math.random() * 1000);
// A fresh database every run: a new PGlite directory, or a new database on the DATABASE_URL server.
const backend = await freshBackend();

// BENCH_SERVER_DIR: the server under test from another checkout (an older version, for a before/after
// comparison by bench/compare.ts); the scenarios and the load generator stay this checkout's.
const serverDir = path.resolve(process.env.BENCH_SERVER_DIR ?? root);
// BENCH_SERVER_NODE_ARGS: node options for the server only, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof" to
// see where a scenario's time goes (NODE_OPTIONS refuses --cpu-prof, and would profile the load generator too).
const serverNodeArgs = (process.env.BENCH_SERVER_NODE_ARGS ?? "").split(" ").filter(Boolean);
const child = spawn(process.execPath, [...serverNodeArgs, path.join(serverDir, "bin/platform.js"), "start"], {
  cwd: serverDir,
  env: {
    ...process.env,
    PLATFORM_PORT: String(port),
    DATABASE_URL: "",
    // PostgreSQL needs a master key; a throw-away one for the throw-away database.
    PLATFORM_MASTERKEY: backend.env.DATABASE_URL ? randomBytes(32).toString("hex") : "",
    ...backend.env,
    PLATFORM_FIRSTINSTANCE_PAT_PATH: patPath,
    PLATFORM_FIRSTINSTANCE_ADMIN_PASSWORD: ADMIN_PASSWORD,
    PLATFORM_LOG_LEVEL: "warn",
    // the browser sign-in scenario signs one person in many times a second from one address
    PLATFORM_LOGIN_ATTEMPTS_PER_IP: "0",
    PLATFORM_LOGIN_ATTEMPTS_PER_NAME: "0",
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
  /** A body per request (the i-th), for requests that must differ (unique usernames). */
  body?: (i: number) => string;
  /** Run once before the scenario; false: the server cannot (an older version), the scenario is skipped. */
  setup?: () => Promise<boolean>;
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
    // the instance branded (colours in both schemes, a logo) and a text overridden: the page links its
    // branding stylesheet and shows the custom title
    name: "GET /ui/login/loginname (branded: colours + logo, stylesheet link, a custom text)",
    path: "/ui/login/loginname",
    headers: { accept: "text/html", "accept-language": "de" },
    setup: async () => {
      const png = Buffer.from(
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC",
        "base64",
      );
      const response = await fetch(`${url}/settings/v3alpha/branding`, {
        method: "PATCH",
        headers: { ...auth, "content-type": "application/json" },
        body: JSON.stringify({
          primary_color: { set: "#b23c17" },
          background_color: { set: "#fffaf5" },
          primary_color_dark: { set: "#ff9e7a" },
          logo: { set: { content: png.toString("base64"), content_type: "image/png" } },
        }),
      });
      const texts = await fetch(`${url}/settings/v3alpha/texts/de`, {
        method: "PATCH",
        headers: { ...auth, "content-type": "application/json" },
        body: JSON.stringify({ texts: { "login.loginname.title": { set: "Willkommen zurück" } } }),
      });
      return response.status === 200 && texts.status === 200;
    },
  },
  {
    name: "POST /resources/v3alpha/sessions (login: argon2id password check)",
    method: "POST",
    path: "/resources/v3alpha/sessions",
    headers: { ...auth, "content-type": "application/json" },
    bodies: ['{"checks":{"user":{"login_name":"admin"},"password":{"password":"Bench-Password1!"}}}'],
  },
  {
    // a new human user per request (unique username and e-mail), without a password: no argon2id hash
    name: "POST /resources/v3alpha/users (create human user, no password: event + projection)",
    method: "POST",
    path: "/resources/v3alpha/users",
    headers: { ...auth, "content-type": "application/json" },
    body: (i) => {
      const name = `bench-${process.pid}-${Date.now().toString(36)}-${i}`;
      return JSON.stringify({
        username: name,
        human: {
          profile: { given_name: "Bench", family_name: `User ${i}` },
          email: { address: `${name}@bench.example` },
        },
      });
    },
  },
];

const cpu = os.cpus()[0]?.model ?? "unknown CPU";
console.log(
  `Platform benchmark: ${os.cpus().length} × ${cpu}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, node ${process.version}, ` +
    `${process.env.DATABASE_URL ? "PostgreSQL" : "embedded PGlite"}, ${duration} s per scenario; the load generator shares the machine\n`,
);
let peer: ChildProcess | undefined;
try {
  if (!only || only === "api") await apiScenarios();
  if (!only || only === "oidc") await oidcScenarios();
  if (!only || only === "signin") await signInScenario();
  if (!only || only === "contention") await signInUnderWrites();
  // two processes on one PostgreSQL database: how soon one refuses what the other revoked (bench/caches.ts)
  if (process.env.DATABASE_URL && (!only || only === "caches"))
    await (await import("./caches.ts")).revocationLag();
  printTable();
} finally {
  peer?.kill("SIGTERM");
  child.kill("SIGTERM");
  await new Promise((resolve) => child.on("exit", resolve));
  rmSync(dir, { recursive: true, force: true });
  await backend.cleanup();
}

async function apiScenarios(): Promise<void> {
  console.log(`Management API, ${connections} connections`);
  const match = process.env.BENCH_API_MATCH ? new RegExp(process.env.BENCH_API_MATCH) : undefined;
  for (const scenario of scenarios.filter((s) => !match || match.test(s.name))) {
    if (scenario.setup && !(await scenario.setup())) {
      console.log(`skipped (the server cannot set it up): ${scenario.name}`);
      continue;
    }
    let i = 0;
    const cpuBefore = await cpuNow();
    const result = await autocannon({
      url: `${url}${scenario.path}`,
      method: scenario.method ?? "GET",
      headers: scenario.headers,
      connections,
      duration,
      requests:
        scenario.bodies || scenario.body
          ? [
              {
                setupRequest: (req: autocannon.Request) => ({
                  ...req,
                  body: scenario.body ? scenario.body(i++) : scenario.bodies![i++ % scenario.bodies!.length],
                }),
              },
            ]
          : undefined,
    });
    const cpuAfter = await cpuNow();
    // CPU per request tells a change's effect even when the machine is busy (req/s does not)
    const perRequest = (before: number | null, after: number | null) =>
      before === null || after === null ? "–" : ((after - before) / result.requests.total).toFixed(3);
    const note =
      `CPU ms per request: server ${perRequest(cpuBefore.server, cpuAfter.server)}` +
      `${backend.env.DATABASE_URL ? `, PostgreSQL backends ${perRequest(cpuBefore.postgres, cpuAfter.postgres)}` : ""}`;
    console.log(`  ${scenario.name}: ${note}`);
    record({
      group: "api",
      scenario: scenario.name,
      rps: Math.round(result.requests.average),
      p50: result.latency.p50,
      p99: result.latency.p99,
      errors: result.errors + result.non2xx,
      note,
    });
  }
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

/** A project with an API app (client_secret_basic), made through the management API. */
async function benchProject(): Promise<{ projectId: string; clientId: string; secret: string }> {
  const headers = { ...auth, "content-type": "application/json" };
  const project = await fetch(`${url}/resources/v3alpha/projects`, {
    method: "POST",
    headers,
    body: JSON.stringify({ name: "bench-api" }),
  });
  const projectId = ((await project.json()) as { details: { id: string } }).details.id;
  const app = await fetch(`${url}/resources/v3alpha/projects/${projectId}/apps`, {
    method: "POST",
    headers,
    body: JSON.stringify({ name: "bench-api", api: { auth_method: "API_AUTH_METHOD_TYPE_BASIC" } }),
  });
  const { client_id, client_secret } = (await app.json()) as { client_id: string; client_secret: string };
  return { projectId, clientId: client_id, secret: client_secret };
}

/** Creates a web key of `config` and makes it the one that signs (POST web_keys, then `_activate`). */
function activateWebKey(config: Record<string, unknown>): () => Promise<void> {
  return async () => {
    const headers = { ...auth, "content-type": "application/json" };
    const created = await fetch(`${url}/resources/v3alpha/web_keys`, {
      method: "POST",
      headers,
      body: JSON.stringify(config),
    });
    const id = ((await created.json()) as { details?: { id: string } }).details?.id;
    if (!id) throw new Error(`web key ${JSON.stringify(config)}: ${created.status}`);
    const activated = await fetch(`${url}/resources/v3alpha/web_keys/${id}/_activate`, {
      method: "POST",
      headers,
      body: "{}",
    });
    if (!activated.ok) throw new Error(`web key ${id}: _activate ${activated.status}`);
  };
}

/** An access token of a machine client (client_credentials with `scope`). */
async function clientCredentialsToken(
  client: { CLIENT_ID: string; CLIENT_SECRET: string },
  scope: string,
): Promise<string> {
  const response = await fetch(`${url}/oauth/v2/token`, {
    method: "POST",
    headers: {
      authorization: `Basic ${Buffer.from(`${client.CLIENT_ID}:${client.CLIENT_SECRET}`).toString("base64")}`,
      "content-type": "application/x-www-form-urlencoded",
    },
    body: new URLSearchParams({ grant_type: "client_credentials", scope }).toString(),
  });
  const body = (await response.json()) as { access_token?: string };
  if (!body.access_token) throw new Error(`client_credentials (${scope}): ${JSON.stringify(body)}`);
  return body.access_token;
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
  // Audience-scoped tokens, as machine clients of an API ask for them (the peer's comparison case is its
  // own unscoped one: it does not know this scope). The project's API app is the resource server that
  // introspects them.
  const project = await benchProject();
  const scoped = { SCOPE: `openid urn:platform:iam:org:project:id:${project.projectId}:aud` };
  const introspectAsApi = {
    INTROSPECT_CLIENT_ID: project.clientId,
    INTROSPECT_CLIENT_SECRET: project.secret,
  };
  const scopedUserToken = await clientCredentialsToken(opaque, `${scoped.SCOPE} profile`);

  const oidc: Array<{
    name: string;
    ours: () => Promise<Measured>;
    peer?: string;
    /** Run once before the scenario's rounds (what it changes stays: such scenarios come last). */
    setup?: () => Promise<void>;
  }> = [
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
    {
      name: "client_credentials + project audience (opaque; peer: unscoped)",
      ours: () => peerLoad(url, "client_credentials", { ...opaque, ...scoped }),
      peer: "client_credentials",
    },
    {
      name: "client_credentials + project audience (JWT; peer: unscoped opaque)",
      ours: () => peerLoad(url, "client_credentials", { ...jwt, ...scoped }),
      peer: "client_credentials",
    },
    {
      name: "introspection of an audience-scoped token by its API (opaque; peer: unscoped)",
      ours: () => peerLoad(url, "introspection", { ...opaque, ...scoped, ...introspectAsApi }),
      peer: "introspection",
    },
    {
      name: "introspection of an audience-scoped token by its API (JWT; peer: unscoped opaque)",
      ours: () => peerLoad(url, "introspection", { ...jwt, ...scoped, ...introspectAsApi }),
      peer: "introspection",
    },
    {
      // the peer's userinfo refuses client_credentials tokens: compared with its introspection (one
      // token lookup, like userinfo)
      name: "userinfo of an audience-scoped token (opaque; peer: introspection)",
      ours: () =>
        ownLoad({ url: `${url}/oidc/v1/userinfo`, headers: { authorization: `Bearer ${scopedUserToken}` } }),
      peer: "introspection",
    },
    {
      // An administrator's choice (web keys API): ECDSA P-256 signs in a tenth of RS256's time.
      name: "client_credentials + project audience (JWT, ES256 web key; peer: unscoped opaque)",
      setup: activateWebKey({ ecdsa: { curve: "ECDSA_CURVE_P256" } }),
      ours: () => peerLoad(url, "client_credentials", { ...jwt, ...scoped }),
      peer: "client_credentials",
    },
    {
      name: "introspection of an audience-scoped token by its API (JWT, ES256 web key; peer: unscoped opaque)",
      ours: () => peerLoad(url, "introspection", { ...jwt, ...scoped, ...introspectAsApi }),
      peer: "introspection",
    },
  ];

  console.log(
    `OIDC endpoints, ${oidcConnections} connections, ${warmup} s warm-up${rounds > 1 ? `, median of ${rounds} alternating rounds` : ""}; ` +
      "peer = node-oidc-provider (in memory), ratio = ours / peer (latency: peer / ours)",
  );
  // BENCH_OIDC_MATCH: only the OIDC scenarios whose name matches this regular expression (e.g. "audience")
  const match = process.env.BENCH_OIDC_MATCH ? new RegExp(process.env.BENCH_OIDC_MATCH) : undefined;
  for (const scenario of oidc.filter((s) => !match || match.test(s.name))) {
    const oursRuns: Measured[] = [];
    const theirRuns: Measured[] = [];
    const oursCpu: Array<number | null> = [];
    const oursPostgresCpu: Array<number | null> = [];
    const theirCpu: Array<number | null> = [];
    await scenario.setup?.();
    for (let round = 0; round < rounds; round++) {
      oursRuns.push(await withCpu(child.pid, oursCpu, scenario.ours, oursPostgresCpu));
      if (peerUrl && scenario.peer)
        theirRuns.push(await withCpu(peer?.pid, theirCpu, () => peerLoad(peerUrl, scenario.peer!)));
    }
    const ours = median(oursRuns);
    const theirs = theirRuns.length ? median(theirRuns) : undefined;
    const cpu = (values: Array<number | null>) => middle(values)?.toFixed(3) ?? "–";
    record({
      group: "oidc",
      scenario: scenario.name,
      rps: ours.rps,
      p50: ours.p50,
      p99: ours.p99,
      errors: ours.errors + ours.non2xx + (theirs ? theirs.errors + theirs.non2xx : 0),
      reference: theirs && { name: "peer", rps: theirs.rps, p50: theirs.p50, p99: theirs.p99 },
      note:
        `server CPU per request ${cpu(oursCpu)} ms` +
        `${backend.env.DATABASE_URL ? ` + PostgreSQL backends ${cpu(oursPostgresCpu)} ms` : ""}` +
        `${theirs ? `, peer ${cpu(theirCpu)} ms (no database)` : ""}`,
    });
  }
}

/**
 * Runs a load and pushes the CPU time (user + system) the server process `pid` spent per request meanwhile, in
 * ms (Linux, /proc; null elsewhere): steadier than req/s on a shared machine. The requests are estimated as
 * req/s × (warm-up + duration), since the load generator reports those of the measured part only. With
 * `postgresInto` (our server) the PostgreSQL backends' CPU per request too: the peer keeps its tokens in
 * memory, so a per-CPU comparison counts both of ours against its one process.
 */
async function withCpu(
  pid: number | undefined,
  into: Array<number | null>,
  run: () => Promise<Measured>,
  postgresInto?: Array<number | null>,
): Promise<Measured> {
  const postgresBefore = postgresInto && (await cpuNow()).postgres;
  const before = cpuMs(pid);
  const measured = await run();
  const after = cpuMs(pid);
  const postgresAfter = postgresInto && (await cpuNow()).postgres;
  const requests = measured.rps * (warmup + duration);
  const perRequest = (from: number | null | undefined, to: number | null | undefined) =>
    from !== undefined && from !== null && to !== undefined && to !== null && requests > 0
      ? (to - from) / requests
      : null;
  into.push(perRequest(before, after));
  postgresInto?.push(perRequest(postgresBefore, postgresAfter));
  return measured;
}

/** CPU time a process has used, in ms (clock ticks of 10 ms), from /proc/<pid>/stat. */
function cpuMs(pid: number | undefined): number | undefined {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return undefined;
  }
}

/** The median of the numbers given (nulls left out). */
function middle(values: Array<number | null>): number | null {
  const sorted = values.filter((v): v is number => v !== null).sort((a, b) => a - b);
  return sorted.length ? sorted[Math.floor(sorted.length / 2)] : null;
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

/** One browser's requests: keeps its cookies, never follows redirects. (A function: hoisted above the run.) */
function benchBrowser() {
  const cookies = new Map<string, string>();
  return {
    request(
      target: string,
      init: { method?: string; form?: Record<string, string>; headers?: Record<string, string> } = {},
    ): Promise<{ status: number; location: string; text: string }> {
      const headers: http.OutgoingHttpHeaders = { accept: "text/html", ...init.headers };
      if (cookies.size) headers.cookie = [...cookies].map(([k, v]) => `${k}=${v}`).join("; ");
      let body: string | undefined;
      if (init.form) {
        body = new URLSearchParams(init.form).toString();
        headers["content-type"] = "application/x-www-form-urlencoded";
        headers["content-length"] = Buffer.byteLength(body);
      }
      // redirects name the issuer's origin (this server) or a path on it
      const at = target.startsWith("http") ? target.indexOf("/", target.indexOf("//") + 2) : 0;
      const run = () =>
        new Promise<{ status: number; location: string; text: string }>((resolve, reject) => {
          const request = http.request(
            {
              agent: signInAgent,
              host: "localhost",
              port,
              method: init.method ?? (body === undefined ? "GET" : "POST"),
              path: at < 0 ? "/" : target.slice(at),
              headers,
            },
            (response) => {
              for (const cookie of response.headers["set-cookie"] ?? []) {
                const end = cookie.indexOf(";");
                const pair = end < 0 ? cookie : cookie.slice(0, end);
                const eq = pair.indexOf("=");
                cookies.set(pair.slice(0, eq), pair.slice(eq + 1));
              }
              let text = "";
              response.setEncoding("utf8");
              response.on("data", (chunk: string) => {
                text += chunk;
              });
              response.on("end", () =>
                resolve({
                  status: response.statusCode ?? 0,
                  location: response.headers.location ?? "",
                  text,
                }),
              );
              response.on("error", reject);
            },
          );
          request.on("error", reject);
          request.end(body);
        });
      if (!stepProbe) return run();
      const method = init.method ?? (body === undefined ? "GET" : "POST");
      return stepProbe.around(`${method} ${target.slice(Math.max(at, 0)).split("?")[0]}`, run);
    },
  };
}

/** The value of a hidden form field (`name="…" … value="…"`), found without a regular expression. */
function formField(html: string, name: string): string {
  const at = html.indexOf(`name="${name}"`);
  if (at < 0) return "";
  const value = html.indexOf('value="', at) + 7;
  return value < 7 ? "" : html.slice(value, html.indexOf('"', value));
}

/** An OIDC web app (client_secret_basic) made through the apps API. */
async function benchApp(): Promise<{ clientId: string; secret: string; redirectUri: string }> {
  const headers = { ...auth, "content-type": "application/json" };
  const redirectUri = "https://bench.example/callback";
  const project = (await (
    await fetch(`${url}/resources/v3alpha/projects`, { method: "POST", headers, body: '{"name":"Bench"}' })
  ).json()) as { details: { id: string } };
  const app = (await (
    await fetch(`${url}/resources/v3alpha/projects/${project.details.id}/apps`, {
      method: "POST",
      headers,
      body: JSON.stringify({
        name: "bench",
        oidc: { redirect_uris: [redirectUri], auth_method: "OIDC_AUTH_METHOD_TYPE_BASIC" },
      }),
    })
  ).json()) as { client_id: string; client_secret: string };
  return { clientId: app.client_id, secret: app.client_secret, redirectUri };
}

/**
 * One full browser sign-in with a fresh browser: authorize → login UI entry → login name page and post →
 * password page and post → completion (code) → token request. Throws on any unexpected answer.
 */
async function signInOnce(
  app: { clientId: string; secret: string; redirectUri: string },
  account: SignInAccount = ADMIN_ACCOUNT,
): Promise<void> {
  const browser = benchBrowser();
  const verifier = randomBytes(32).toString("base64url");
  const challenge = createHash("sha256").update(verifier).digest("base64url");
  const expect = (answer: { status: number; text: string }, status: number, step: string) => {
    if (answer.status !== status) throw new Error(`${step}: ${answer.status} ${answer.text.slice(0, 200)}`);
  };
  const query = new URLSearchParams({
    client_id: app.clientId,
    redirect_uri: app.redirectUri,
    response_type: "code",
    scope: "openid profile",
    state: randomBytes(8).toString("hex"),
    code_challenge: challenge,
    code_challenge_method: "S256",
  });
  const authorize = await browser.request(`/oauth/v2/authorize?${query}`);
  expect(authorize, 302, "authorize");
  // the entry shows the login-name page (since issue 22; before, it redirected to /ui/login/loginname)
  let loginPage = await browser.request(authorize.location);
  if (loginPage.status === 302) loginPage = await browser.request(loginPage.location);
  expect(loginPage, 200, "login name page");
  const form = (html: string) => ({
    csrf: formField(html, "csrf"),
    authRequest: formField(html, "authRequest"),
  });
  const named = await browser.request("/ui/login/loginname", {
    form: { ...form(loginPage.text), loginName: account.loginName },
  });
  expect(named, 303, "login name post");
  const passwordPage = await browser.request(named.location);
  expect(passwordPage, 200, "password page");
  const checked = await browser.request("/ui/login/password", {
    form: { ...form(passwordPage.text), password: ADMIN_PASSWORD },
  });
  expect(checked, 303, "password post");
  // On to the client's redirect (the completion) or the second factor's page: since issue 22 the password's
  // post answers either at once; before, it went through the completion page (/ui/login/complete).
  let complete = checked;
  while (!complete.location.startsWith(app.redirectUri)) {
    complete = await browser.request(complete.location);
    if (complete.status === 200 && account.totp) break;
    expect(complete, 302, "completion");
  }
  if (account.totp) {
    // the second factor: the TOTP page (the user's only factor) → its post
    const totpPage = complete;
    expect(totpPage, 200, "TOTP page");
    const code = await account.totp.nextCode();
    const passed = await browser.request("/ui/login/mfa/totp", { form: { ...form(totpPage.text), code } });
    // the passed check completes the sign-in at once: the 303 carries the client's redirect with the code
    expect(passed, 303, "TOTP post");
    complete = passed;
  }
  const code = new URL(complete.location).searchParams.get("code");
  if (!code) throw new Error(`completion: no code in ${complete.location}`);
  const token = await browser.request("/oauth/v2/token", {
    form: { grant_type: "authorization_code", code, redirect_uri: app.redirectUri, code_verifier: verifier },
    headers: {
      accept: "application/json",
      authorization: `Basic ${Buffer.from(`${encodeURIComponent(app.clientId)}:${encodeURIComponent(app.secret)}`).toString("base64")}`,
    },
  });
  expect(token, 200, "token");
}

/**
 * What a TOTP check computes beyond a session check, in this process: unsealing the secret with the master
 * key and verifying a code against three time steps (the worst case: a wrong code), per code.
 */
async function totpVerificationMicros(): Promise<number> {
  const masterKey = randomBytes(32);
  const { sealed } = newTotpSecret(masterKey, "instance", "user");
  const factor = {
    id: "totp",
    type: "totp" as const,
    active: true,
    name: "",
    data: { secret_sealed: sealed },
    createdAt: new Date(),
    changedAt: new Date(),
  };
  const now = new Date();
  const n = 2000;
  for (let i = 0; i < 200; i++) await totpStep(masterKey, "instance", "user", factor, "000000", now);
  const started = performance.now();
  for (let i = 0; i < n; i++) await totpStep(masterKey, "instance", "user", factor, "000000", now);
  return ((performance.now() - started) * 1000) / n;
}

/** Who signs in: a login name, and a TOTP authenticator when the sign-in takes a second factor. */
interface SignInAccount {
  loginName: string;
  totp?: { nextCode(): Promise<string> };
}

/**
 * Users with the admin's password and an active TOTP authenticator, made through the users API (eight at a
 * time). A code is accepted once per time step (and never for an earlier step than the last one used), so
 * each sign-in takes the next user round-robin with the current step's code, or the next step's (±1 step is
 * accepted): a user signs in at most twice per 30 s step, and `count` users carry `count` / 15 sign-ins
 * per second. Should every user be used up, a sign-in waits for the next step (a stall that shows in the
 * latencies) rather than fail. The users are made also against a version without second factors (their
 * TOTP refused: undefined, no such scenario), so that both versions measure on a database of the same size.
 */
async function totpAccounts(count: number): Promise<(() => Promise<SignInAccount>) | undefined> {
  const headers = { ...auth, "content-type": "application/json" };
  const accounts: Array<{ loginName: string; secret: string; lastStep: number }> = [];
  const prefix = `totp-${process.pid}-${Date.now().toString(36)}`;
  let supported = true;
  const make = async (i: number) => {
    const loginName = `${prefix}-${i}`;
    const created = await fetch(`${url}/resources/v3alpha/users`, {
      method: "POST",
      headers,
      body: JSON.stringify({
        username: loginName,
        human: {
          profile: { given_name: "Bench", family_name: `TOTP ${i}` },
          email: { address: `${loginName}@bench.example`, is_verified: true },
          password: { password: ADMIN_PASSWORD },
        },
      }),
    });
    if (created.status !== 201)
      throw new Error(`creating ${loginName}: ${created.status} ${await created.text()}`);
    const { details } = (await created.json()) as { details: { id: string } };
    if (!supported) return;
    const registered = await fetch(`${url}/resources/v3alpha/users/${details.id}/totp`, {
      method: "POST",
      headers,
    });
    // a version without second factors (bench:compare's older checkout): no such scenario
    if (registered.status === 404 || registered.status === 501) {
      supported = false;
      return;
    }
    const { secret } = (await registered.json()) as { secret: string };
    const step = Math.floor(Date.now() / 30_000);
    const verified = await fetch(`${url}/resources/v3alpha/users/${details.id}/totp/_verify`, {
      method: "POST",
      headers,
      body: JSON.stringify({ code: await generate({ secret, epoch: step * 30 }) }),
    });
    if (verified.status !== 200)
      throw new Error(`TOTP of ${loginName}: ${verified.status} ${await verified.text()}`);
    accounts.push({ loginName, secret, lastStep: step });
  };
  let made = 0;
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (made < count) await make(made++);
    }),
  );
  if (!supported) return undefined;
  let next = 0;
  return async () => {
    for (;;) {
      for (let tried = 0; tried < accounts.length; tried++) {
        const account = accounts[next];
        next = (next + 1) % accounts.length;
        const now = Math.floor(Date.now() / 30_000);
        const step = Math.max(account.lastStep + 1, now);
        if (step > now + 1) continue; // used twice in this step already
        account.lastStep = step;
        return {
          loginName: account.loginName,
          totp: { nextCode: () => generate({ secret: account.secret, epoch: step * 30 }) },
        };
      }
      // every user signed in twice in this step: the next one begins within 30 s
      totpStalls++;
      await new Promise((resolve) => setTimeout(resolve, 30_000 - (Date.now() % 30_000) + 10));
    }
  };
}

/** Runs `once` from `concurrency` loops for `seconds`; completions per second and their latencies. */
async function closedLoop(concurrency: number, seconds: number, once: () => Promise<void>) {
  const latencies: number[] = [];
  let errors = 0;
  let firstError: string | undefined;
  const end = performance.now() + seconds * 1000;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < end) {
        const t = performance.now();
        try {
          await once();
          latencies.push(performance.now() - t);
        } catch (error) {
          errors++;
          firstError ??= (error as Error).message;
        }
      }
    }),
  );
  const elapsed = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  const pct = (p: number) =>
    latencies.length ? Math.round(latencies[Math.max(0, Math.ceil((p / 100) * latencies.length) - 1)]) : 0;
  return {
    perSecond: latencies.length / elapsed,
    count: latencies.length,
    p50: pct(50),
    p95: pct(95),
    p99: pct(99),
    errors,
    firstError,
  };
}

async function signInScenario(): Promise<void> {
  const app = await benchApp();
  await signInOnce(app); // the first one creates the signing key
  // The raw argon2id rate of this machine: the same parameters (src/crypto/password.ts), as many
  // verifications at once as the server's thread pool runs (4), in this process while the server is idle;
  // alternated with the sign-ins round by round (BENCH_ROUNDS), so both see the same neighbours' load.
  const hash = await hashPassword(ADMIN_PASSWORD);
  const verifyRaw = async () => {
    if (!(await verifyPassword(hash, ADMIN_PASSWORD))) throw new Error("argon2id verify failed");
  };
  const totpMicros = await totpVerificationMicros();
  console.log(
    `  TOTP verification (unseal the secret, otplib verify ±1 step): ${totpMicros.toFixed(0)} µs per code`,
  );
  // the same sign-in with a second factor: users with a TOTP authenticator (BENCH_TOTP_USERS, default 1000)
  const nextTotpAccount = await totpAccounts(Number(process.env.BENCH_TOTP_USERS ?? 1000));
  const signInWithTotp = nextTotpAccount && (async () => signInOnce(app, await nextTotpAccount()));
  if (warmup > 0) {
    await closedLoop(signInClients, warmup, () => signInOnce(app));
    if (signInWithTotp) await closedLoop(signInClients, warmup, signInWithTotp);
  }
  // PostgreSQL: statistics of every table as the sign-ins leave them (sessions, codes, the users made
  // above), so that no autovacuum runs during the measurements and no statement keeps a plan made while
  // its tables were empty (the server's prepared statements are planned again after an ANALYZE)
  if (backend.env.DATABASE_URL) {
    const client = new pg.Client({ connectionString: backend.env.DATABASE_URL });
    await client.connect();
    await client.query("VACUUM ANALYZE");
    await client.end();
  }
  type Run = Awaited<ReturnType<typeof closedLoop>>;
  type Cpu = { bench: number; server: number; postgres: number | null };
  const argonRuns: Run[] = [];
  const signInRuns: Run[] = [];
  const totpRuns: Run[] = [];
  const cpuRuns: Cpu[] = [];
  const totpCpuRuns: Cpu[] = [];
  const measured = async (once: () => Promise<void>, cpus: Cpu[]) => {
    const before = await cpuNow();
    const run = await closedLoop(signInClients, duration, once);
    const after = await cpuNow();
    const n = Math.max(1, run.count);
    cpus.push({
      bench: (after.bench - before.bench) / n,
      server: (after.server - before.server) / n,
      postgres:
        after.postgres === null || before.postgres === null ? null : (after.postgres - before.postgres) / n,
    });
    return run;
  };
  for (let round = 0; round < rounds; round++) {
    argonRuns.push(await closedLoop(4, Math.min(duration, 5), verifyRaw));
    // alternating which goes first, so both see the same neighbours' load
    if (signInWithTotp && round % 2) totpRuns.push(await measured(signInWithTotp, totpCpuRuns));
    signInRuns.push(await measured(() => signInOnce(app), cpuRuns));
    if (signInWithTotp && round % 2 === 0) totpRuns.push(await measured(signInWithTotp, totpCpuRuns));
  }
  const mid = (runs: Run[], pick: (r: Run) => number) =>
    runs.map(pick).sort((a, b) => a - b)[Math.floor(runs.length / 2)];
  console.log(
    "Browser sign-in (authorize → login name → password → code → token, a new browser each), " +
      `${signInClients} concurrent browsers, ${warmup} s warm-up` +
      `${rounds > 1 ? `, median of ${rounds} rounds alternating with the raw argon2id measurement` : ""}`,
  );
  const ratios = signInRuns.map((r, i) => (r.perSecond / argonRuns[i].perSecond).toFixed(2));
  const cpuMid = (pick: (c: Cpu) => number | null, runs: Cpu[] = cpuRuns) => {
    const values = runs
      .map(pick)
      .filter((v): v is number => v !== null)
      .sort((a, b) => a - b);
    return values.length ? values[Math.floor(values.length / 2)].toFixed(1) : "–";
  };
  const cpuNote =
    `CPU ms per sign-in: server ${cpuMid((c) => c.server)}, load generator ${cpuMid((c) => c.bench)}` +
    `${backend.env.DATABASE_URL ? `, PostgreSQL backends ${cpuMid((c) => c.postgres)}` : ""}`;
  console.log(`  signin: ${cpuNote}`);
  const totpCpuNote =
    `CPU ms per sign-in: server ${cpuMid((c) => c.server, totpCpuRuns)}, load generator ${cpuMid((c) => c.bench, totpCpuRuns)}` +
    `${backend.env.DATABASE_URL ? `, PostgreSQL backends ${cpuMid((c) => c.postgres, totpCpuRuns)}` : ""}`;
  console.log(`  signin with TOTP: ${totpCpuNote}`);
  const withTotp = totpRuns.map((r, i) => (r.perSecond / signInRuns[i].perSecond).toFixed(2));
  const totpError = totpRuns.find((r) => r.firstError)?.firstError;
  const firstError = signInRuns.find((r) => r.firstError)?.firstError;
  record({
    group: "signin",
    scenario: `full browser sign-ins (${signInClients} browsers)`,
    rps: mid(signInRuns, (r) => r.perSecond),
    p50: mid(signInRuns, (r) => r.p50),
    p99: mid(signInRuns, (r) => r.p99),
    errors: signInRuns.reduce((n, r) => n + r.errors, 0),
    reference: {
      name: "raw argon2id (19 MiB, t=2, p=1; 4 at once)",
      rps: mid(argonRuns, (r) => r.perSecond),
      p50: mid(argonRuns, (r) => r.p50),
      p99: mid(argonRuns, (r) => r.p99),
    },
    note:
      `sign-ins / raw argon2id per round: ${ratios.join(", ")} (each sign-in verifies one password); ${cpuNote}` +
      (firstError ? `; first error: ${firstError}` : ""),
  });
  const stepRuns = Number(process.env.BENCH_SIGNIN_STEPS ?? 0);
  if (stepRuns > 0) await signInSteps(stepRuns, () => signInOnce(app), signInWithTotp);
  if (!signInWithTotp) return;
  record({
    group: "signin",
    scenario: `full browser sign-ins with password + TOTP (${signInClients} browsers)`,
    rps: mid(totpRuns, (r) => r.perSecond),
    p50: mid(totpRuns, (r) => r.p50),
    p99: mid(totpRuns, (r) => r.p99),
    errors: totpRuns.reduce((n, r) => n + r.errors, 0),
    reference: {
      name: "the password-only sign-ins of the same rounds",
      rps: mid(signInRuns, (r) => r.perSecond),
      p50: mid(signInRuns, (r) => r.p50),
      p99: mid(signInRuns, (r) => r.p99),
    },
    note:
      `with TOTP / password only, per round: ${withTotp.join(", ")}; the TOTP verification itself ${totpMicros.toFixed(0)} µs per code (2 more requests: the TOTP page and its post, which completes); ${totpCpuNote}` +
      (totpStalls ? `; ${totpStalls} sign-ins waited for the next time step (raise BENCH_TOTP_USERS)` : "") +
      (totpError ? `; first error: ${totpError}` : ""),
  });
}

/**
 * BENCH_ONLY=contention: browser sign-ins (BENCH_SIGNIN_CLIENTS browsers) alone, then while BENCH_WRITERS
 * clients create users (the management API, one user per request, no password) as fast as they are
 * answered. On the embedded database every request's work waits for its one connection: how long a sign-in
 * takes when writes keep it busy (src/storage/fair-queue.ts).
 */
async function signInUnderWrites(): Promise<void> {
  const writers = Number(process.env.BENCH_WRITERS ?? 24);
  const app = await benchApp();
  await signInOnce(app); // the first one creates the signing key
  if (warmup > 0) await closedLoop(signInClients, warmup, () => signInOnce(app));
  const alone = await closedLoop(signInClients, duration, () => signInOnce(app));
  const writerAgent = new http.Agent({ keepAlive: true, maxSockets: writers });
  let created = 0;
  let refused = 0;
  let stop = false;
  const createUser = (i: number) =>
    new Promise<number>((resolve, reject) => {
      const name = `writer-${process.pid}-${Date.now().toString(36)}-${i}`;
      const body = JSON.stringify({
        username: name,
        human: {
          profile: { given_name: "Bench", family_name: `Writer ${i}` },
          email: { address: `${name}@bench.example` },
        },
      });
      const request = http.request(
        {
          agent: writerAgent,
          host: "localhost",
          port,
          method: "POST",
          path: "/resources/v3alpha/users",
          headers: { ...auth, "content-type": "application/json", "content-length": Buffer.byteLength(body) },
        },
        (response) => {
          response.resume();
          response.on("end", () => resolve(response.statusCode ?? 0));
        },
      );
      request.on("error", reject);
      request.end(body);
    });
  let n = 0;
  const writing = Promise.all(
    Array.from({ length: writers }, async () => {
      while (!stop) {
        const status = await createUser(n++);
        if (status === 201) created++;
        else if (status === 503) refused++;
        else throw new Error(`creating a user: ${status}`);
      }
    }),
  );
  const started = performance.now();
  let underWrites: Awaited<ReturnType<typeof closedLoop>>;
  try {
    await closedLoop(signInClients, Math.min(warmup, 2), () => signInOnce(app)); // the writers get going
    underWrites = await closedLoop(signInClients, duration, () => signInOnce(app));
  } finally {
    stop = true;
    await writing;
    writerAgent.destroy();
  }
  const writesPerSecond = created / ((performance.now() - started) / 1000);
  const note =
    `sign-in p95 alone ${alone.p95} ms, under writes ${underWrites.p95} ms; the writers created ${writesPerSecond.toFixed(0)} users/s` +
    `${refused ? `, ${refused} refused with 503` : ""}` +
    (underWrites.firstError ? `; first sign-in error: ${underWrites.firstError}` : "");
  record({
    group: "contention",
    scenario: `browser sign-ins (${signInClients} browsers) while ${writers} clients create users`,
    rps: underWrites.perSecond,
    p50: underWrites.p50,
    p99: underWrites.p99,
    errors: underWrites.errors + alone.errors,
    reference: { name: "the same sign-ins alone", rps: alone.perSecond, p50: alone.p50, p99: alone.p99 },
    note,
  });
}

/**
 * CPU used so far, in milliseconds: this process (the load generator), the server's process (utime + stime of
 * /proc/<pid>/stat, Linux) and, on PostgreSQL, the backends serving the bench's database (null elsewhere).
 * A backend that has ended (the pool closes idle connections) counts with the last CPU time read of it,
 * so the sum never goes back (postgresBackendsSeen).
 */
async function cpuNow(): Promise<{ bench: number; server: number; postgres: number | null }> {
  const usage = process.cpuUsage();
  const ticks = (pid: number) => {
    try {
      const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
      return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100; // USER_HZ is 100 on Linux
    } catch {
      return Number.NaN;
    }
  };
  let postgres: number | null = null;
  if (backend.env.DATABASE_URL) {
    const client = new pg.Client({ connectionString: backend.env.DATABASE_URL });
    await client.connect();
    try {
      const { rows } = await client.query<{ pid: number }>(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()",
      );
      for (const { pid } of rows) {
        const used = ticks(pid);
        if (!Number.isNaN(used)) postgresBackendsSeen.set(pid, used);
      }
      postgres = [...postgresBackendsSeen.values()].reduce((sum, used) => sum + used, 0);
    } finally {
      await client.end();
    }
  }
  return { bench: (usage.user + usage.system) / 1000, server: ticks(child.pid!), postgres };
}

/** BENCH_SIGNIN_STEPS: `n` sign-ins of each kind one after the other, CPU per request (./signin-steps.ts). */
async function signInSteps(n: number, password: () => Promise<void>, withTotp?: () => Promise<void>) {
  // the backends of the bench's database: their command line names it ("postgres: user database host")
  const database = backend.env.DATABASE_URL ? new URL(backend.env.DATABASE_URL).pathname.slice(1) : undefined;
  const postgresPids = () => {
    if (!database) return [];
    const pids: number[] = [];
    for (const entry of readdirSync("/proc")) {
      if (!/^\d+$/.test(entry)) continue;
      try {
        if (readFileSync(`/proc/${entry}/cmdline`, "utf8").includes(` ${database} `))
          pids.push(Number(entry));
      } catch {}
    }
    return pids;
  };
  const probe = new StepProbe(child.pid!, postgresPids);
  for (const [title, once] of [
    ["password sign-in", password],
    ["password + TOTP sign-in", withTotp],
  ] as const) {
    if (!once) continue;
    for (let i = 0; i < 5; i++) await once(); // warm, unmeasured
    stepProbe = probe;
    try {
      for (let i = 0; i < n; i++) await once();
    } finally {
      stepProbe = undefined;
    }
    probe.print(title, n);
  }
}
