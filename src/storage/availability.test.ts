import assert from "node:assert/strict";
import net from "node:net";
import { after, describe, it } from "node:test";
import pg from "pg";
import { tempDir } from "../../test/helpers.ts";
import { Code, DatabaseFullError } from "../errors.ts";
import { DatabaseUnavailableError, isConnectionFailure, withAvailabilityErrors } from "./availability.ts";
import { PgliteDatabase } from "./pglite.ts";

/** The error `run` rejects with. */
async function rejection(run: () => Promise<unknown>): Promise<unknown> {
  try {
    await run();
  } catch (error) {
    return error;
  }
  assert.fail("expected a rejection");
}

/** A TCP server doing `onConnection` to every connection; closed after the tests. */
async function tcpServer(
  onConnection: (socket: net.Socket) => void,
): Promise<{ port: number; close(): void }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on("error", () => {});
    onConnection(socket);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    close() {
      for (const socket of sockets) socket.destroy();
      server.close();
    },
  };
}

/** A port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = await tcpServer(() => {});
  server.close();
  return server.port;
}

describe("database availability", () => {
  const servers: { close(): void }[] = [];
  after(() => {
    for (const server of servers) server.close();
  });

  it("recognises what pg throws when PostgreSQL cannot be reached", async () => {
    const port = await closedPort();
    // refused, on one address and on every address of a name (localhost: ::1 and 127.0.0.1)
    for (const host of ["127.0.0.1", "localhost"]) {
      const client = new pg.Client({ host, port, user: "u", database: "d" });
      const refused = await rejection(() => client.connect());
      assert.ok(isConnectionFailure(refused), `${host}: ${String(refused)}`);
    }

    // the server closes the connection (restart, failover, a cut network)
    const closing = await tcpServer((socket) => socket.destroy());
    servers.push(closing);
    const cut = await rejection(() =>
      new pg.Client({ host: "127.0.0.1", port: closing.port, user: "u", database: "d" }).connect(),
    );
    assert.ok(isConnectionFailure(cut), String(cut));

    // the server never answers: the client's and the pool's connection timeouts
    const silent = await tcpServer(() => {});
    servers.push(silent);
    const timedOut = await rejection(() =>
      new pg.Client({
        host: "127.0.0.1",
        port: silent.port,
        user: "u",
        database: "d",
        connectionTimeoutMillis: 50,
      }).connect(),
    );
    assert.ok(isConnectionFailure(timedOut), String(timedOut));
    const pool = new pg.Pool({
      host: "127.0.0.1",
      port: silent.port,
      user: "u",
      database: "d",
      max: 1,
      connectionTimeoutMillis: 50,
    });
    pool.on("error", () => {});
    const poolTimedOut = await rejection(() => pool.query("SELECT 1"));
    assert.ok(isConnectionFailure(poolTimedOut), String(poolTimedOut));
    await pool.end();
    const ended = await rejection(() => pool.query("SELECT 1"));
    assert.ok(isConnectionFailure(ended), String(ended));

    // SQLSTATEs of a server going away or not accepting connections
    for (const code of ["08006", "08001", "57P01", "57P02", "57P03", "53300"]) {
      assert.ok(isConnectionFailure(Object.assign(new Error("x"), { code })), code);
    }
    // 55000 is an outage only as the refusal of a connection to the database
    const refusing = new Error('database "platform" is not currently accepting connections');
    assert.ok(isConnectionFailure(Object.assign(refusing, { code: "55000" })));
  });

  it("leaves every other error alone, including other outbound calls that were refused", async () => {
    // 08P01 protocol_violation: the server refusing a malformed message (a bug), not an outage
    for (const code of ["23505", "40001", "42P01", "22021", "08P01", "55000"]) {
      assert.ok(!isConnectionFailure(Object.assign(new Error("x"), { code })), code);
    }
    assert.ok(!isConnectionFailure(new Error("boom")));
    assert.ok(!isConnectionFailure(undefined));
    const port = await closedPort();
    const fetchFailure = await rejection(() => fetch(`http://127.0.0.1:${port}/`));
    assert.ok(!isConnectionFailure(fetchFailure), String(fetchFailure));
  });

  it("withAvailabilityErrors: a closed database throws DatabaseUnavailableError, SQL errors stay as they are", async () => {
    const db = withAvailabilityErrors(await PgliteDatabase.open(tempDir("availability-")));
    assert.equal(db.kind, "pglite");
    const syntax = await rejection(() => db.query("SELEC 1"));
    assert.ok(!(syntax instanceof DatabaseUnavailableError));
    assert.equal((syntax as { code?: string }).code, "42601"); // the driver's error, unchanged
    assert.deepEqual(await db.query("SELECT 1 AS one"), [{ one: 1 }]);
    // a full disk (SQLSTATE 53100 disk_full): 507, the driver's message kept for the log
    const full = await rejection(() =>
      db.exec("DO $$ BEGIN RAISE EXCEPTION 'could not extend file' USING ERRCODE = 'disk_full'; END $$"),
    );
    assert.ok(full instanceof DatabaseFullError, String(full));
    assert.equal(full.code, Code.RESOURCE_EXHAUSTED);
    assert.equal(full.httpStatus, 507);
    assert.match(full.detail, /^disk full: could not extend file/);
    await db.close();
    for (const run of [
      () => db.query("SELECT 1"),
      () => db.exec("SELECT 1"),
      () => db.transaction((tx) => tx.query("SELECT 1")),
    ]) {
      const error = await rejection(run);
      assert.ok(error instanceof DatabaseUnavailableError, String(error));
      assert.equal(error.message, "database unavailable");
      assert.match(String((error.cause as Error).message), /PGlite is closed/);
    }
  });
});
