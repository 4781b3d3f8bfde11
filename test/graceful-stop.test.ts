/**
 * A graceful stop (SIGTERM) of a real `platform start`: the requests of accepted connections are answered
 * and the event deliveries in flight finish before the process exits, on both databases; the stop says so
 * in one log line; attempts in the delivery log are the calls the target received.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import http from "node:http";
import path from "node:path";
import { after, describe, it } from "node:test";
import { actionsClient, TestTarget } from "../src/execution/testing.ts";
import { freshBackend, type Json, restClient, type TestBackend, tempDir } from "./helpers.ts";
import { type RunningProcess, startProcess } from "./process.ts";

const USERS = "/resources/v3alpha/users";
const SESSIONS = "/resources/v3alpha/sessions";
const DELIVERIES = "/resources/v3alpha/executions/deliveries/_search";
const PASSWORD = "Correct-Horse-1!";

const human = (username: string, password = true) => ({
  username,
  human: {
    profile: { given_name: "Stop", family_name: "Test" },
    email: { address: `${username}@example.com` },
    ...(password ? { password: { password: PASSWORD, change_required: false } } : {}),
  },
});

/**
 * One request on a connection of its own (to 127.0.0.1, no name lookup): `sent` once it is written, then
 * its status, or the error that ended it (ECONNRESET, ...).
 */
