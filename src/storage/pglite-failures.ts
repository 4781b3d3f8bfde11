/**
 * The embedded database on a full disk (docs/operations.md "Full disk").
 *
 * PostgreSQL survives most writes that fail for want of space: a table or index that cannot grow fails its
 * statement with SQLSTATE 53100 (disk_full; 507 to clients, availability.ts) and the next statement works
 * again once there is space. It cannot survive a new write-ahead log segment (16 MB, created whole) that
 * does not fit: that happens inside the commit, in a critical section, so it is a PANIC, after which a
 * PostgreSQL server restarts and recovers from its WAL. PGlite cannot restart in the running process: its
 * WebAssembly aborts, and its backend is left in the commit, spinning on the main thread ("CommitTransaction
 * while in COMMIT state"), so every request, /healthz included, hung, and freeing space did not help.
 *
 * Hence two defences:
 * - `DiskSpaceGuard` refuses changes while less than MIN_FREE_BYTES is free, before PostgreSQL sees them:
 *   enough for a new WAL segment plus the transaction's own pages, so the PANIC is not reached. Reads go on;
 *   changes work again as soon as space is freed, without a restart; `/ready` says why meanwhile.
 * - `exitOnFatal`: should PostgreSQL PANIC anyway (the disk filled between the check and the commit, or
 *   another failure), the process exits at once with one line saying why, instead of hanging. Started again
 *   (by its supervisor) with space on the disk, PostgreSQL recovers from its WAL: every acknowledged commit
 *   is there, and the one that failed was never acknowledged.
 */
import { statfsSync, writeSync } from "node:fs";
import { DatabaseFullError } from "../errors.ts";

/** A new 16 MB WAL segment and the transaction's own pages, twice over. */
export const MIN_FREE_BYTES = 32 * 1024 * 1024;

const MB = 1024 * 1024;

/** Refuses changes while the file system of `dir` has less than `minFreeBytes` free. */
export class DiskSpaceGuard {
  constructor(
    private readonly dir: string,
    private readonly minFreeBytes: number,
  ) {}

  /** Why changes are refused now (for `/ready` and the log), or undefined. */
  problem(): string | undefined {
    if (this.minFreeBytes <= 0) return undefined;
    let free: number;
    try {
      const stats = statfsSync(this.dir);
      free = stats.bavail * stats.bsize;
    } catch {
      return undefined; // cannot tell: let PostgreSQL find out
    }
    if (free >= this.minFreeBytes) return undefined;
    return `disk full: ${Math.floor(free / MB)} MB free for the embedded database, changes need ${Math.ceil(this.minFreeBytes / MB)} MB`;
  }

  /** Throws DatabaseFullError while changes are refused. */
  check(): void {
    const problem = this.problem();
    if (problem) throw new DatabaseFullError(problem);
  }
}

/**
 * The handler of a PostgreSQL PANIC or a WebAssembly abort in PGlite: releases the data directory (so a
 * restart needs no take-over), writes one line to stderr and exits with status 1. It runs inside PGlite's
 * synchronous call, which would otherwise never return.
 */
export function exitOnFatal(dataDir: string, release: () => void): (reason: string) => void {
  let exiting = false;
  return (reason) => {
    if (exiting) return;
    exiting = true;
    try {
      release();
    } catch {
      // the restart takes the lock over
    }
    const then = /no space left on device/i.test(reason)
      ? `free disk space in ${dataDir}, then start Platform again`
      : "start Platform again";
    writeSync(
      2,
      `platform: the embedded database failed (${reason}) and cannot recover in this process; exiting: ${then} (it recovers from its write-ahead log, nothing acknowledged is lost)\n`,
    );
    process.exit(1);
  };
}
