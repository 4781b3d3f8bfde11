import { spawn } from "node:child_process";
import { closeSync, fsyncSync, mkdirSync, openSync, readdirSync, renameSync, rmSync } from "node:fs";
import { open } from "node:fs/promises";
import path from "node:path";
import v8 from "node:v8";
import { PGlite } from "@electric-sql/pglite";
import { NodeFS } from "@electric-sql/pglite/nodefs";
import type { Database, PoolStats, ProcessLease, Queryable, Row } from "./database.ts";
import { type DataDirLock, DataDirLockedError, lockDataDir } from "./datadir-lock.ts";
import { FairQueue } from "./fair-queue.ts";
import { ANALYZE_INTERVAL_MS, analyzeGrownTables } from "./pglite-analyze.ts";
import { DiskSpaceGuard, exitOnFatal, MIN_FREE_BYTES } from "./pglite-failures.ts";
import { PgliteStatements } from "./pglite-statements.ts";

export { DataDirLockedError };

/**
 * PostgreSQL settings of the embedded database, on top of PGlite's defaults (`startParams` replaces
 * them, so the list starts from `PGlite.defaultStartParams`). Measured on PGlite 0.5.16 (PostgreSQL 18),
 * see docs/operations.md:
 * - `shared_buffers=16MB` instead of 128MB: about 120 MB less resident memory, same throughput (the
 *   operating system caches the files behind the WebAssembly heap anyway).
 * - durable commits: PGlite starts PostgreSQL with `-F` (fsync off), and Emscripten's Node file system
 *   ignores fsync/fdatasync, so not one flush reached the disk. Without `-F` and with
 *   `wal_sync_method=fsync`, PostgreSQL flushes the WAL on every commit (and data files at checkpoints)
 *   through fsync(), which `DurableNodeFS` passes to the operating system.
 */
const pgliteStartParams = [
  ...PGlite.defaultStartParams.filter((param) => param !== "-F"),
  "-c",
  "shared_buffers=16MB",
  "-c",
  "fsync=on",
  "-c",
  "wal_sync_method=fsync",
];

/**
 * The embedded database: PostgreSQL compiled to WebAssembly, persisted in `<dataDir>/pgdata`.
 * It has one connection, served to one unit of work (a statement or a transaction) at a time, first come
 * first served by request, at most `queueLimit` waiting (fair-queue.ts; PGlite's own locks, taken inside,
 * are then never contended). A lock file keeps a second process off the same directory.
 */
export class PgliteDatabase implements Database {
  readonly kind = "pglite" as const;
  private readonly leases = new Set<string>();
  /** Queries and transactions started and not finished (running or waiting in the queue). */
  private pending = 0;
  /** Set by close(): no further query starts; `settled` is called once `pending` is back to 0. */
  private closing?: Promise<void>;
  private settled?: () => void;
  /** Queries and transactions: one runs on the connection, the others wait. */
  private readonly queue: FairQueue;
  private readonly statements: PgliteStatements;
  private readonly analyzeTimer: NodeJS.Timeout;
  private analyzing: Promise<unknown> | undefined;

  private constructor(
    private readonly pg: PGlite,
    private readonly lock: DataDirLock,
    private readonly space: DiskSpaceGuard,
    queueLimit: number,
  ) {
    this.queue = new FairQueue(queueLimit);
    this.statements = new PgliteStatements(pg);
    this.analyzeTimer = setInterval(() => void this.analyzeGrownTables(), ANALYZE_INTERVAL_MS).unref();
  }

  /**
   * What autovacuum's ANALYZE does on a server (pglite-analyze.ts): every ANALYZE_INTERVAL_MS, and from
   * tests. A pass that fails (the disk is full, the database closing) is left for the next one.
   */
  async analyzeGrownTables(): Promise<string[]> {
    if (this.analyzing) await this.analyzing.catch(() => {});
    const pass = analyzeGrownTables(this).catch(() => [] as string[]);
    this.analyzing = pass;
    try {
      return await pass;
    } finally {
      if (this.analyzing === pass) this.analyzing = undefined;
    }
  }

  /** What opening the database did that the operator should hear about (a stale lock taken over). */
  get notices(): string[] {
    return this.lock.tookOver ? [this.lock.tookOver] : [];
  }

