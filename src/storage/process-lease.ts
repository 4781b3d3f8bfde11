/**
 * Process leases on PostgreSQL (`Database.holdProcessLease`, `isProcessAlive`): how a Platform process tells
 * whether another one is still running, e.g. whether an Idempotency-Key that another process claimed and
 * has not answered belongs to a call still running there, or to a process that died between its commit and
 * storing the answer (src/api/idempotency.ts).
 *
 * Each process holds a session-level advisory lock, keyed by a hash of its process ID, on a connection of
 * its own. The server releases it when that connection ends: at once when the process exits or is killed
 * (the kernel closes its socket), after the TCP keepalive timeout when its host vanished. Another process
 * asks with `pg_try_advisory_xact_lock`, which takes and drops the lock within one statement: asking never
 * waits and leaves nothing behind. A lease whose connection was ended (database restart, failover,
 * `pg_terminate_backend`) is taken again on a new connection, retried every second; until then the process
 * reads as not running. Like LISTEN, this needs a session of its own: through a pooler, session pooling.
 */
import { createHash } from "node:crypto";
import type pg from "pg";
import type { ProcessLease } from "./database.ts";

const RETRY_MS = 1_000;

/**
 * The advisory lock key of a process (a signed 64-bit integer, as text): the first 8 bytes of a SHA-256
 * under a prefix of its own, so it does not meet the keys of the other advisory locks (hashtext values,
 * the migration lock's constant) but by a 2^-64 chance.
 */
export function processLeaseKey(processId: string): string {
  return createHash("sha256")
    .update(`platform process lease\u0000${processId}`)
    .digest()
    .readBigInt64BE(0)
    .toString();
}

/** The statement that answers whether the lease of `$1` (a processLeaseKey) is held by some session. */
export const LEASE_HELD_SQL = "SELECT NOT pg_try_advisory_xact_lock($1::bigint) AS held";

/**
 * Takes the lease of `processId` on a connection made by `connect` and keeps it, reconnecting whenever the
 * connection is lost, until released. Resolves once the lease is held; rejects when the first connection
 * fails (the database was reachable a moment ago, at start-up).
 */
export async function holdLease(connect: () => pg.Client, processId: string): Promise<ProcessLease> {
  const key = processLeaseKey(processId);
  let released = false;
  let client: pg.Client | undefined;
  let timer: NodeJS.Timeout | undefined;

  const open = async (): Promise<void> => {
    const c = connect();
    client = c;
    const lost = () => {
      if (released || client !== c) return;
      client = undefined;
      c.end().catch(() => {});
      timer = setTimeout(reopen, RETRY_MS).unref();
    };
    // Listening from the start: an 'error' without a listener would end the process.
    c.on("error", lost);
    c.on("end", lost);
    try {
      await c.connect();
      await c.query("SELECT pg_advisory_lock($1::bigint)", [key]);
    } catch (error) {
      lost();
      throw error;
    }
  };
  const reopen = () => {
    timer = undefined;
    if (!released) open().catch(() => {}); // `lost` already scheduled the next attempt
  };

  try {
    await open();
  } catch (error) {
    released = true;
    if (timer) clearTimeout(timer);
    throw error;
  }
  return {
    async release() {
      released = true;
      if (timer) clearTimeout(timer);
      const c = client;
      client = undefined;
      await c?.end().catch(() => {});
    },
  };
}
