// Searches as the tables grow: `BENCH_ONLY=growth npm run bench` (or `node --import tsx bench/growth.ts`).
// Starts Platform on a fresh database (embedded PGlite, or a new database on the DATABASE_URL server),
// measures each search scenario on the small database, loads it through the public API (HTTP, 16 requests
// in flight: the same path and cost as a client's), then measures again. A search whose cost follows the
// page and the filter, not the table, keeps its rate: the ratio column is large / small.
//
// Loaded: BENCH_GROWTH_USERS human users (default 100000) over BENCH_GROWTH_ORGS organizations (default
// 100), of which one large organization holds 70 %; one project per organization with one role; and
// BENCH_GROWTH_GRANTS user grants (default users / 10) in the large organization's project. The small
// size is the first BENCH_GROWTH_SMALL users (default 1000) with the organizations and projects.
// Usernames are `growth-u-NNNNNNN` (zero-padded), so the username prefix `growth-u-000001` matches the same
// ten users at both sizes; the e-mail is the username at example.com.
//
// BENCH_GROWTH_SERVERS: comma-separated checkouts to compare (default: this one), e.g. a worktree of main
// and this one; every server gets its own database, and the measurements alternate between them (round
// after round, BENCH_ROUNDS, default 3, medians reported), so neighbours on a shared machine disturb both
// alike. Other options: BENCH_DURATION (s per measurement, default 5), BENCH_CONNECTIONS (default 16),
// BENCH_GROWTH_KEEP=1 keeps the databases (printed) for EXPLAIN. On PostgreSQL the tables are analyzed and
// vacuumed after loading (what autovacuum does soon after such a load), so plans do not depend on when
// autovacuum last ran.
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import autocannon from "autocannon";
import pg from "pg";
import { freshBackend, type TestBackend } from "../test/helpers.ts";
import { printTable, record } from "./report.ts";

const duration = Number(process.env.BENCH_DURATION ?? 5);
const connections = Number(process.env.BENCH_CONNECTIONS ?? 16);
const rounds = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 3));
const users = Number(process.env.BENCH_GROWTH_USERS ?? 100_000);
const orgCount = Math.max(2, Number(process.env.BENCH_GROWTH_ORGS ?? 100));
const grants = Number(process.env.BENCH_GROWTH_GRANTS ?? Math.floor(users / 10));
const small = Math.min(users, Number(process.env.BENCH_GROWTH_SMALL ?? 1000));
const keep = process.env.BENCH_GROWTH_KEEP === "1";
const root = path.resolve(import.meta.dirname, "..");
const serverDirs = (process.env.BENCH_GROWTH_SERVERS ?? root).split(",").map((d) => path.resolve(d.trim()));
const dir = mkdtempSync(path.join(os.tmpdir(), "platform-bench-growth-"));
const LOAD_CONCURRENCY = 16;

interface Server {
  label: string;
  url: string;
  child: ChildProcess;
  backend: TestBackend;
  headers: Record<string, string>;
  orgs: string[];
  projects: string[];
  /** User IDs created, in order. */
  userIds: string[];
  loaded: number;
}

interface Measured {
  rps: number;
  p50: number;
  p99: number;
  errors: number;
}

interface Scenario {
  name: string;
  path: (s: Server) => string;
  body: (s: Server) => string;
}

const USERS_SEARCH = "/resources/v3alpha/users/_search";
const username = (i: number) => `growth-u-${String(i).padStart(7, "0")}`;
const scenarios: Scenario[] = [
  { name: "SearchUsers, first page (unfiltered)", path: () => USERS_SEARCH, body: () => "[]" },
  {
    name: "SearchUsers, offset 9,000",
    path: () => `${USERS_SEARCH}?query.offset=9000`,
    body: () => "[]",
  },
  {
    name: "SearchUsers, ctx.org_id of the large organization",
    path: (s) => `${USERS_SEARCH}?ctx.org_id=${s.orgs[0]}`,
    body: () => "[]",
  },
  {
    name: "SearchUsers, username STARTS_WITH (10 users)",
    path: () => USERS_SEARCH,
    body: () =>
      JSON.stringify([
        { username: { username: username(10).slice(0, -1), method: "TEXT_FILTER_METHOD_STARTS_WITH" } },
      ]),
  },
  {
    name: "SearchUsers, e-mail EQUALS",
    path: () => USERS_SEARCH,
    body: () =>
      JSON.stringify([
        { email: { address: `${username(12)}@example.com`, method: "TEXT_FILTER_METHOD_EQUALS" } },
      ]),
  },
  {
    name: "SearchProjects, one row (name EQUALS)",
    path: () => "/resources/v3alpha/projects/_search",
    body: () => JSON.stringify([{ name: { name: "growth-p-0001", method: "TEXT_FILTER_METHOD_EQUALS" } }]),
  },
];