  /**
   * `minFreeBytes`: changes are refused (DatabaseFullError) while less is free on the directory's file
   * system (default MIN_FREE_BYTES; 0 turns the guard off, for tests of what it prevents). `queueLimit`:
   * most units of work waiting for the connection (PLATFORM_EMBEDDED_QUEUE_LIMIT, default
   * DEFAULT_QUEUE_LIMIT); more are refused with DatabaseUnavailableError (fair-queue.ts).
   */
  static async open(
    dataDir: string,
    options: { minFreeBytes?: number; queueLimit?: number } = {},
  ): Promise<PgliteDatabase> {
    mkdirSync(dataDir, { recursive: true });
    let lock: DataDirLock;
    try {
      lock = await lockDataDir(dataDir);
    } catch (error) {
      if (error instanceof DataDirLockedError) throw error;
      throw new Error(`PLATFORM_DATA_DIR: cannot lock ${dataDir}: ${(error as Error).message}`);
    }
    try {
      const pgdata = path.join(dataDir, "pgdata");
      if (isEmptyDir(pgdata)) await initializeInChildProcess(dataDir, pgdata);
      const pg = await startPglite(
        pgdata,
        exitOnFatal(dataDir, () => lock.release()),
      );
      return new PgliteDatabase(
        pg,
        lock,
        new DiskSpaceGuard(pgdata, options.minFreeBytes ?? MIN_FREE_BYTES),
        options.queueLimit ?? DEFAULT_QUEUE_LIMIT,
      );
    } catch (error) {
      lock.release();
      throw new Error(
        `PLATFORM_DATA_DIR: cannot open the embedded database in ${dataDir}: ${(error as Error).message}`,
      );
    }
  }

  async query<T extends Row = Row>(sql: string, params: readonly unknown[] = []): Promise<T[]> {
    if (!READ_ONLY.test(sql)) this.space.check();
    // PGlite's own `query` takes both locks the same way: no statement runs inside another's transaction.
    return this.queued(async () => {
      await this.pg._checkReady();
      return this.pg._runExclusiveTransaction(() =>
        this.pg.runExclusive(() => this.statements.run<T>(sql, params, false)),
      );
    });
  }

  async exec(sql: string): Promise<void> {
    this.space.check();
    await this.queued(() => this.pg.exec(sql));
  }

  async transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
    this.space.check();
    return this.queued(() =>
      this.pg.transaction(async (tx) =>
        fn({
          query: async <R extends Row = Row>(sql: string, params: readonly unknown[] = []) => {
            if (tx.closed) throw new Error("Transaction is closed");
            return this.pg.runExclusive(() => this.statements.run<R>(sql, params, true));
          },
          exec: async (sql: string) => {
            await tx.exec(sql);
          },
        }),
      ),
    );
  }

  /** Through the fair queue, counted so that close() waits for what was started and queued. */
  private async queued<T>(run: () => Promise<T>): Promise<T> {
    if (this.closing) throw new Error("PGlite is closed"); // as PGlite says it (src/storage/availability.ts)
    this.pending++;
    try {
      return await this.queue.run(run);
    } finally {
      this.pending--;
      if (this.pending === 0) this.settled?.();
    }
  }

  poolStats(): PoolStats {
    const inUse = this.queue.inUse ? 1 : 0;
    return { max: 1, inUse, idle: 1 - inUse, waiting: this.queue.length, refused: this.queue.refused };
  }

  /**
   * One process per directory (the lock file): a process is running exactly when it holds a lease of
   * this very object, and every other process ID is one of a process that has ended.
   */
  async holdProcessLease(processId: string): Promise<ProcessLease> {
    this.leases.add(processId);
    return {
      release: async () => {
        this.leases.delete(processId);
      },
    };
  }

  async isProcessAlive(processId: string): Promise<boolean> {
    return this.leases.has(processId);
  }

  storageProblem(): string | undefined {
    return this.space.problem();
  }

  /** Refuses new queries, lets the running and queued ones finish, then closes PGlite and the lock. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      clearInterval(this.analyzeTimer);
      if (this.pending > 0) await new Promise<void>((resolve) => (this.settled = resolve));
      await this.analyzing?.catch(() => {});
      try {
        await this.pg.close();
      } finally {
        this.lock.release();
      }
    })();
    return this.closing;
  }
}

/** Most units of work waiting for the embedded database's connection (PLATFORM_EMBEDDED_QUEUE_LIMIT). */
export const DEFAULT_QUEUE_LIMIT = 256;

/** Statements that change nothing: run even while the disk is full. */
const READ_ONLY = /^\s*(SELECT|SHOW|VALUES|TABLE|EXPLAIN)\b/i;

/**
 * Starts PGlite on `pgdata`; `onFatal` hears PostgreSQL's PANICs and WebAssembly aborts (exitOnFatal).
 * PostgreSQL's other log lines (errors are also thrown to the caller) are not printed.
 */
async function startPglite(pgdata: string, onFatal: (reason: string) => void): Promise<PGlite> {
  // Only Liftoff, V8's baseline WebAssembly compiler: tiering PostgreSQL's hot functions up to TurboFan
  // kept about 40 MB more resident for no measurable gain in throughput (docs/operations.md). The flag is
  // read when a module is compiled and PGlite is the only WebAssembly in the process.
  v8.setFlagsFromString("--liftoff-only");
  const pg = new PGlite({
    dataDir: pgdata,
    fs: new DurableNodeFS(pgdata, (what) => onFatal(`aborted (${what})`)),
    startParams: pgliteStartParams,
    onStderr: (line) => {
      const panic = line.indexOf("PANIC:");
      if (panic >= 0) onFatal(line.slice(panic).replace(/\s+/g, " ").trim());
      return false;
    },
  });
  await pg.waitReady;
  return pg;
}

