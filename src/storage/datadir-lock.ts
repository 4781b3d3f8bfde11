import { randomBytes } from "node:crypto";
import { linkSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";

/**
 * `<dataDir>/platform.lock`: keeps a second Platform process off an embedded data directory.
 *
 * Node has no portable file lock (flock needs a native add-on), so the file names its owner:
 * `{pid, startTime, hostname, cmd}`, startTime being field 22 of /proc/<pid>/stat (clock ticks after
 * boot). A pid alone is not enough: after a container restart the new process often gets the pid the
 * lock names (PID 1 in both), and any pid is eventually reused by an unrelated program. The lock is held
 * only while a process with that pid exists, is not this process, and started at the recorded time;
 * otherwise it is stale and taken over. Without /proc (not Linux) a live pid other than ours counts as
 * held, as before.
 */

export class DataDirLockedError extends Error {}

interface LockOwner {
  pid: number;
  /** Ticks after boot (/proc/<pid>/stat field 22); null where /proc is unavailable. */
  startTime: string | null;
  hostname: string;
  cmd: string;
}

export interface DataDirLock {
  /** Set when a stale lock was replaced: one line for the start-up output. */
  readonly tookOver?: string;
  release(): void;
}

const LOCK_FILE = "platform.lock";
/** A take-over in progress (created with O_EXCL); older than this, its creator died mid-way. */
const TAKEOVER_STALE_MS = 10_000;
const ATTEMPTS = 200;

/** Directories this process holds: a second open from the same process is refused, not taken over. */
const heldHere = new Set<string>();

export async function lockDataDir(dataDir: string): Promise<DataDirLock> {
  const dir = path.resolve(dataDir);
  if (heldHere.has(dir))
    throw new DataDirLockedError(`PLATFORM_DATA_DIR: ${dataDir} is already open in this process`);
  const lockPath = path.join(dir, LOCK_FILE);
  const guardPath = `${lockPath}.takeover`;
  const mine = ownerOf(process.pid);
  const content = JSON.stringify(mine);
  // The lock appears with its whole content at once: written to a private file, then hard-linked (or
  // renamed, when taking over) into place. Readers never see a half-written lock.
  const draft = `${lockPath}.${process.pid}.${randomBytes(4).toString("hex")}`;
  writeFileSync(draft, content, { mode: 0o600, flag: "wx" });
  try {
    for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
      if (createFrom(draft, lockPath)) return held(dir, lockPath, content);
      const current = readLock(lockPath);
      if (current === undefined) continue; // released meanwhile
      const verdict = judge(current.owner);
      if (verdict.held)
        throw new DataDirLockedError(
          `PLATFORM_DATA_DIR: ${dataDir} is in use by another Platform process (pid ${current.owner?.pid}); stop it or use another directory`,
        );
      // Stale. Replace it only while holding the take-over guard, and only if it is still the lock we
      // judged: of several processes starting together, exactly one takes over; the others then find a
      // live lock.
      if (!createExclusive(guardPath)) {
        if (ageMs(guardPath) > TAKEOVER_STALE_MS) rmSync(guardPath, { force: true });
        else await sleep(10);
        continue;
      }
      try {
        const again = readLock(lockPath);
        if (again === undefined || again.raw !== current.raw) continue;
        renameSync(draft, lockPath);
        return held(dir, lockPath, content, describeTakeOver(current.owner, verdict.reason));
      } finally {
        rmSync(guardPath, { force: true });
      }
    }
    throw new DataDirLockedError(`PLATFORM_DATA_DIR: cannot lock ${dataDir}`);
  } finally {
    rmSync(draft, { force: true });
  }
}

function held(dir: string, lockPath: string, content: string, tookOver?: string): DataDirLock {
  heldHere.add(dir);
  let released = false;
  return {
    tookOver,
    release() {
      if (released) return;
      released = true;
      heldHere.delete(dir);
      // Remove the file only while it is still ours.
      if (readLock(lockPath)?.raw === content) rmSync(lockPath, { force: true });
    },
  };
}

/** Creates `target` as a hard link to `source`; false if `target` exists. */
function createFrom(source: string, target: string): boolean {
  try {
    linkSync(source, target);
    return true;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "EEXIST") return false;
    if (code !== "EPERM" && code !== "ENOTSUP" && code !== "ENOSYS") throw error;
    // A file system without hard links: O_EXCL create, then write.
    if (!createExclusive(target)) return false;
    writeFileSync(target, readFileSync(source));
    return true;
  }
}

function createExclusive(file: string): boolean {
  try {
    writeFileSync(file, String(process.pid), { mode: 0o600, flag: "wx" });
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "EEXIST") return false;
    throw error;
  }
}

function ageMs(file: string): number {
  try {
    return Date.now() - statSync(file).mtimeMs;
  } catch {
    return 0;
  }
}

/** The lock's text and its owner (undefined owner: unreadable content); undefined when there is no lock. */
function readLock(lockPath: string): { raw: string; owner?: Partial<LockOwner> } | undefined {
  let raw: string;
  try {
    raw = readFileSync(lockPath, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
  try {
    const parsed: unknown = JSON.parse(raw);
    // Platform before this format wrote the bare pid.
    if (typeof parsed === "number") return { raw, owner: { pid: parsed } };
    if (parsed && typeof parsed === "object") return { raw, owner: parsed as Partial<LockOwner> };
  } catch {}
  return { raw };
}

function judge(owner: Partial<LockOwner> | undefined): { held: boolean; reason: string } {
  const pid = owner?.pid;
  if (!Number.isInteger(pid) || (pid as number) <= 0) return { held: false, reason: "unreadable lock file" };
  if (pid === process.pid) return { held: false, reason: "its pid is now this process" };
  if (!pidExists(pid as number)) return { held: false, reason: "that process has exited" };
  const now = processStat(pid as number);
  if (now === undefined) return { held: true, reason: "" }; // no /proc: a live pid is all we can see
  if (now.state === "Z" || now.state === "X") return { held: false, reason: "that process has exited" };
  if (typeof owner?.startTime === "string")
    return now.startTime === owner.startTime
      ? { held: true, reason: "" }
      : { held: false, reason: "its pid now belongs to another process" };
  // A lock without start time (older Platform): trust the pid only if it still runs node.
  const cmd = commandLine(pid as number);
  return cmd === undefined || /\bnode\b|platform/i.test(cmd)
    ? { held: true, reason: "" }
    : { held: false, reason: "its pid now belongs to another program" };
}

function describeTakeOver(owner: Partial<LockOwner> | undefined, reason: string): string {
  const where = owner?.hostname && owner.hostname !== os.hostname() ? ` on host ${owner.hostname}` : "";
  const pid = owner?.pid === undefined ? "" : ` of pid ${owner.pid}${where}`;
  return `took over a stale lock${pid} (${reason})`;
}

function ownerOf(pid: number): LockOwner {
  return {
    pid,
    startTime: processStat(pid)?.startTime ?? null,
    hostname: os.hostname(),
    cmd: (commandLine(pid) ?? process.argv.join(" ")).slice(0, 200),
  };
}

function pidExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** State (field 3) and start time (field 22) from /proc/<pid>/stat; undefined without /proc. */
function processStat(pid: number): { state: string; startTime: string } | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return undefined;
  }
  // Field 2 is the command name in parentheses and may itself contain spaces and parentheses.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return { state: fields[0], startTime: fields[19] };
}

function commandLine(pid: number): string | undefined {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ").trim();
  } catch {
    return undefined;
  }
}
