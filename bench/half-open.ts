// `node --import tsx bench/half-open.ts`: how long Platform keeps a half-open connection, one whose request
// headers never finish (slowloris: one header byte every 200 ms). Starts `platform start` in a child process
// on a fresh database with the environment given (e.g. PLATFORM_HTTP_HEADERS_TIMEOUT_MS) and reports the
// time from connect until the server closed the connection, giving up after HALF_OPEN_MAX_S seconds
// (default 100: beyond Node's own headersTimeout of 60 s plus its 30 s check interval). Meanwhile it checks
// that /healthz keeps answering.
import { spawn } from "node:child_process";
import net from "node:net";
import path from "node:path";
import { freshBackend } from "../test/helpers.ts";

const maxSeconds = Number(process.env.HALF_OPEN_MAX_S ?? 100);
const root = path.resolve(import.meta.dirname, "..");
const port = 19000 + Math.floor(Math.random() * 1000);
const backend = await freshBackend();
const child = spawn(process.execPath, [path.join(root, "bin/platform.js"), "start"], {
  env: {
    ...process.env,
    PLATFORM_PORT: String(port),
    DATABASE_URL: "",
    ...backend.env,
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

  const started = performance.now();
  const socket = net.connect(port, "127.0.0.1");
  socket.on("error", () => {});
  socket.write("GET /healthz HTTP/1.1\r\nHost: localhost\r\n");
  const header = "X-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
  let sent = 0;
  const drip = setInterval(() => socket.write(header[sent++ % header.length]), 200);
  let answered = 0;
  let failed = 0;
  const probe = setInterval(async () => {
    try {
      const response = await fetch(`http://127.0.0.1:${port}/healthz`);
      await response.text();
      if (response.ok) answered++;
      else failed++;
    } catch {
      failed++;
    }
  }, 1000);
  const closedAfter = await new Promise<number | undefined>((resolve) => {
    const giveUp = setTimeout(() => resolve(undefined), maxSeconds * 1000);
    socket.once("close", () => {
      clearTimeout(giveUp);
      resolve(performance.now() - started);
    });
  });
  clearInterval(drip);
  clearInterval(probe);
  socket.destroy();
  console.log(
    closedAfter === undefined
      ? `half-open connection still open after ${maxSeconds} s (${sent} header bytes dripped)`
      : `half-open connection closed by the server after ${(closedAfter / 1000).toFixed(2)} s`,
  );
  console.log(`meanwhile /healthz answered ${answered} times, failed ${failed} times`);
} finally {
  child.kill("SIGTERM");
  await new Promise((resolve) => child.once("exit", resolve));
  await backend.cleanup();
}