type EmscriptenModule = Parameters<NodeFS["init"]>[1];

/** Emscripten's NODEFS as far as this file relies on it (not part of PGlite's typed API). */
interface NodeFsInternals {
  stream_ops?: Record<string, unknown>;
  tryFSOperation?: (operation: () => unknown) => unknown;
}

/**
 * PGlite's Node file system (Emscripten NODEFS) with fsync: NODEFS has no fsync operation, so
 * PostgreSQL's fsync() calls returned success without reaching the disk. This adds it, mapping each
 * call to fsync(2) on the real file descriptor. (fdatasync stays a no-op in Emscripten, hence
 * `wal_sync_method=fsync`.) It also hands Emscripten the `onAbort` hook: a WebAssembly abort is otherwise
 * silent (pglite-failures.ts).
 */
class DurableNodeFS extends NodeFS {
  constructor(
    dataDir: string,
    private readonly onAbort: (what: unknown) => void,
  ) {
    super(dataDir);
  }

  override async init(pg: PGlite, opts: Partial<EmscriptenModule>) {
    const { emscriptenOpts } = await super.init(pg, opts);
    const preRun = [
      ...(emscriptenOpts.preRun ?? []),
      (mod: EmscriptenModule) => {
        const nodefs = mod.NODEFS as unknown as NodeFsInternals;
        const tryFSOperation = nodefs.tryFSOperation;
        if (!nodefs.stream_ops || typeof tryFSOperation !== "function")
          throw new Error(
            "this PGlite version's Node file system is not the one Platform knows; cannot flush",
          );
        nodefs.stream_ops.fsync = (stream: { nfd?: number }) => {
          if (stream.nfd !== undefined) tryFSOperation(() => fsyncSync(stream.nfd as number));
          return 0;
        };
      },
    ];
    return { emscriptenOpts: { ...emscriptenOpts, preRun, onAbort: this.onAbort } };
  }
}

function isEmptyDir(dir: string): boolean {
  try {
    return readdirSync(dir).length === 0;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return true;
    throw error;
  }
}

/**
 * Creates `pgdata` in a short-lived child process. PGlite's initdb runs a second, in-memory PostgreSQL
 * and copies its result over as a tarball: the process peaks near 1 GB and keeps several hundred MB of
 * it. The child builds the directory under a temporary name, flushes it and exits; the rename makes an
 * interrupted first start leave no half-made database.
 */
async function initializeInChildProcess(dataDir: string, pgdata: string): Promise<void> {
  const scratch = path.join(dataDir, "pgdata.initializing");
  rmSync(scratch, { recursive: true, force: true });
  // Compiled (dist/, `npm start`) the child runs the compiled script; from the sources (tests) through tsx.
  const compiled = import.meta.url.endsWith(".js");
  const script = path.join(import.meta.dirname, compiled ? "pglite-initialize.js" : "pglite-initialize.ts");
  const loader = compiled ? ["--enable-source-maps"] : ["--import", import.meta.resolve("tsx")];
  const child = spawn(process.execPath, [...loader, script, scratch], {
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  child.stderr.on("data", (chunk) => (stderr += chunk));
  const code = await new Promise<number | null>((resolve, reject) => {
    child.on("error", reject);
    child.on("exit", resolve);
  });
  if (code !== 0) {
    rmSync(scratch, { recursive: true, force: true });
    const reason = stderr.trim().split("\n").filter(Boolean).pop() ?? `exit code ${code}`;
    throw new Error(`initializing ${pgdata} failed: ${reason}`);
  }
  rmSync(pgdata, { recursive: true, force: true }); // an empty directory
  renameSync(scratch, pgdata);
  fsyncPath(dataDir);
}

/** Run by `pglite-initialize.ts` in the child: a new database in `pgdata`, on disk when this returns. */
export async function initializeDataDir(pgdata: string): Promise<void> {
  mkdirSync(pgdata, { recursive: true });
  const pg = await startPglite(
    pgdata,
    exitOnFatal(pgdata, () => {}),
  );
  await pg.close();
  // initdb wrote its files without fsync (PGlite copies them in from memory): flush them all once, as
  // PostgreSQL's initdb does. Some 1,000 files: in parallel on the thread pool it takes a tenth of the time.
  const pending = pathsBelow(pgdata);
  const flushNext = async (): Promise<void> => {
    for (let file = pending.pop(); file !== undefined; file = pending.pop()) {
      const handle = await open(file, "r");
      try {
        await handle.sync();
      } finally {
        await handle.close();
      }
    }
  };
  await Promise.all(Array.from({ length: 16 }, flushNext));
}

/** Every file and directory below `dir`, and `dir` itself. */
function pathsBelow(dir: string): string[] {
  const paths = [dir];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) paths.push(...pathsBelow(full));
    else if (entry.isFile()) paths.push(full);
  }
  return paths;
}

function fsyncPath(file: string): void {
  const fd = openSync(file, "r");
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}
