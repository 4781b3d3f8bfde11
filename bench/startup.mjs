// `node bench/startup.mjs`: start-up time and idle memory of `platform start`. Each run starts
// `node <checkout>/bin/platform.js start` as `npm start` does and measures the time from the spawn to the
// first 200 of GET /ready and the CPU time the process (with its initdb child) used until then, then the
// process's VmRSS 10 s and 60 s after that (and VmHWM, its peak), on:
//   embedded first start  a fresh PLATFORM_DATA_DIR (initdb, migrations, bootstrap)
//   embedded restart      the same directory again
//   postgres first start  a new database on the DATABASE_URL server (created here, dropped afterwards)
//   postgres restart      the same database again
// Several checkouts can be compared (`--variant before=/path/to/old/checkout --variant after=.`): runs
// alternate between them so that the machine's load falls on each alike. Medians of the runs are printed
// as a markdown table, with the load average seen during the runs. On a machine shared with other work the
// wall-clock time follows the load; the CPU time hardly does.
// Options: --runs N (default 3), --idle SECONDS (last RSS sample after /ready, default 60),
// --only embedded|postgres, --variant NAME=DIR (default: this checkout as "current"), --fresh-clone (adds
// "fresh clone first start": the embedded first start of a checkout that never ran, i.e. with its dist/
// deleted, so that the start builds it, and with tsx's cache off for a checkout that runs through tsx).
// PostgreSQL: DATABASE_URL names a server and a database to connect to for CREATE/DROP DATABASE
// (default postgres://postgres@127.0.0.1:5432/postgres); unreachable: the PostgreSQL rows are skipped.
import { execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { parseArgs } from "node:util";
import pg from "pg";

const { values } = parseArgs({
  options: {
    runs: { type: "string", default: "3" },
    idle: { type: "string", default: "60" },
    only: { type: "string" },
    variant: { type: "string", multiple: true },
    "fresh-clone": { type: "boolean", default: false },
  },
});
const runs = Number(values.runs);
const idleSeconds = Number(values.idle);
const variants = (values.variant ?? [`current=${path.resolve(import.meta.dirname, "..")}`]).map((v) => {
  const [name, dir] = v.split("=");
  return { name, dir: path.resolve(dir) };
});
const adminUrl = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
const masterKey = randomBytes(32).toString("hex");
const loads = [];

function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
    server.on("error", reject);
  });
}

const ticksPerSecond = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }));

/** CPU seconds of a process and its waited-for children (utime, stime, cutime, cstime of /proc/pid/stat). */
function cpuSeconds(pid) {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
  return fields.slice(11, 15).reduce((sum, ticks) => sum + Number(ticks), 0) / ticksPerSecond;
}

function memory(pid) {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = (field) => Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(status)?.[1] ?? Number.NaN);
  return { rss: kb("VmRSS") / 1024, hwm: kb("VmHWM") / 1024 };
}

