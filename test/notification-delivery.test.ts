import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import path from "node:path";
import { after, describe, it } from "node:test";
import { freshBackend, type RestCall, restClient, type TestBackend, tempDir } from "./helpers.ts";
import { freePort, type RunningProcess, startProcess } from "./process.ts";
import { type SmtpReceiver, startSmtpReceiver } from "./smtp-receiver.ts";
import { testTime } from "./time.ts";

const onPostgres = Boolean(process.env.DATABASE_URL);
const USERS = "/resources/v3alpha/users";
const SEARCH = "/resources/v3alpha/notifications/_search";

/** The notification outbox across processes: a crash with messages unsent, several processes on one database. */
describe("notification messages across processes", () => {
  const backends: TestBackend[] = [];
  const running: RunningProcess[] = [];
  const receivers: SmtpReceiver[] = [];
  after(async () => {
    for (const p of running) if (p.child.exitCode === null && p.child.signalCode === null) await p.stop();
    for (const r of receivers) await r.close();
    for (const b of backends) await b.cleanup();
  });

  async function start(env: Record<string, string>) {
    const p = await startProcess(env);
    running.push(p);
    return p;
  }

  async function setUp(smtpPort: number) {
    const backend = await freshBackend();
    backends.push(backend);
    const patPath = path.join(tempDir("pat-"), "admin.pat");
    const env = {
      ...backend.env,
      PLATFORM_PORT: "0",
      PLATFORM_FIRSTINSTANCE_PAT_PATH: patPath,
      PLATFORM_LOG_LEVEL: "error",
      PLATFORM_NOTIFICATION_RETRY_DELAY_MS: "200",
      PLATFORM_NOTIFICATION_MAX_ATTEMPTS: "100",
    };
    const first = await start(env);
    const token = readFileSync(patPath, "utf8").trim();
    const rest = restClient(first, () => token);
    const provider = await rest("POST", "/resources/v3alpha/smtp_providers", {
      json: { description: "loopback", sender_address: "noreply@example.com", host: `127.0.0.1:${smtpPort}` },
    });
    assert.equal(provider.status, 201, provider.text);
    const activated = await rest(
      "POST",
      `/resources/v3alpha/smtp_providers/${provider.json.details.id}/_activate`,
    );
    assert.equal(activated.status, 200, activated.text);
    return { env, first, token, rest };
  }

  /** Creates `count` users and changes their passwords: one PASSWORD_CHANGED each; their addresses. */
  async function changePasswords(clients: RestCall[], prefix: string, count: number) {
    const addresses: string[] = [];
    for (let i = 0; i < count; i++) {
      const rest = clients[i % clients.length];
      const address = `${prefix}-${i}@example.com`;
      const user = await rest("POST", USERS, {
        json: {
          username: `${prefix}-${i}`,
          human: { profile: { given_name: "Crash", family_name: "Test" }, email: { address } },
        },
      });
      assert.equal(user.status, 201, user.text);
      const changed = await rest("POST", `${USERS}/${user.json.details.id}/_set_password`, {
        json: { password: "Secret-Pa55word!" },
      });
      assert.equal(changed.status, 200, changed.text);
      addresses.push(address);
    }
    return addresses;
  }

  async function total(rest: RestCall, state: string) {
    const r = await rest("POST", SEARCH, { json: [{ state: { state } }] });
    assert.equal(r.status, 200, r.text);
    return Number(r.json.details.total_result);
  }

  it("kill -9 with 40 unsent messages: all are sent after a restart, none lost", async () => {
    const port = await freePort();
    // the SMTP server is down while the messages are queued: every attempt fails, they stay pending
    const { env, first, token, rest } = await setUp(port);
    const addresses = await changePasswords([rest], "crash", 40);
    assert.equal(await total(rest, "NOTIFICATION_STATE_PENDING"), 40, "all 40 are waiting for the server");

    first.child.kill("SIGKILL");
    await new Promise((resolve) => first.child.once("exit", resolve));

    const smtp = await startSmtpReceiver({ port });
    receivers.push(smtp);
    const second = await start(env);
    const again = restClient(second, () => token);
    const deadline = Date.now() + testTime(90_000);
    while ((await total(again, "NOTIFICATION_STATE_SENT")) < 40) {
      if (Date.now() > deadline) assert.fail(`sent: ${await total(again, "NOTIFICATION_STATE_SENT")} of 40`);
      await new Promise((r) => setTimeout(r, 200));
    }
    const received = smtp.received.flatMap((m) => m.envelope.to);
    assert.deepEqual(
      [...new Set(received)].sort(),
      [...addresses].sort(),
      "every message arrived, none lost",
    );
    assert.equal(received.length, 40, "each once");
    assert.equal(await total(again, "NOTIFICATION_STATE_PENDING"), 0);
  });

  it("two processes on one PostgreSQL send each message once", {
    skip: !onPostgres && "PostgreSQL only",
  }, async () => {
    const smtp = await startSmtpReceiver({});
    receivers.push(smtp);
    const { env, first, token } = await setUp(smtp.port);
    const second = await start(env);
    const clients = [first, second].map((p) => restClient(p, () => token));
    const addresses = await changePasswords(clients, "shared", 30);
    const deadline = Date.now() + testTime(30_000);
    while ((await total(clients[0], "NOTIFICATION_STATE_SENT")) < 30) {
      if (Date.now() > deadline) assert.fail("not all 30 were sent");
      await new Promise((r) => setTimeout(r, 100));
    }
    await new Promise((r) => setTimeout(r, 1_000)); // would a second copy come?
    const received = smtp.received.flatMap((m) => m.envelope.to);
    assert.equal(received.length, 30, "each message once");
    assert.deepEqual([...received].sort(), [...addresses].sort());
  });
});
