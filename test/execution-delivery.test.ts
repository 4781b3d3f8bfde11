import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import path from "node:path";
import { after, describe, it } from "node:test";
import { actionsClient, TestTarget } from "../src/execution/testing.ts";
import { freshBackend, restClient, type TestBackend, tempDir } from "./helpers.ts";
import { freePort, type RunningProcess, startProcess } from "./process.ts";
import { testTime } from "./time.ts";

const onPostgres = Boolean(process.env.DATABASE_URL);

/** Event deliveries across processes: crashes, restarts, several processes on one database. */
describe("event deliveries across processes", () => {
  const backends: TestBackend[] = [];
  const running: RunningProcess[] = [];
  const targets: TestTarget[] = [];
  after(async () => {
    for (const p of running) if (p.child.exitCode === null && p.child.signalCode === null) await p.stop();
    for (const t of targets) await t.close();
    for (const b of backends) await b.cleanup();
  });

  async function start(env: Record<string, string>) {
    const p = await startProcess(env);
    running.push(p);
    return p;
  }

  async function setUp(extraEnv: Record<string, string> = {}) {
    const backend = await freshBackend();
    backends.push(backend);
    const patPath = path.join(tempDir("pat-"), "admin.pat");
    const env = {
      ...backend.env,
      PLATFORM_PORT: "0",
      PLATFORM_FIRSTINSTANCE_PAT_PATH: patPath,
      PLATFORM_LOG_LEVEL: "error",
      ...extraEnv,
    };
    const first = await start(env);
    const token = readFileSync(patPath, "utf8").trim();
    return { env, first, token };
  }

  const human = (username: string) => ({
    username,
    human: {
      profile: { given_name: "Crash", family_name: "Test" },
      email: { address: `${username}@example.com` },
    },
  });

  it("kill -9 with 100 undelivered events: all are delivered after a restart, none lost", async () => {
    const port = await freePort();
    const { env, first, token } = await setUp({ PLATFORM_EXECUTION_RETRY_DELAY_MS: "200" });
    const actions = actionsClient(first, token);
    // the target is down while the events are created
    const { id } = await actions.target("crash-target", `http://127.0.0.1:${port}/events`, { timeout: "2s" });
    await actions.execution({ event: { event: "user.human.added" } }, [id]);
    const created = new Set<string>();
    for (let i = 0; i < 100; i++) {
      const reply = await actions.rest("POST", "/resources/v3alpha/users", { json: human(`crash-${i}`) });
      assert.equal(reply.status, 201, reply.text);
      created.add(reply.json.details.id);
    }
    const pending = await actions.rest("POST", "/resources/v3alpha/executions/deliveries/_search", {
      json: [{ status: { status: "DELIVERY_STATUS_PENDING" } }],
    });
    assert.equal(pending.json.details.total_result, "100", "all 100 are waiting for the target");

    first.child.kill("SIGKILL");
    await new Promise((resolve) => first.child.once("exit", resolve));

    const target = await TestTarget.start(port);
    targets.push(target);
    const second = await start(env);
    const calls = await target.waitUntil(
      "/events",
      (all) => new Set(all.map((c) => c.json.aggregate_id)).size >= 100,
      90_000,
      "100 distinct events",
    );
    const received = new Set(calls.map((c) => c.json.aggregate_id));
    assert.deepEqual([...received].sort(), [...created].sort(), "every event arrived, none lost");

    const rest = restClient(second, () => token);
    const deadline = Date.now() + testTime(30_000);
    for (;;) {
      const delivered = await rest("POST", "/resources/v3alpha/executions/deliveries/_search", {
        json: [{ status: { status: "DELIVERY_STATUS_DELIVERED" } }],
      });
      if (delivered.json.details.total_result === "100") break;
      if (Date.now() > deadline) assert.fail(`delivered: ${delivered.json.details.total_result} of 100`);
      await new Promise((r) => setTimeout(r, 200));
    }
  });

  it("two processes on one PostgreSQL deliver each event once", {
    skip: !onPostgres && "PostgreSQL only",
  }, async () => {
    const target = await TestTarget.start();
    targets.push(target);
    const { env, first, token } = await setUp();
    const second = await start(env);
    const actions = actionsClient(first, token);
    const { id } = await actions.target("shared-target", target.url("/events"));
    await actions.execution({ event: { event: "user.human.added" } }, [id]);
    // executions are cached for up to 5 s per process: let the second one see this one
    await new Promise((r) => setTimeout(r, 5_500));

    const created: string[] = [];
    const clients = [first, second].map((p) => restClient(p, () => token));
    for (let i = 0; i < 60; i++) {
      const reply = await clients[i % 2]("POST", "/resources/v3alpha/users", { json: human(`shared-${i}`) });
      assert.equal(reply.status, 201, reply.text);
      created.push(reply.json.details.id);
    }
    await target.waitFor("/events", 60, 30_000);
    await new Promise((r) => setTimeout(r, 1_500)); // would a second copy come?
    const received = target.callsTo("/events").map((c) => c.json.aggregate_id as string);
    assert.equal(received.length, 60, "each event once");
    assert.deepEqual([...received].sort(), [...created].sort());
  });
});