/** One `platform start`: seconds to /ready (wall, CPU), RSS (MB) 10 s and `idleSeconds` after, peak RSS. */
async function measure(dir, env) {
  const port = await freePort();
  loads.push(os.loadavg()[0]);
  const started = performance.now();
  const child = spawn(process.execPath, [path.join(dir, "bin", "platform.js"), "start"], {
    cwd: dir,
    env: {
      ...process.env,
      DATABASE_URL: "",
      PLATFORM_LOG_LEVEL: "warn",
      ...env,
      PLATFORM_PORT: String(port),
    },
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  child.stderr.on("data", (d) => (stderr += d));
  const exited = new Promise((resolve) => child.on("exit", resolve));
  let exitedEarly = false;
  exited.then(() => (exitedEarly = true));
  try {
    for (;;) {
      if (exitedEarly) throw new Error(`platform exited before /ready:\n${stderr}`);
      try {
        const res = await fetch(`http://127.0.0.1:${port}/ready`, { signal: AbortSignal.timeout(1000) });
        if (res.status === 200) break;
      } catch {}
      await sleep(20);
    }
    const ready = (performance.now() - started) / 1000;
    const cpu = cpuSeconds(child.pid);
    await sleep(10_000);
    const at10 = memory(child.pid).rss;
    await sleep((idleSeconds - 10) * 1000);
    const { rss: atIdle, hwm } = memory(child.pid);
    return { ready, cpu, at10, atIdle, hwm };
  } finally {
    child.kill("SIGTERM");
    await exited;
  }
}

async function adminQuery(sql) {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

async function postgresAvailable() {
  try {
    await adminQuery("SELECT 1");
    return true;
  } catch {
    return false;
  }
}

const results = []; // { variant, scenario, ready, at10, atIdle, hwm }
const record = (variant, scenario, m) => {
  results.push({ variant: variant.name, scenario, ...m });
  const f = (n) => n.toFixed(1);
  console.error(
    `${variant.name.padEnd(8)} ${scenario.padEnd(22)} ready ${f(m.ready)} s (CPU ${f(m.cpu)} s), RSS ${f(m.at10)} MB at 10 s, ` +
      `${f(m.atIdle)} MB at ${idleSeconds} s, peak ${f(m.hwm)} MB (load ${f(os.loadavg()[0])})`,
  );
};

const withPostgres = values.only !== "embedded" && (await postgresAvailable());
if (values.only !== "embedded" && !withPostgres)
  console.error(`PostgreSQL at ${adminUrl} unreachable: skipped`);
for (let run = 1; run <= runs; run++) {
  for (const variant of variants) {
    if (values["fresh-clone"]) {
      const dataDir = mkdtempSync(path.join(os.tmpdir(), "platform-startup-"));
      try {
        if (existsSync(path.join(variant.dir, "scripts", "build.mjs")))
          rmSync(path.join(variant.dir, "dist"), { recursive: true, force: true });
        const env = { PLATFORM_DATA_DIR: dataDir, TSX_DISABLE_CACHE: "1" };
        record(variant, "fresh clone first start", await measure(variant.dir, env));
      } finally {
        rmSync(dataDir, { recursive: true, force: true });
      }
    }
    if (values.only !== "postgres") {
      const dataDir = mkdtempSync(path.join(os.tmpdir(), "platform-startup-"));
      try {
        const env = { PLATFORM_DATA_DIR: dataDir };
        record(variant, "embedded first start", await measure(variant.dir, env));
        record(variant, "embedded restart", await measure(variant.dir, env));
      } finally {
        rmSync(dataDir, { recursive: true, force: true });
      }
    }
    if (withPostgres) {
      const name = `platform_startup_${process.pid}_${run}_${variant.name.replace(/\W/g, "")}`;
      await adminQuery(`CREATE DATABASE ${name}`);
      try {
        const url = new URL(adminUrl);
        url.pathname = `/${name}`;
        const env = { DATABASE_URL: url.toString(), PLATFORM_MASTERKEY: masterKey };
        record(variant, "postgres first start", await measure(variant.dir, env));
        record(variant, "postgres restart", await measure(variant.dir, env));
      } finally {
        await adminQuery(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      }
    }
  }
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const range = (xs, digits = 1) => `${Math.min(...xs).toFixed(digits)}–${Math.max(...xs).toFixed(digits)}`;
console.log(
  `\n${runs} runs per row, medians (range); load average ${range(loads)} during the runs; node ${process.version}\n`,
);
console.log(
  `| scenario | variant | to /ready (s) | CPU to /ready (s) | RSS at 10 s (MB) | RSS at ${idleSeconds} s (MB) | peak RSS (MB) |`,
);
console.log("|---|---|---:|---:|---:|---:|---:|");
for (const scenario of [...new Set(results.map((r) => r.scenario))]) {
  for (const variant of variants) {
    const rows = results.filter((r) => r.scenario === scenario && r.variant === variant.name);
    if (!rows.length) continue;
    const cell = (key, digits) =>
      `${median(rows.map((r) => r[key])).toFixed(digits)} (${range(
        rows.map((r) => r[key]),
        digits,
      )})`;
    console.log(
      `| ${scenario} | ${variant.name} | ${cell("ready", 1)} | ${cell("cpu", 1)} | ${cell("at10", 0)} | ${cell("atIdle", 0)} | ${cell("hwm", 0)} |`,
    );
  }
}
