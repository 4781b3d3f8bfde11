/**
 * PostgreSQL only: a dedicated connection that LISTENs on the outbox channel, so that a process's worker
 * wakes as soon as another process commits deliveries (without it, within the worker's poll interval).
 * Reconnects after a lost connection; each (re)connection wakes the worker once, in case it missed one.
 */
import pg from "pg";
import type { ExecutionLog } from "./engine.ts";
import { DELIVERY_CHANNEL } from "./outbox.ts";

const RECONNECT_MS = 1_000;

export function listenForDeliveries(
  url: string,
  onNotify: () => void,
  log: ExecutionLog,
): { close(): Promise<void> } {
  let closed = false;
  let client: pg.Client | undefined;
  let timer: NodeJS.Timeout | undefined;
  let failures = 0;

  const connect = async () => {
    timer = undefined;
    if (closed) return;
    const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5_000 });
    client = c;
    const retry = () => {
      if (closed || client !== c) return;
      client = undefined;
      c.end().catch(() => {});
      timer = setTimeout(connect, RECONNECT_MS).unref();
    };
    c.on("error", retry);
    c.on("end", retry);
    c.on("notification", () => onNotify());
    try {
      await c.connect();
      await c.query(`LISTEN ${DELIVERY_CHANNEL}`);
      failures = 0;
      onNotify();
    } catch (error) {
      if (failures++ === 0 && !closed)
        log.warn({ err: error }, "event deliveries: cannot listen for notifications; retrying");
      retry();
    }
  };
  void connect();

  return {
    async close() {
      closed = true;
      if (timer) clearTimeout(timer);
      const c = client;
      client = undefined;
      await c?.end().catch(() => {});
    },
  };
}
