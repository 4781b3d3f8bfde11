// `node --import tsx bench/execution.ts`: the cost of the execution engine (docs/actions.md), on a fresh
// database (embedded PGlite, or PostgreSQL when DATABASE_URL is set) in a child process:
//  1. a request condition with one webhook target on a fast local target: req/s of a read without any
//     execution, then with the execution (every call waits for the target);
//  2. event delivery throughput: events created as fast as the API allows while a target of
//     `user.human.added` receives them (CreateUser, one event each); events/s from the first event to
//     the last one received;
//  3. event delivery throughput on a backlog: BENCH_EVENTS (default 3000) events appended while the
//     delivery worker is stopped, then drained by a fresh worker (in this process, same database kind).
// Options: BENCH_DURATION (seconds per scenario, default 10), BENCH_CONNECTIONS (default 16).
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
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
const backend = await freshBackend();

// The fast local target: answers 200 at once, counts what it receives.
let received = 0;
let lastReceivedAt = 0;
/** Events received (instance, aggregate, sequence), to tell duplicates. */
const events = new Set<string>();
let duplicates = 0;
const target = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on("data", (c: Buffer) => chunks.push(c));
  req.on("end", () => {
    received++;
    lastReceivedAt = performance.now();
    if (req.url !== "/request") {
      const e = JSON.parse(Buffer.concat(chunks).toString("utf8"));
      const key = `${e.instance_id}/${e.aggregate_type}/${e.aggregate_id}/${e.sequence}/${req.url}`;
      if (events.has(key)) duplicates++;
      events.add(key);
    }
    res.end();
  });
});
await new Promise<void>((resolve) => target.listen(0, "127.0.0.1", resolve));
const targetUrl = `http://127.0.0.1:${(target.address() as AddressInfo).port}`;

const child = spawn(process.execPath, [path.join(root, "bin/platform.js"), "start"], {
  env: {
    ...process.env,
    PLATFORM_PORT: String(port),
    DATABASE_URL: "",
    ...backend.env,
    PLATFORM_FIRSTINSTANCE_PAT_PATH: patPath,
    PLATFORM_FIRSTINSTANCE_ADMIN_PASSWORD: "Bench-Password1!",
    PLATFORM_LOG_LEVEL: "warn",
    PLATFORM_MASTERKEY: backend.env.DATABASE_URL ? randomBytes(32).toString("hex") : "",
  },
  stdio: ["ignore", "pipe", "inherit"],
});
await new Promise<void>((resolve, reject) => {
  child.stdout!.on("data", (d: Buffer) => {
    if (String(d).includes("Platform is running")) resolve();
  });
  child.on("exit", (code) => reject(new Error(`platform exited with ${code}`)));
});
const url = `http://localhost:${port}`;
const token = readFileSync(patPath, "utf8").trim();
const auth = { authorization: `Bearer ${token}` };
const json = { ...auth, "content-type": "application/json" };

