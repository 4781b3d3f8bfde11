// `DATABASE_URL=postgres://… node --import tsx bench/caches.ts`: the caches of several processes on one
// PostgreSQL database (docs/architecture.md "Many processes"). `npm run bench` on PostgreSQL runs part 1.
//  1. Revocation lag: two `platform start` processes A and B on a fresh database. Per trial a machine user's
//     new personal access token is accepted by B (B caches it), removed through A, then sent to B again and
//     again until B refuses it; the lag is the time from A's answer to B's refusal (BENCH_TRIALS, default
//     200). Before the notifications B accepted it until its cache entry expired (up to 2 s).
//  2. Write throughput with the notification: PATCH /settings/v3alpha/languages (one event append, which
//     notifies) on A while B listens, BENCH_CONNECTIONS (16) for BENCH_DURATION (10) s. With
//     BENCH_BASELINE=<checkout of an earlier version> the same against that version's A and B, alternating
//     BENCH_ROUNDS (default 3) times. BENCH_PEERS=0: A alone, without B.
//  3. The append alone: BENCH_CONNECTIONS concurrent loops of EventStore.push (one event each) in this
//     process on a fresh database: without notification (the same database seen as a single-process one),
//     with `pg_notify` inside the append's transaction (the command sends it), and as the event store sends
//     it (after the commit, batched); in slices of BENCH_SLICE (2) s taking turns, BENCH_DURATION ×
//     BENCH_ROUNDS s per variant in all.
//  4. The login UI's shared rate limit: the upsert that counts one attempt (src/login/rate-limits.ts), one
//     after the other (latency) and BENCH_CONNECTIONS at once for BENCH_DURATION s (throughput).
import { randomBytes } from "node:crypto";
import { readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import autocannon from "autocannon";
import { EventStore } from "../src/eventstore/eventstore.ts";
import { newId } from "../src/id.ts";
import { countAttempt } from "../src/login/rate-limits.ts";
import { projections } from "../src/query/projections/index.ts";
import type { Database } from "../src/storage/database.ts";
import { migrate } from "../src/storage/migrate.ts";
import { PostgresDatabase } from "../src/storage/postgres.ts";
import { freshBackend, type TestBackend, tempDir } from "../test/helpers.ts";
import { type RunningProcess, startProcess } from "../test/process.ts";

const duration = Number(process.env.BENCH_DURATION ?? 10);
const connections = Number(process.env.BENCH_CONNECTIONS ?? 16);
const trials = Number(process.env.BENCH_TRIALS ?? 200);
const rounds = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 3));
const baseline = process.env.BENCH_BASELINE ? path.resolve(process.env.BENCH_BASELINE) : undefined;
const only = process.env.BENCH_ONLY; // lag | writes | append | ratelimit
const slice = Number(process.env.BENCH_SLICE ?? 2);
/** Part 2: whether B runs (1) or A writes alone (0). */
const peers = Number(process.env.BENCH_PEERS ?? 1);
const root = path.resolve(import.meta.dirname, "..");

interface Pair {
  a: RunningProcess;
  b: RunningProcess;
  admin: string;
  stop(): Promise<void>;
}