const servers: Server[] = [];
try {
  console.log(
    `Search growth: ${os.cpus().length} × ${os.cpus()[0]?.model}, node ${process.version}, ` +
      `${process.env.DATABASE_URL ? "PostgreSQL" : "embedded PGlite"}, ${connections} connections, ${duration} s ` +
      `per measurement, median of ${rounds} alternating rounds; small: ${small} users, large: ${users} users in ` +
      `${orgCount} organizations (70 % in one), ${grants} user grants, loaded through the public API\n`,
  );
  for (const [i, serverDir] of serverDirs.entries()) servers.push(await start(serverDir, i));
  for (const server of servers) await seed(server);
  const smallResults = await measureAll("small");
  for (const server of servers) await load(server);
  const largeResults = await measureAll("large");
  for (const server of servers) {
    console.log(`\n${server.label}: ${small} → ${server.loaded} users\n`);
    console.log("| scenario | small req/s | p50 ms | p99 ms | large req/s | p50 ms | p99 ms | ratio |");
    console.log("|---|---:|---:|---:|---:|---:|---:|---:|");
    for (const scenario of scenarios) {
      const a = smallResults.get(server)!.get(scenario)!;
      const b = largeResults.get(server)!.get(scenario)!;
      const errors = a.errors + b.errors;
      console.log(
        `| ${scenario.name}${errors ? ` (${errors} errors)` : ""} | ${Math.round(a.rps)} | ${a.p50} | ${a.p99} | ` +
          `${Math.round(b.rps)} | ${b.p50} | ${b.p99} | ${(b.rps / a.rps).toFixed(2)} |`,
      );
    }
  }
  // the benchmark's one table (bench/report.ts): the loaded database beside the small one
  for (const server of servers)
    for (const scenario of scenarios) {
      const a = smallResults.get(server)!.get(scenario)!;
      const b = largeResults.get(server)!.get(scenario)!;
      record({
        group: "growth",
        scenario: `${scenario.name} at ${server.loaded} users${servers.length > 1 ? ` (${path.basename(server.label.split(" ")[0])})` : ""}`,
        rps: b.rps,
        p50: b.p50,
        p99: b.p99,
        errors: a.errors + b.errors,
        reference: { name: `small database (${small} users)`, rps: a.rps, p50: a.p50, p99: a.p99 },
      });
    }
  printTable();
} finally {
  await stopAll();
  for (const server of servers) {
    if (keep) console.log(`kept ${server.label}: ${JSON.stringify(server.backend.env)}`);
    else await server.backend.cleanup();
  }
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

async function start(serverDir: string, index: number): Promise<Server> {
  const backend = await freshBackend();
  const port = 19500 + Math.floor(Math.random() * 400) + index;
  const patPath = path.join(dir, `admin-${index}.pat`);
  const child = spawn(process.execPath, [path.join(serverDir, "bin/platform.js"), "start"], {
    cwd: serverDir,
    env: {
      ...process.env,
      PLATFORM_PORT: String(port),
      DATABASE_URL: "",
      PLATFORM_MASTERKEY: backend.env.DATABASE_URL ? randomBytes(32).toString("hex") : "",
      ...backend.env,
      PLATFORM_FIRSTINSTANCE_PAT_PATH: patPath,
      PLATFORM_LOG_LEVEL: "warn",
    },
    stdio: ["ignore", "pipe", "inherit"],
  });
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on("data", (d: Buffer) => {
      if (String(d).includes("Platform is running")) resolve();
    });
    child.on("exit", (code) => reject(new Error(`platform (${serverDir}) exited with ${code}`)));
  });
  const token = readFileSync(patPath, "utf8").trim();
  return {
    label: `${path.basename(serverDir)} (${serverDir})`,
    url: `http://localhost:${port}`,
    child,
    backend,
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    orgs: [],
    projects: [],
    userIds: [],
    loaded: 0,
  };
}

