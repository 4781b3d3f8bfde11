// `platform admin-token` while `platform start` runs on the same installation, both as real processes. On
// the embedded database (one process only) the server issues the token for the command over
// <dataDir>/admin.sock; on PostgreSQL the command writes to the database itself and no socket exists.
import assert from "node:assert/strict";
import { existsSync, lstatSync, readFileSync, rmSync } from "node:fs";
import net from "node:net";
import path from "node:path";
import { after, describe, it } from "node:test";
import { freshBackend, type TestBackend, tempDir } from "./helpers.ts";
import { type RunningProcess, runPlatform, startProcess } from "./process.ts";

const onPostgres = Boolean(process.env.DATABASE_URL);

/** The instance's feature flags: only an instance-level role such as IAM_OWNER may read them. */
async function readsFeatures(url: string, token: string): Promise<number> {
  const r = await fetch(`${url}/settings/v3alpha/features`, {
    headers: { authorization: `Bearer ${token}` },
  });
  return r.status;
}

/** Sends `bytes` over the Unix socket and returns all the server answers before it closes. */
function exchange(socketPath: string, bytes: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.createConnection({ path: socketPath });
    let answer = "";
    socket.setEncoding("utf8");
    socket.on("connect", () => socket.write(bytes));
    socket.on("data", (chunk: string) => (answer += chunk));
    socket.on("close", () => resolve(answer));
    socket.on("error", reject);
  });
}

describe("platform admin-token while the server runs", () => {
  const backends: TestBackend[] = [];
  const servers: RunningProcess[] = [];
  const dirs: string[] = [];
  const dir = (prefix: string) => {
    const made = tempDir(prefix);
    dirs.push(made);
    return made;
  };
  after(async () => {
    for (const server of servers) await server.stop();
    for (const backend of backends) await backend.cleanup();
    for (const made of dirs) rmSync(made, { recursive: true, force: true });
  });
  /** A fresh installation with its own data directory (on PostgreSQL too, to show it stays unused). */
  const installation = async () => {
    const backend = await freshBackend();
    backends.push(backend);
    const dataDir = backend.env.PLATFORM_DATA_DIR ?? dir("admin-token-data-");
    return { dataDir, env: { ...backend.env, PLATFORM_DATA_DIR: dataDir, PLATFORM_PORT: "0" } };
  };
  const start = async (env: Record<string, string>) => {
    const server = await startProcess(env, 60_000);
    servers.push(server);
    return server;
  };

  it("writes a working IAM_OWNER token while `platform start` runs; embedded: through admin.sock (0600), removed at stop", async () => {
    const { dataDir, env } = await installation();
    const socketPath = path.join(dataDir, "admin.sock");
    const server = await start(env);
    if (onPostgres) assert.equal(existsSync(socketPath), false, "no socket on PostgreSQL");
    else {
      const socket = lstatSync(socketPath);
      assert.ok(socket.isSocket());
      assert.equal(socket.mode & 0o777, 0o600, "only the data directory's owner may connect");
    }

    const file = path.join(dir("admin-token-out-"), "admin.pat");
    const made = await runPlatform(["admin-token", "--out", file], env);
    assert.equal(made.code, 0, made.stderr);
    if (onPostgres) assert.doesNotMatch(made.stdout, /issued by the running server/);
    else
      assert.match(
        made.stdout,
        new RegExp(
          `^issued by the running server \\(pid ${server.child.pid}\\) over ${socketPath.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}$`,
          "m",
        ),
      );
    assert.match(made.stdout, /^instance \d+: created machine user admin-client \(\d+\) with IAM_OWNER$/m);
    assert.equal(lstatSync(file).mode & 0o777, 0o600);
    const token = readFileSync(file, "utf8").trim();
    assert.match(token, /^[A-Za-z0-9_-]{43}$/);
    assert.doesNotMatch(made.stdout + made.stderr, new RegExp(token), "the token is only in the file");
    assert.equal(await readsFeatures(server.url, token), 200, "the running server accepts it at once");

    // --user and --out -: the token alone on standard output, the report on standard error
    const second = await runPlatform(["admin-token", "--out", "-", "--user", "admin-client"], env);
    assert.equal(second.code, 0, second.stderr);
    assert.match(
      second.stderr,
      /^instance \d+: admin-client keeps its roles \(IAM_OWNER on the instance\)$/m,
    );
    const other = second.stdout.trim();
    assert.match(other, /^[A-Za-z0-9_-]{43}$/);
    assert.notEqual(other, token);
    assert.equal(await readsFeatures(server.url, other), 200);

    // the command's refusals come back as its one line
    const unknown = await runPlatform(["admin-token", "--out", "-", "--user", "nobody"], env);
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /^platform: no user nobody in instance \d+; leave out --user/);
    assert.equal(unknown.stdout, "");
    const noInstance = await runPlatform(["admin-token", "--out", "-", "--instance", "999"], env);
    assert.equal(noInstance.code, 1);
    assert.equal(noInstance.stderr, "platform: no instance 999\n");

    if (!onPostgres) {
      // one line of JSON, at most 4 KB, one operation: anything else is answered with a refusal
      const long = JSON.parse(await exchange(socketPath, `${"x".repeat(5000)}\n`));
      assert.deepEqual(long, { ok: false, error: "request longer than 4096 bytes" });
      const op = JSON.parse(await exchange(socketPath, '{"op":"drop-database"}\n'));
      assert.equal(op.ok, false);
      assert.match(op.error, /^unknown operation "drop-database"/);
    }

    assert.equal(await server.stop(), 0);
    assert.equal(existsSync(socketPath), false, "the socket is removed at stop");
  });

  it("a socket left by a killed server does not stop the command, and the next start replaces it", {
    skip: onPostgres && "the admin socket exists on the embedded database only",
  }, async () => {
    const { dataDir, env } = await installation();
    const socketPath = path.join(dataDir, "admin.sock");
    const killed = await start(env);
    const exited = new Promise((resolve) => killed.child.once("exit", resolve));
    killed.child.kill("SIGKILL");
    await exited;
    assert.ok(lstatSync(socketPath).isSocket(), "SIGKILL leaves the socket behind");

    // Nobody listens: the command takes over the stale lock and writes to the database itself.
    const offline = await runPlatform(["admin-token", "--out", "-"], env);
    assert.equal(offline.code, 0, offline.stderr);
    assert.doesNotMatch(offline.stderr, /issued by the running server/);
    const first = offline.stdout.trim();

    const server = await start(env);
    const socket = lstatSync(socketPath);
    assert.ok(socket.isSocket());
    assert.equal(socket.mode & 0o777, 0o600);
    const online = await runPlatform(["admin-token", "--out", "-"], env);
    assert.equal(online.code, 0, online.stderr);
    assert.match(
      online.stderr,
      new RegExp(`^issued by the running server \\(pid ${server.child.pid}\\)`, "m"),
    );
    assert.match(
      online.stderr,
      /^instance \d+: reused machine user admin-client \(\d+\), which holds IAM_OWNER$/m,
    );
    for (const token of [first, online.stdout.trim()])
      assert.equal(await readsFeatures(server.url, token), 200);
    assert.equal(await server.stop(), 0);
    assert.equal(existsSync(socketPath), false);
  });
});