// biome-ignore lint/suspicious/noExplicitAny: answers are read field by field
async function call(method: string, p: string, body?: unknown): Promise<any> {
  const res = await fetch(`${url}${p}`, {
    method,
    headers: json,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!res.ok) throw new Error(`${method} ${p}: ${res.status} ${await res.text()}`);
  return res.json();
}

async function load(
  p: string,
  options: { method?: "GET" | "POST"; body?: (i: number) => string; connections?: number } = {},
): Promise<autocannon.Result> {
  let i = 0;
  return autocannon({
    url: `${url}${p}`,
    method: options.method ?? "GET",
    headers: options.body ? json : auth,
    connections: options.connections ?? connections,
    duration,
    requests: options.body
      ? [
          {
            setupRequest: (req: autocannon.Request) => ({
              ...req,
              body: options.body!(i++),
            }),
          },
        ]
      : undefined,
  });
}

const row = (name: string, r: autocannon.Result) =>
  `| ${name} | ${Math.round(r.requests.average)} | ${r.latency.p50} | ${r.latency.p90} | ${r.latency.p99} | ${r.errors + r.non2xx} |`;

try {
  const cpu = os.cpus()[0]?.model ?? "unknown CPU";
  console.log(
    `Execution benchmark: ${os.cpus().length} × ${cpu}, node ${process.version}, ` +
      `${process.env.DATABASE_URL ? "PostgreSQL" : "embedded PGlite"}, ${connections} connections, ${duration} s per scenario\n`,
  );
  console.log("| scenario | req/s | p50 ms | p90 ms | p99 ms | errors |");
  console.log("|---|---:|---:|---:|---:|---:|");
  const languages = "/settings/v3alpha/languages";
  console.log(row("GET /settings/v3alpha/languages, no execution", await load(languages)));
  const sequential = await load(languages, { connections: 1 });
  console.log(row("same, 1 connection", sequential));

  const webhook = await call("POST", "/resources/v3alpha/targets", {
    name: "bench-webhook",
    rest_webhook: { url: `${targetUrl}/request` },
    timeout: "5s",
    interrupt_on_error: true,
  });
  await call("POST", "/resources/v3alpha/executions", {
    condition: {
      request: { method: "/platform.settings.language.v3alpha.PlatformLanguageSettings/ResolveLanguages" },
    },
    targets: [webhook.details.id],
  });
  const before = received;
  const withTarget = await load(languages);
  console.log(row("same, request condition with one webhook target", withTarget));
  const sequentialWith = await load(languages, { connections: 1 });
  console.log(row("same, 1 connection", sequentialWith));
  console.log(
    `\n(the target received ${received - before} calls; with 1 connection a call took ` +
      `${(sequentialWith.latency.average - sequential.latency.average).toFixed(2)} ms more on average)\n`,
  );

  // Event delivery throughput.
  const eventTarget = await call("POST", "/resources/v3alpha/targets", {
    name: "bench-events",
    rest_webhook: { url: `${targetUrl}/events` },
    timeout: "5s",
    is_async: true,
  });
  await call("POST", "/resources/v3alpha/executions", {
    condition: { event: { event: "user.human.added" } },
    targets: [eventTarget.details.id],
  });
  const receivedBefore = received;
  const started = performance.now();
  const writes = await load("/resources/v3alpha/users", {
    method: "POST",
    body: (i) =>
      JSON.stringify({
        username: `bench-${i}`,
        human: { profile: { given_name: "B", family_name: "U" }, email: { address: `b${i}@example.com` } },
      }),
  });
  const writesDone = performance.now();
  // the events are what the delivery log says (a failed request appends none; requests still under way
  // when the load ends may add a few)
  const logged = async () =>
    Number(
      (
        await call("POST", "/resources/v3alpha/executions/deliveries/_search?query.limit=1", [
          { target: { id: eventTarget.details.id } },
        ])
      ).details.total_result,
    );
  let created = await logged();
  const deadline = writesDone + 120_000;
  while (performance.now() < deadline) {
    if (received - receivedBefore >= created) {
      created = await logged();
      if (received - receivedBefore >= created) break;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  const delivered = received - receivedBefore;
  const seconds = (lastReceivedAt - started) / 1000;
  console.log(row("POST /resources/v3alpha/users (1 event each, 1 event target)", writes));
  console.log(
    `\nevent deliveries: ${created} events created in ${((writesDone - started) / 1000).toFixed(1)} s, ` +
      `${delivered} delivered, the last ${((lastReceivedAt - writesDone) / 1000).toFixed(2)} s after the last write: ` +
      `${Math.round(delivered / seconds)} events/s end to end; ${duplicates} received twice`,
  );
} finally {
  child.kill("SIGTERM");
  await new Promise((resolve) => child.on("exit", resolve));
  rmSync(dir, { recursive: true, force: true });
  await backend.cleanup();
}

// 3. Draining a backlog.
{
  const count = Number(process.env.BENCH_EVENTS ?? 3000);
  const { startPlatform, addMachineUser } = await import("../test/helpers.ts");
  const { actionsClient } = await import("../src/execution/testing.ts");
  const { DeliveryWorker } = await import("../src/execution/worker.ts");
  const { UserEvent, USER } = await import("../src/domain/user/events.ts");
  const platform = await startPlatform({ listen: true });
  try {
    const owner = await addMachineUser(platform, {
      username: "bench-owner",
      membership: { contextType: "instance", roles: ["IAM_OWNER"] },
    });
    const actions = actionsClient(platform, owner.token);
    const { id } = await actions.target("bench-backlog", `${targetUrl}/backlog`, { timeout: "5s" });
    await actions.execution({ event: { event: UserEvent.metadataSet } }, [id]);
    await platform.executions.worker.stop();
    const instanceId = platform.bootstrapResult!.instanceId;
    const orgId = platform.bootstrapResult!.orgId;
    for (let done = 0; done < count; done += 500) {
      const n = Math.min(500, count - done);
      await platform.eventStore.push({ instanceId, creator: "bench" }, async () =>
        Array.from({ length: n }, (_, i) => ({
          aggregateType: USER,
          aggregateId: owner.userId,
          type: UserEvent.metadataSet,
          resourceOwner: orgId,
          payload: { key: `k${done + i}`, value: "dg==" },
        })),
      );
    }
    const before = received;
    const worker = new DeliveryWorker(platform.executions.engine, platform.db, "bench-drain");
    const started = performance.now();
    worker.start();
    while (received - before < count && performance.now() - started < 300_000)
      await new Promise((r) => setTimeout(r, 20));
    const seconds = (performance.now() - started) / 1000;
    await worker.stop();
    console.log(
      `backlog: ${received - before} of ${count} events delivered in ${seconds.toFixed(2)} s: ` +
        `${Math.round((received - before) / seconds)} events/s (${platform.db.kind}); ${duplicates} received twice in all`,
    );
  } finally {
    await platform.stop();
    target.close();
  }
}