async function post(server: Server, pathname: string, body: unknown): Promise<{ details: { id: string } }> {
  const response = await fetch(`${server.url}${pathname}`, {
    method: "POST",
    headers: server.headers,
    body: JSON.stringify(body),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`POST ${pathname}: ${response.status} ${text}`);
  return JSON.parse(text);
}

/** Runs `task(i)` for i in [from, to) with LOAD_CONCURRENCY in flight. */
async function pool(from: number, to: number, task: (i: number) => Promise<void>): Promise<void> {
  let next = from;
  await Promise.all(
    Array.from({ length: LOAD_CONCURRENCY }, async () => {
      while (next < to) await task(next++);
    }),
  );
}

/** Organizations, their projects with a role, and the first `small` users. */
async function seed(server: Server): Promise<void> {
  const orgs: string[] = new Array(orgCount);
  await pool(0, orgCount, async (i) => {
    orgs[i] = (await post(server, "/resources/v3alpha/organizations", { name: `growth-o-${i}` })).details.id;
  });
  server.orgs = orgs;
  const projects: string[] = new Array(orgCount);
  await pool(0, orgCount, async (i) => {
    const project = await post(server, `/resources/v3alpha/projects?ctx.org_id=${orgs[i]}`, {
      name: `growth-p-${String(i).padStart(4, "0")}`,
    });
    projects[i] = project.details.id;
    await post(server, `/resources/v3alpha/projects/${project.details.id}/roles`, {
      key: "member",
      display_name: "member",
    });
  });
  server.projects = projects;
  await loadUsers(server, 0, small);
}

/** The organization of user i: 70 % the large one (the first), the rest round robin over the others. */
function orgOf(i: number): number {
  return i % 10 < 7 ? 0 : 1 + (i % (orgCount - 1));
}

async function loadUsers(server: Server, from: number, to: number): Promise<void> {
  await pool(from, to, async (i) => {
    const name = username(i);
    const created = await post(server, `/resources/v3alpha/users?ctx.org_id=${server.orgs[orgOf(i)]}`, {
      username: name,
      human: {
        profile: { given_name: "Growth", family_name: name },
        email: { address: `${name}@example.com`, is_verified: true },
      },
    });
    server.userIds[i] = created.details.id;
  });
  server.loaded = to;
}

async function load(server: Server): Promise<void> {
  const started = performance.now();
  await loadUsers(server, small, users);
  const userSeconds = (performance.now() - started) / 1000;
  // grants in the large organization's project, to its users
  const largeOrgUsers = server.userIds.filter((_, i) => orgOf(i) === 0);
  const grantStarted = performance.now();
  await pool(0, Math.min(grants, largeOrgUsers.length), async (i) => {
    await post(server, `/resources/v3alpha/user_grants?ctx.org_id=${server.orgs[0]}`, {
      user_id: largeOrgUsers[i],
      project_id: server.projects[0],
      role_keys: ["member"],
    });
  });
  const grantSeconds = (performance.now() - grantStarted) / 1000;
  console.log(
    `${server.label}: loaded ${users - small} users in ${userSeconds.toFixed(0)} s ` +
      `(${Math.round((users - small) / userSeconds)}/s), ${grants} user grants in ${grantSeconds.toFixed(0)} s`,
  );
  if (server.backend.env.DATABASE_URL) {
    const client = new pg.Client({ connectionString: server.backend.env.DATABASE_URL });
    await client.connect();
    await client.query("VACUUM ANALYZE");
    await client.end();
  }
}

async function measureAll(size: string): Promise<Map<Server, Map<Scenario, Measured>>> {
  const runs = new Map<Server, Map<Scenario, Measured[]>>(
    servers.map((s) => [s, new Map(scenarios.map((sc) => [sc, []]))]),
  );
  // warm-up (not recorded): compiled code paths, plan caches, the buffer cache
  for (const server of servers) for (const scenario of scenarios) await measure(server, scenario, 1);
  for (let round = 0; round < rounds; round++)
    for (const scenario of scenarios)
      for (let i = 0; i < servers.length; i++) {
        const server = servers[(i + round) % servers.length];
        runs
          .get(server)!
          .get(scenario)!
          .push(await measure(server, scenario));
      }
  const result = new Map<Server, Map<Scenario, Measured>>();
  for (const [server, byScenario] of runs) {
    const medians = new Map<Scenario, Measured>();
    for (const [scenario, list] of byScenario)
      medians.set(scenario, {
        rps: median(list.map((m) => m.rps)),
        p50: median(list.map((m) => m.p50)),
        p99: median(list.map((m) => m.p99)),
        errors: list.reduce((n, m) => n + m.errors, 0),
      });
    result.set(server, medians);
  }
  console.log(`measured the ${size} databases`);
  return result;
}

async function measure(server: Server, scenario: Scenario, seconds = duration): Promise<Measured> {
  const result = await autocannon({
    url: `${server.url}${scenario.path(server)}`,
    method: "POST",
    headers: server.headers,
    body: scenario.body(server),
    connections,
    duration: seconds,
  });
  return {
    rps: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    errors: result.errors + result.non2xx,
  };
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}