function request(
  base: string,
  token: string,
  method: string,
  path: string,
  json: unknown,
): { sent: Promise<void>; answer: Promise<string> } {
  const body = JSON.stringify(json);
  const url = new URL(path, base);
  const host = url.host;
  url.hostname = "127.0.0.1";
  let written: () => void = () => {};
  const sent = new Promise<void>((resolve) => (written = resolve));
  const answer = new Promise<string>((resolve) => {
    const req = http.request(
      url,
      {
        method,
        agent: false,
        headers: {
          host,
          authorization: `Bearer ${token}`,
          "content-type": "application/json",
          "content-length": Buffer.byteLength(body),
        },
      },
      (res) => {
        let text = "";
        res.on("data", (d) => (text += d));
        res.on("end", () => resolve(res.complete ? String(res.statusCode) : `incomplete ${res.statusCode}`));
        res.on("error", (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
      },
    );
    req.on("error", (error: NodeJS.ErrnoException) => {
      written();
      resolve(error.code ?? error.message);
    });
    req.end(body, () => written());
  });
  return { sent, answer };
}

/** The JSON log lines of a process's standard output. */
function logLines(stdout: string): Json[] {
  return stdout
    .split("\n")
    .filter((line) => line.startsWith("{"))
    .map((line) => JSON.parse(line));
}

describe("graceful stop (SIGTERM)", () => {
  const backends: TestBackend[] = [];
  const running: RunningProcess[] = [];
  const targets: TestTarget[] = [];
  after(async () => {
    for (const p of running) if (p.child.exitCode === null && p.child.signalCode === null) await p.stop();
    for (const t of targets) await t.close();
    for (const b of backends) await b.cleanup();
  });

  async function setUp() {
    const backend = await freshBackend();
    backends.push(backend);
    const patPath = path.join(tempDir("pat-"), "admin.pat");
    const env = {
      ...backend.env,
      PLATFORM_PORT: "0",
      PLATFORM_FIRSTINSTANCE_PAT_PATH: patPath,
      PLATFORM_LOG_LEVEL: "info",
      PLATFORM_LOG_FORMAT: "json",
    };
    const first = await startProcess(env, 60_000);
    running.push(first);
    return { env, first, token: readFileSync(patPath, "utf8").trim() };
  }

  it("answers every request in flight (password sign-ins, user creations), exits 0 and logs what it finished", async () => {
    const { first, token } = await setUp();
    const rest = restClient(first, () => token);
    for (let i = 0; i < 16; i++) {
      const reply = await rest("POST", USERS, { json: human(`signer-${i}`) });
      assert.equal(reply.status, 201, reply.text);
    }
    const calls: ReturnType<typeof request>[] = [];
    for (let i = 0; i < 16; i++) {
      calls.push(
        request(first.url, token, "POST", SESSIONS, {
          checks: { user: { login_name: `signer-${i}` }, password: { password: PASSWORD } },
        }),
        request(first.url, token, "POST", USERS, human(`new-${i}`)),
      );
    }
    const answers = calls.map((call) => call.answer);
    // every request is sent; the stop comes while they are in flight (on the embedded database: waiting
    // for it, some not even read yet)
    await Promise.all(calls.map((call) => call.sent));
    await Promise.race(answers);
    const exited = first.stop();
    const statuses = await Promise.all(answers);
    assert.deepEqual(statuses, Array(32).fill("201"), "every request answered completely");
    assert.equal(await exited, 0, first.stderr());

    const lines = logLines(first.stdout());
    const stopLines = lines.filter((line) => line.stop);
    assert.equal(stopLines.length, 1, first.stdout());
    const [stop] = stopLines;
    assert.equal(stop.level, 30, "info: nothing was cut off");
    assert.match(stop.msg, /^stopped in \d+\.\d s: finished \d+ requests?, /);
    assert.equal(stop.stop.requests.cutOff, 0);
    assert.ok(stop.stop.requests.finished >= 1, JSON.stringify(stop));
    const completed = lines.filter((line) => line.msg === "request completed" && line.status === 201);
    assert.ok(completed.length >= 48, `${completed.length} completed requests logged`);
  });

  it("lets the deliveries in flight finish: after a restart no event reaches the target twice", async () => {
    const target = await TestTarget.start();
    targets.push(target);
    target.on("/events", () => ({ delayMs: 1_000 }));
    const { env, first, token } = await setUp();
    const actions = actionsClient(first, token);
    const { id } = await actions.target("slow-target", target.url("/events"), { timeout: "10s" });
    await actions.execution({ event: { event: "user.human.added" } }, [id]);
    const created: string[] = [];
    for (let i = 0; i < 40; i++) {
      const reply = await actions.rest("POST", USERS, { json: human(`delivered-${i}`, false) });
      assert.equal(reply.status, 201, reply.text);
      created.push(reply.json.details.id);
    }
    await target.waitFor("/events", 1, 30_000); // deliveries are in flight (each answered after 1 s)
    assert.equal(await first.stop(), 0, first.stderr());

    const second = await startProcess(env, 60_000);
    running.push(second);
    const rest = restClient(second, () => token);
    let rows: Json[] = [];
    const deadline = Date.now() + 90_000;
    for (;;) {
      const reply = await rest("POST", `${DELIVERIES}?query.limit=100`, { json: [{ target: { id } }] });
      assert.equal(reply.status, 200, reply.text);
      rows = reply.json.result;
      if (rows.length === 40 && rows.every((r) => r.status === "DELIVERY_STATUS_DELIVERED")) break;
      if (Date.now() > deadline)
        assert.fail(`not all delivered: ${JSON.stringify(rows.map((r) => r.status))}`);
      await new Promise((r) => setTimeout(r, 250));
    }
    await second.stop();

    const received = new Map<string, number>();
    for (const call of target.callsTo("/events"))
      received.set(call.json.aggregate_id, (received.get(call.json.aggregate_id) ?? 0) + 1);
    assert.deepEqual([...received.keys()].sort(), [...created].sort(), "every event arrived");
    const twice = [...received].filter(([, n]) => n > 1);
    assert.deepEqual(twice, [], "no event reached the target twice");
    const attempts = new Map(rows.map((r) => [r.event.aggregate_id as string, Number(r.attempts)]));
    for (const [aggregate, n] of received)
      assert.equal(attempts.get(aggregate), n, `attempts of ${aggregate}`);
    const [stop] = logLines(first.stdout()).filter((line) => line.stop);
    assert.ok(stop, first.stdout());
    assert.equal(stop.stop.deliveries.cutOff, 0, JSON.stringify(stop));
    assert.ok(stop.stop.deliveries.finished >= 1, JSON.stringify(stop));
  });
});
