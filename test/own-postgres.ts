/**
 * A PostgreSQL server of the test's own (initdb in a temporary directory, a free port), which the test may
 * stop, freeze (SIGSTOP: connections stay open and nothing answers) and restart without disturbing the
 * server the rest of the suite uses. Debian's binaries (/usr/lib/postgresql/<version>/bin); as root the
 * server runs as the `postgres` user, since PostgreSQL refuses to run as root.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";
import { testTime } from "./time.ts";

/** The directory of Debian's newest PostgreSQL binaries, or undefined. */
export function postgresBin(): string | undefined {
  const base = "/usr/lib/postgresql";
  if (!existsSync(base)) return undefined;
  const versions = readdirSync(base)
    .filter((v) => existsSync(path.join(base, v, "bin", "initdb")))
    .sort((a, b) => Number(a) - Number(b));
  return versions.length ? path.join(base, versions.at(-1)!, "bin") : undefined;
}

/** The processes whose parent is `parent` (from /proc). */
function childrenOf(parent: number): number[] {
  const children: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      // pid (comm) state ppid ...: comm may hold spaces and parentheses, so read after the last ")"
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (ppid === parent) children.push(Number(entry));
    } catch {} // ended meanwhile
  }
  return children;
}

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

export class OwnPostgres {
  private child?: ChildProcess;
  private exited?: Promise<void>;

  private constructor(
    private readonly bin: string,
    readonly dir: string,
    readonly port: number,
    private readonly ids: { uid: number; gid: number } | undefined,
  ) {}

  /** initdb and start; call `stop()` and `remove()` when done. */
  static async create(): Promise<OwnPostgres> {
    const bin = postgresBin();
    if (!bin) throw new Error("PostgreSQL binaries not found under /usr/lib/postgresql");
    const dir = mkdtempSync(path.join(os.tmpdir(), "platform-pg-"));
    const ids =
      process.getuid?.() === 0
        ? {
            uid: Number(execFileSync("id", ["-u", "postgres"]).toString()),
            gid: Number(execFileSync("id", ["-g", "postgres"]).toString()),
          }
        : undefined;
    if (ids) chownSync(dir, ids.uid, ids.gid);
    execFileSync(
      path.join(bin, "initdb"),
      ["-D", path.join(dir, "data"), "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"],
      { stdio: "ignore", ...(ids ?? {}) },
    );
    const server = new OwnPostgres(bin, dir, await freePort(), ids);
    await server.start();
    return server;
  }

  /** The URL of `database` on this server. */
  url(database = "postgres"): string {
    return `postgres://postgres@127.0.0.1:${this.port}/${database}`;
  }

  /** Starts the server (in a process group of its own, so that every backend can be signalled at once). */
  async start(): Promise<void> {
    this.child = spawn(
      path.join(this.bin, "postgres"),
      [
        ...["-D", path.join(this.dir, "data"), "-p", String(this.port), "-k", this.dir],
        ...["-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "max_connections=60"],
      ],
      { detached: true, stdio: "ignore", ...(this.ids ?? {}) },
    );
    const child = this.child;
    this.exited = new Promise((resolve) => child.once("exit", () => resolve()));
    const until = Date.now() + testTime(60_000);
    for (;;) {
      const client = new pg.Client({ connectionString: this.url(), connectionTimeoutMillis: 2000 });
      try {
        await client.connect();
        await client.end();
        return;
      } catch (error) {
        await client.end().catch(() => {});
        if (Date.now() > until || child.exitCode !== null) throw error;
        await sleep(100);
      }
    }
  }

  /**
   * Freezes the server and every backend (SIGSTOP): open connections stay open, nothing answers. The
   * postmaster first, so that it forks nothing meanwhile; its children each run in a session of their own
   * (PostgreSQL calls setsid), so they are found by their parent.
   */
  freeze(): void {
    this.signalAll("SIGSTOP");
  }

  /** Lets a frozen server go on (SIGCONT). */
  thaw(): void {
    this.signalAll("SIGCONT");
  }

  private signalAll(signal: NodeJS.Signals): void {
    const postmaster = this.child!.pid!;
    process.kill(postmaster, signal);
    for (const pid of childrenOf(postmaster)) {
      try {
        process.kill(pid, signal);
      } catch {} // ended meanwhile
    }
  }

  /** A fast shutdown (SIGINT: open transactions rolled back, connections closed). */
  async stop(): Promise<void> {
    if (!this.child || this.child.exitCode !== null) return;
    try {
      process.kill(-this.child.pid!, "SIGCONT");
      process.kill(this.child.pid!, "SIGINT");
    } catch {}
    await this.exited;
  }

  async remove(): Promise<void> {
    await this.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }

  /** Runs `sql` as the superuser on the `postgres` database. */
  async query(sql: string, params: unknown[] = []): Promise<pg.QueryResult> {
    const client = new pg.Client({ connectionString: this.url() });
    await client.connect();
    try {
      return await client.query(sql, params);
    } finally {
      await client.end();
    }
  }
}