/** A and B (`platform start` of `checkout`) on a fresh database; A bootstraps and writes the admin PAT. */
async function startPair(checkout: string): Promise<Pair> {
  const backend: TestBackend = await freshBackend();
  const dir = tempDir("bench-caches-");
  const patPath = path.join(dir, "admin.pat");
  const bin = [process.execPath, path.join(checkout, "bin/platform.js"), "start"];
  const common = { ...backend.env, PLATFORM_PORT: "0", PLATFORM_MASTERKEY: randomBytes(32).toString("hex") };
  const a = await startProcess({ ...common, PLATFORM_FIRSTINSTANCE_PAT_PATH: patPath }, 60_000, bin);
  const b = peers > 0 ? await startProcess(common, 60_000, bin) : a;
  return {
    a,
    b,
    admin: readFileSync(patPath, "utf8").trim(),
    async stop() {
      if (b !== a) await b.stop();
      await a.stop();
      await backend.cleanup();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function call(base: string, token: string, method: string, route: string, body?: unknown) {
  const response = await fetch(`${base}${route}`, {
    method,
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, json: text ? JSON.parse(text) : undefined };
}

const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
const ms = (n: number) => n.toFixed(1);

export async function revocationLag(): Promise<void> {
  const pair = await startPair(root);
  try {
    const { a, b, admin } = pair;
    const user = await call(a.url, admin, "POST", "/resources/v3alpha/users", {
      username: "bench-pat",
      machine: { name: "bench" },
    });
    const userId = user.json.details.id as string;
    const lags: number[] = [];
    const requests: number[] = [];
    let polls = 0;
    for (let i = 0; i < trials; i++) {
      const pat = await call(a.url, admin, "POST", `/resources/v3alpha/users/${userId}/pats`, {});
      const token = pat.json.token as string;
      const atB = async () => {
        const started = performance.now();
        const { status } = await call(b.url, token, "GET", "/settings/v3alpha/languages");
        requests.push(performance.now() - started);
        return status;
      };
      if ((await atB()) !== 200) throw new Error("B does not accept the new token");
      await call(a.url, admin, "DELETE", `/resources/v3alpha/users/${userId}/pats/${pat.json.pat_id}`);
      const answered = performance.now();
      for (;;) {
        polls++;
        if ((await atB()) === 401) break;
        if (performance.now() - answered > 10_000) throw new Error("B still accepts after 10 s");
      }
      lags.push(performance.now() - answered);
    }
    lags.sort((x, y) => x - y);
    requests.sort((x, y) => x - y);
    console.log(`Revocation lag, ${trials} trials (PAT removed through A → refused by B)\n`);
    console.log("| | p50 ms | p90 ms | p99 ms | max ms |");
    console.log("|---|---:|---:|---:|---:|");
    console.log(
      `| A answered → B refused | ${ms(percentile(lags, 0.5))} | ${ms(percentile(lags, 0.9))} | ${ms(percentile(lags, 0.99))} | ${ms(lags.at(-1)!)} |`,
    );
    console.log(
      `| one request to B (the resolution) | ${ms(percentile(requests, 0.5))} | ${ms(percentile(requests, 0.9))} | ${ms(percentile(requests, 0.99))} | ${ms(requests.at(-1)!)} |`,
    );
    console.log(
      `\nrequests to B per refusal: ${(polls / trials).toFixed(2)} (1 = refused at the first one)\n`,
    );
  } finally {
    await pair.stop();
  }
}

/** CPU time (user + system, ms) a process used so far, from /proc (Linux). */
function cpuMs(pid: number | undefined): number {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100; // utime, stime in clock ticks (USER_HZ 100)
  } catch {
    return Number.NaN;
  }
}

async function patchLoad(pair: Pair) {
  const cpuBefore = [cpuMs(pair.a.child.pid), cpuMs(pair.b.child.pid)];
  let i = 0;
  const bodies = ['{"default_language":{"key":"de"}}', '{"default_language":{"key":"fr"}}'];
  const result = await autocannon({
    url: `${pair.a.url}/settings/v3alpha/languages`,
    method: "PATCH",
    headers: { authorization: `Bearer ${pair.admin}`, "content-type": "application/json" },
    connections,
    duration,
    requests: [{ setupRequest: (req: autocannon.Request) => ({ ...req, body: bodies[i++ % 2] }) }],
  });
  const requests = result.requests.total;
  return {
    rps: Math.round(result.requests.average),
    p50: result.latency.p50,
    p99: result.latency.p99,
    errors: result.errors + result.non2xx,
    // CPU per request: steadier than req/s on a shared machine
    cpuA: (cpuMs(pair.a.child.pid) - cpuBefore[0]) / requests,
    cpuB: pair.b === pair.a ? Number.NaN : (cpuMs(pair.b.child.pid) - cpuBefore[1]) / requests,
  };
}

async function writeThroughput(): Promise<void> {
  console.log(
    `PATCH /settings/v3alpha/languages on A${peers > 0 ? " while B listens" : " alone"}, ${connections} connections, ${duration} s\n`,
  );
  console.log("| version | round | req/s | p50 ms | p99 ms | errors | CPU ms per request, A | B |");
  console.log("|---|---:|---:|---:|---:|---:|---:|---:|");
  const versions: [string, string][] = [["this", root]];
  if (baseline) versions.push(["baseline", baseline]);
  for (let round = 1; round <= rounds; round++) {
    for (const [name, checkout] of round % 2 ? versions : [...versions].reverse()) {
      const pair = await startPair(checkout);
      try {
        const r = await patchLoad(pair);
        console.log(
          `| ${name} | ${round} | ${r.rps} | ${r.p50} | ${r.p99} | ${r.errors} | ${r.cpuA.toFixed(2)} | ${r.cpuB.toFixed(2)} |`,
        );
      } finally {
        await pair.stop();
      }
    }
  }
  console.log();
}

/** The same PostgreSQL database as one process sees the embedded one: the event store sends no notification. */
function singleProcess(db: PostgresDatabase): Database {
  return {
    kind: "pglite",
    query: (sql, params) => db.query(sql, params),
    exec: (sql) => db.exec(sql),
    transaction: (fn) => db.transaction(fn),
    holdProcessLease: (id) => db.holdProcessLease(id),
    isProcessAlive: (id) => db.isProcessAlive(id),
    close: () => db.close(),
  };
}

async function appendThroughput(): Promise<void> {
  const backend = await freshBackend();
  const db = new PostgresDatabase(backend.env.DATABASE_URL);
  try {
    await migrate(db);
    const quiet = new EventStore(singleProcess(db), projections);
    const notifying = new EventStore(db, projections);
    const variants = {
      none: { store: quiet, inTransaction: false },
      "in the transaction": { store: quiet, inTransaction: true },
      "after the commit": { store: notifying, inTransaction: false },
    };
    const run = async ({ store, inTransaction }: { store: EventStore; inTransaction: boolean }) => {
      let count = 0;
      const started = performance.now();
      const until = started + slice * 1000;
      await Promise.all(
        Array.from({ length: connections }, async () => {
          while (performance.now() < until) {
            await store.push({ instanceId: "bench", creator: "bench" }, async (tx) => {
              if (inTransaction) await tx.query("SELECT pg_notify('platform_bench', 'x')");
              return [
                {
                  aggregateType: "bench",
                  aggregateId: newId(),
                  type: "bench.appended",
                  resourceOwner: "bench",
                },
              ];
            });
            count++;
          }
        }),
      );
      return (count * 1000) / (performance.now() - started);
    };
    const names = Object.keys(variants) as (keyof typeof variants)[];
    const slices = Math.max(1, Math.round((duration * rounds) / slice));
    const measured = Object.fromEntries(names.map((n) => [n, [] as number[]]));
    // short slices, the variants taking turns: the disk's pace drifts (checkpoints, other work on the machine)
    for (let i = 0; i < slices; i++)
      for (const name of i % 2 ? [...names].reverse() : names) measured[name].push(await run(variants[name]));
    console.log(
      `EventStore.push, one event per push, ${connections} concurrent: ${slices} slices of ${slice} s per variant, taking turns (pushes/s)\n`,
    );
    // each slice beside the "none" slice of the same turn: the ratio is what the variant costs then
    console.log("| variant | median | mean | min | max | median ratio to none, same turn |");
    console.log("|---|---:|---:|---:|---:|---:|");
    for (const name of names) {
      const sorted = [...measured[name]].sort((x, y) => x - y);
      const mean = sorted.reduce((sum, x) => sum + x, 0) / sorted.length;
      const ratios = measured[name].map((x, i) => x / measured.none[i]).sort((x, y) => x - y);
      console.log(
        `| ${name} | ${Math.round(percentile(sorted, 0.5))} | ${Math.round(mean)} | ${Math.round(sorted[0])} | ${Math.round(sorted.at(-1)!)} | ${percentile(ratios, 0.5).toFixed(2)} |`,
      );
    }
    console.log();
  } finally {
    await db.close();
    await backend.cleanup();
  }
}

async function rateLimitCost(): Promise<void> {
  const backend = await freshBackend();
  const db = new PostgresDatabase(backend.env.DATABASE_URL);
  try {
    await migrate(db);
    const latencies: number[] = [];
    for (let i = 0; i < 2000; i++) {
      const started = performance.now();
      await countAttempt(db, `name:user-${i % 50}`, 60_000);
      latencies.push(performance.now() - started);
    }
    latencies.sort((x, y) => x - y);
    let count = 0;
    const until = performance.now() + duration * 1000;
    await Promise.all(
      Array.from({ length: connections }, async (_, worker) => {
        for (let i = 0; performance.now() < until; i++, count++)
          await countAttempt(db, `192.0.2.${(worker * 7 + i) % 200}`, 60_000);
      }),
    );
    console.log("Login rate limit on PostgreSQL: one counted attempt (an upsert)\n");
    console.log("| one at a time: p50 ms | p99 ms | " + `${connections} at once: attempts/s |`);
    console.log("|---:|---:|---:|");
    console.log(
      `| ${ms(percentile(latencies, 0.5))} | ${ms(percentile(latencies, 0.99))} | ${Math.round(count / duration)} |`,
    );
    console.log();
  } finally {
    await db.close();
    await backend.cleanup();
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  if (!process.env.DATABASE_URL) {
    console.error(
      "bench/caches.ts needs PostgreSQL: set DATABASE_URL (several processes share one database)",
    );
    process.exit(2);
  }
  const cpu = os.cpus()[0]?.model ?? "unknown CPU";
  console.log(
    `Caches across processes: ${os.cpus().length} × ${cpu}, node ${process.version}, PostgreSQL; load average ${os
      .loadavg()
      .map((l) => l.toFixed(1))
      .join(" ")}\n`,
  );
  if (!only || only === "lag") await revocationLag();
  if (!only || only === "writes") await writeThroughput();
  if (!only || only === "append") await appendThroughput();
  if (!only || only === "ratelimit") await rateLimitCost();
}
