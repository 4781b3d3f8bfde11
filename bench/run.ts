// `npm run bench`: starts Platform in a child process on a fresh database (embedded PGlite, or PostgreSQL
// when DATABASE_URL is set) and measures requests per second and latency percentiles with autocannon.
// Options: BENCH_DURATION (seconds per scenario, default 10), BENCH_CONNECTIONS (default 16).
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import autocannon from "autocannon";
import { freshBackend } from "../test/helpers.ts";

const duration = Number(process.env.BENCH_DURATION ?? 10);
const connections = Number(process.env.BENCH_CONNECTIONS ?? 16);
const root = path.resolve(import.meta.dirname, "..");
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
    `${process.env.DATABASE_URL ? "PostgreSQL" : "embedded PGlite"}, ${connections} connections, ${duration} s per scenario\n`,
);
console.log("| scenario | req/s | p50 ms | p90 ms | p99 ms | errors |");
console.log("|---|---:|---:|---:|---:|---:|");
try {
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
} finally {
  child.kill("SIGTERM");
  await new Promise((resolve) => child.on("exit", resolve));
  rmSync(dir, { recursive: true, force: true });
  await backend.cleanup();
}
