// BENCH_ONLY=notifications (bench/run.ts): the notification outbox's worker against a local SMTP server
// (smtp-server on a loopback port, plain SMTP, no AUTH, each message read to its end and counted), on a
// fresh database (embedded PGlite, or PostgreSQL when DATABASE_URL is set) in this process:
// BENCH_MESSAGES (default 3000) VERIFY_EMAIL messages, each with its sealed code, are queued while the
// worker is stopped, then a fresh worker drains them: messages/s from its start to the last one SENT.
// Each message is rendered (HTML and text), its code unsealed, and sent over a connection of its own.
import { SMTPServer } from "smtp-server";
import { addMachineUser, startPlatform } from "../test/helpers.ts";
import { printTable, record } from "./report.ts";

const count = Number(process.env.BENCH_MESSAGES ?? 3000);

let received = 0;
const smtp = new SMTPServer({
  logger: false,
  authOptional: true,
  disabledCommands: ["AUTH", "STARTTLS"],
  onData(stream, _session, callback) {
    stream.on("data", () => {});
    stream.on("end", () => {
      received++;
      callback();
    });
  },
});
await new Promise<void>((resolve) => smtp.listen(0, "127.0.0.1", resolve));
const smtpPort = (smtp.server.address() as import("node:net").AddressInfo).port;

const { MessageWorker } = await import("../src/notifications/worker.ts");
const platform = await startPlatform({ listen: true });
try {
  const owner = await addMachineUser(platform, {
    username: "bench-owner",
    membership: { contextType: "instance", roles: ["IAM_OWNER"] },
  });
  const call = (method: string, path: string, body?: unknown) =>
    fetch(`${platform.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${owner.token}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    }).then((r) => r.json() as Promise<{ details: { id: string } }>);
  const provider = await call("POST", "/resources/v3alpha/smtp_providers", {
    description: "bench",
    sender_address: "noreply@example.com",
    host: `127.0.0.1:${smtpPort}`,
  });
  await call("POST", `/resources/v3alpha/smtp_providers/${provider.details.id}/_activate`);
  const user = await call("POST", "/resources/v3alpha/users", {
    username: "bench-recipient",
    human: { profile: { given_name: "Bench", family_name: "Mark" }, email: { address: "bench@example.com" } },
  });
  await platform.messages.worker.stop();
  const instanceId = platform.bootstrapResult!.instanceId;
  const origin = await platform.db.transaction((tx) => platform.messages.originOf(tx, instanceId));
  for (let done = 0; done < count; done += 500) {
    const n = Math.min(500, count - done);
    await platform.db.transaction(async (tx) => {
      for (let i = 0; i < n; i++)
        await platform.messages.queue(tx, {
          instanceId,
          userId: user.details.id,
          type: "VERIFY_EMAIL",
          recipient: `bench-${done + i}@example.com`,
          origin,
          code: { value: String(10_000_000 + done + i), expiresIn: 3600 },
        });
    });
  }
  const worker = new MessageWorker(
    platform.db,
    platform.deps.notifications,
    platform.deps.masterKey,
    platform.config.notification,
    { error: (object, message) => console.error(message, object) },
    "bench-drain",
  );
  const before = received;
  const started = performance.now();
  worker.start();
  while (received - before < count && performance.now() - started < 300_000)
    await new Promise((r) => setTimeout(r, 20));
  const seconds = (performance.now() - started) / 1000;
  await worker.stop();
  const [states] = await platform.db.query<{ sent: number; other: number }>(
    `SELECT count(*) FILTER (WHERE state = 2)::int AS sent, count(*) FILTER (WHERE state <> 2)::int AS other
     FROM notification_messages`,
  );
  const rate = (received - before) / seconds;
  console.log(
    `notifications: ${received - before} of ${count} messages received in ${seconds.toFixed(2)} s: ` +
      `${Math.round(rate)} messages/s (${platform.db.kind}); outbox: ${states.sent} SENT, ${states.other} not`,
  );
  record({
    group: "notifications",
    scenario: `outbox worker → local SMTP server, backlog of ${count} VERIFY_EMAIL (${platform.db.kind})`,
    rps: rate,
    p50: null,
    p99: null,
    errors: count - (received - before),
  });
  printTable();
} finally {
  await platform.stop();
  await new Promise<void>((resolve) => smtp.close(() => resolve()));
}
