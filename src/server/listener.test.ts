import assert from "node:assert/strict";
import type http from "node:http";
import http2 from "node:http2";
import net from "node:net";
import { describe, it } from "node:test";
import { testTime, watchSocket, within } from "../../test/helpers.ts";
import { type ConnectionLimits, DualProtocolServer } from "./listener.ts";

/** Small bounds keep the tests fast; assertions allow for a busy machine above them, never below. */
const LIMITS: ConnectionLimits = {
  headersTimeoutMs: 300,
  requestTimeoutMs: 600,
  idleTimeoutMs: 400,
  maxConnections: 100,
};
/** How much later than its bound a connection may be closed: 1 s, scaled for a loaded machine. */
const slackMs = () => testTime(1000);
/** Node keeps a keep-alive socket this much longer than the Keep-Alive timeout it advertises. */
const NODE_KEEP_ALIVE_BUFFER_MS = 1000;

type Request = http.IncomingMessage | http2.Http2ServerRequest;
type Response = http.ServerResponse | http2.Http2ServerResponse;

/** More than socket buffers hold, so a client that does not read stalls the answer. */
const BIG = Buffer.alloc(32 * 1024 * 1024, "a");
/** When (performance.now()) the server closed connections that asked for `/big`. */
const bigAnswerClosed: number[] = [];

/**
 * Reads the whole body like Fastify does, then answers; `/slow` first works for 2.5 idle timeouts, `/big`
 * answers 32 MiB.
 */
function handler(req: Request, res: Response): void {
  let size = 0;
  req.on("data", (chunk: Buffer) => (size += chunk.length));
  req.on("end", () => {
    const answer = () => (res as http.ServerResponse).end(`ok ${size}`);
    if (req.url === "/slow") setTimeout(answer, LIMITS.idleTimeoutMs * 2.5);
    else if (req.url === "/big") {
      req.socket.once("close", () => bigAnswerClosed.push(performance.now()));
      (res as http.ServerResponse).end(BIG);
    } else answer();
  });
}

/** When the server closed the next connection that asked for `/big`; fails if it keeps it longer than `ms`. */
async function bigAnswerClosedWithin(ms: number): Promise<number> {
  const seen = bigAnswerClosed.length;
  await within(
    (async () => {
      while (bigAnswerClosed.length === seen) await new Promise((resolve) => setTimeout(resolve, 20));
    })(),
    ms,
    "still sending",
  );
  return bigAnswerClosed[seen];
}

async function start(limits: Partial<ConnectionLimits> = {}) {
  const warnings: string[] = [];
  const server = new DualProtocolServer(handler, {
    limits: { ...LIMITS, ...limits },
    warn: (message) => warnings.push(message),
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as net.AddressInfo).port;
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    warnings,
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}

/** A raw TCP connection to the server. */
function connect(port: number) {
  return watchSocket(net.connect(port, "127.0.0.1"));
}

/** One plain HTTP/1.1 request on a new connection. */
async function get(url: string, path = "/"): Promise<{ status: number; body: string }> {
  const response = await fetch(`${url}${path}`);
  return { status: response.status, body: await response.text() };
}

function h2Request(
  session: http2.ClientHttp2Session,
  headers: http2.OutgoingHttpHeaders,
  body?: string,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const stream = session.request(headers, { endStream: body === undefined });
    if (body !== undefined) stream.end(body);
    let status = 0;
    let text = "";
    stream.on("response", (h) => (status = Number(h[":status"])));
    stream.setEncoding("utf8");
    stream.on("data", (d: string) => (text += d));
    stream.on("end", () => resolve({ status, body: text }));
    stream.on("error", reject);
  });
}

describe("connection bounds (HTTP/1.1)", () => {
  it("closes a connection that sends nothing within the headers timeout", async () => {
    const server = await start();
    try {
      const silent = connect(server.port);
      const ms = await silent.closedWithin(LIMITS.headersTimeoutMs + slackMs());
      assert.ok(ms >= LIMITS.headersTimeoutMs - 20, `closed after ${ms} ms, before the bound`);
    } finally {
      await server.close();
    }
  });

  it("answers 408 and closes a connection dripping its headers (slowloris) while serving others", async () => {
    const server = await start();
    try {
      const slow = connect(server.port);
      slow.socket.write("GET / HTTP/1.1\r\nHost: localhost\r\n");
      const drip = setInterval(() => slow.socket.write("x"), 100);
      const others = [await get(server.url), await get(server.url)];
      const ms = await slow
        .closedWithin(LIMITS.headersTimeoutMs + slackMs())
        .finally(() => clearInterval(drip));
      assert.ok(ms >= LIMITS.headersTimeoutMs - 20, `closed after ${ms} ms, before the bound`);
      assert.match(slow.received(), /^HTTP\/1\.1 408 Request Timeout/);
      assert.deepEqual(others, [
        { status: 200, body: "ok 0" },
        { status: 200, body: "ok 0" },
      ]);
    } finally {
      await server.close();
    }
  });

  it("answers 408 and closes a connection whose body never comes, within the request timeout", async () => {
    const server = await start();
    try {
      const stalled = connect(server.port);
      stalled.socket.write("POST / HTTP/1.1\r\nHost: localhost\r\nContent-Length: 10\r\n\r\nab");
      const ms = await stalled.closedWithin(LIMITS.requestTimeoutMs + slackMs());
      assert.ok(ms >= LIMITS.requestTimeoutMs - 20, `closed after ${ms} ms, before the bound`);
      assert.match(stalled.received(), /^HTTP\/1\.1 408 Request Timeout/);
    } finally {
      await server.close();
    }
  });

  it("closes an idle keep-alive connection after the idle timeout", async () => {
    const server = await start();
    try {
      const client = connect(server.port);
      client.socket.write("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n");
      const ms = await client.closedWithin(LIMITS.idleTimeoutMs + NODE_KEEP_ALIVE_BUFFER_MS + slackMs());
      assert.match(client.received(), /^HTTP\/1\.1 200 OK[\s\S]*Keep-Alive: timeout=[\s\S]*ok 0$/);
      assert.ok(ms >= LIMITS.idleTimeoutMs, `closed after ${ms} ms, before the bound`);
    } finally {
      await server.close();
    }
  });

  it("closes a connection whose client does not take the answer, after the idle timeout", async () => {
    const server = await start();
    try {
      const reader = connect(server.port);
      reader.socket.write("GET /big HTTP/1.1\r\nHost: localhost\r\n\r\n");
      const stalledAt = await new Promise<number>((resolve) =>
        reader.socket.once("data", () => {
          reader.socket.pause();
          resolve(performance.now());
        }),
      );
      const ms = (await bigAnswerClosedWithin(LIMITS.idleTimeoutMs + slackMs())) - stalledAt;
      assert.ok(ms >= LIMITS.idleTimeoutMs - 20, `given up ${ms} ms after the client stopped reading`);
      reader.socket.resume();
      await reader.closedWithin(slackMs());
      assert.ok(reader.received().length < BIG.length, "the answer was cut");
    } finally {
      await server.close();
    }
  });

  it("does not cut a request whose handler works longer than every bound", async () => {
    const server = await start();
    try {
      const slowHandler = await get(server.url, "/slow");
      assert.deepEqual(slowHandler, { status: 200, body: "ok 0" });
    } finally {
      await server.close();
    }
  });
});

describe("connection bounds (HTTP/2 cleartext)", () => {
  it("closes a connection that stops within the preface", async () => {
    const server = await start();
    try {
      const partial = connect(server.port);
      partial.socket.write("PRI * HTTP/2.0\r\n");
      await partial.closedWithin(LIMITS.headersTimeoutMs + slackMs());
    } finally {
      await server.close();
    }
  });

  it("sends GOAWAY to a session without requests for the idle timeout, counting from its last stream", async () => {
    const server = await start();
    try {
      const session = http2.connect(server.url);
      session.on("error", () => {});
      const goaway = new Promise<number>((resolve) => session.once("goaway", (code) => resolve(code)));
      const closed = new Promise<void>((resolve) => session.once("close", resolve));
      const startedAt = performance.now();
      assert.deepEqual(await h2Request(session, { ":path": "/slow" }), { status: 200, body: "ok 0" });
      const lastStreamAt = performance.now();
      const giveUp = LIMITS.idleTimeoutMs + slackMs();
      assert.equal(await within(goaway, giveUp, "no GOAWAY"), http2.constants.NGHTTP2_NO_ERROR);
      await within(closed, giveUp, "still open");
      const idle = performance.now() - lastStreamAt;
      assert.ok(idle >= LIMITS.idleTimeoutMs - 20, `GOAWAY ${idle} ms after the last stream`);
      assert.ok(idle <= LIMITS.idleTimeoutMs + slackMs(), `GOAWAY only ${idle} ms after the last stream`);
      assert.ok(lastStreamAt - startedAt > LIMITS.idleTimeoutMs, "the slow stream outlived the idle timeout");
    } finally {
      await server.close();
    }
  });

  it("resets a stream whose request body never completes; the session serves other streams", async () => {
    const server = await start({ idleTimeoutMs: 5000 });
    const session = http2.connect(server.url);
    try {
      const stream = session.request({ ":method": "POST", ":path": "/", "content-type": "application/json" });
      stream.on("error", () => {});
      const openedAt = performance.now();
      stream.write("{");
      const drip = setInterval(() => stream.write(" "), 100); // moving, so only the request bound applies
      const rstCode = await within(
        new Promise<number>((resolve) => stream.once("close", () => resolve(stream.rstCode!))),
        LIMITS.requestTimeoutMs + slackMs(),
        "stream still open",
      ).finally(() => clearInterval(drip));
      const ms = performance.now() - openedAt;
      assert.equal(rstCode, http2.constants.NGHTTP2_CANCEL);
      assert.ok(
        ms >= LIMITS.requestTimeoutMs - 20 && ms <= LIMITS.requestTimeoutMs + slackMs(),
        `reset after ${ms} ms`,
      );
      assert.deepEqual(await h2Request(session, { ":path": "/" }), { status: 200, body: "ok 0" });
    } finally {
      session.destroy();
      await server.close();
    }
  });

  it("keeps a gRPC stream that keeps sending past the request timeout, and resets one that goes quiet", async () => {
    const server = await start();
    const session = http2.connect(server.url);
    try {
      const grpc = { ":method": "POST", ":path": "/pkg.Service/Stream", "content-type": "application/grpc" };
      const active = session.request(grpc);
      let sent = 0;
      const sending = setInterval(() => {
        active.write("x");
        if (++sent * 100 > LIMITS.requestTimeoutMs * 2) {
          clearInterval(sending);
          active.end();
        }
      }, 100);
      let answer = "";
      active.setEncoding("utf8");
      active.on("data", (d: string) => (answer += d));
      await new Promise((resolve, reject) => active.on("end", resolve).on("error", reject));
      assert.equal(answer, `ok ${sent}`);

      const quiet = session.request(grpc);
      quiet.on("error", () => {});
      quiet.write("x");
      const openedAt = performance.now();
      const rstCode = await within(
        new Promise<number>((resolve) => quiet.once("close", () => resolve(quiet.rstCode!))),
        LIMITS.idleTimeoutMs + slackMs(),
        "stream still open",
      );
      const ms = performance.now() - openedAt;
      assert.equal(rstCode, http2.constants.NGHTTP2_CANCEL);
      assert.ok(
        ms >= LIMITS.idleTimeoutMs - 20 && ms <= LIMITS.idleTimeoutMs + slackMs(),
        `reset after ${ms} ms`,
      );
    } finally {
      session.destroy();
      await server.close();
    }
  });

  it("resets a stream whose client does not take the answer, after the idle timeout", async () => {
    const server = await start();
    const session = http2.connect(server.url);
    try {
      const stream = session.request({ ":path": "/big" });
      stream.on("error", () => {});
      const stalledAt = await new Promise<number>((resolve) =>
        stream.once("data", () => {
          stream.pause();
          resolve(performance.now());
        }),
      );
      const rstCode = await within(
        new Promise<number>((resolve) => stream.once("close", () => resolve(stream.rstCode!))),
        LIMITS.idleTimeoutMs + slackMs(),
        "stream still open",
      );
      const ms = performance.now() - stalledAt;
      assert.equal(rstCode, http2.constants.NGHTTP2_CANCEL);
      assert.ok(ms >= LIMITS.idleTimeoutMs - 20, `reset ${ms} ms after the client stopped reading`);
    } finally {
      session.destroy();
      await server.close();
    }
  });

  it("does not cut an HTTP/2 request whose handler works longer than every bound", async () => {
    const server = await start();
    const session = http2.connect(server.url);
    try {
      assert.deepEqual(await h2Request(session, { ":method": "POST", ":path": "/slow" }, "abc"), {
        status: 200,
        body: "ok 3",
      });
    } finally {
      session.destroy();
      await server.close();
    }
  });
});

describe("maximum number of connections", () => {
  it("refuses one connection too many clearly, keeps serving the open ones, and serves the next", async () => {
    const server = await start({ maxConnections: 2, idleTimeoutMs: 5000 });
    try {
      const first = connect(server.port);
      const second = connect(server.port);
      for (const client of [first, second]) client.socket.write("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n");
      await waitFor(() => first.received().endsWith("ok 0") && second.received().endsWith("ok 0"));

      const extra = connect(server.port);
      extra.socket.write("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n");
      await extra.closedWithin(slackMs());
      const [head, body] = extra.received().split("\r\n\r\n");
      assert.match(head, /^HTTP\/1\.1 503 Service Unavailable\r\n/);
      assert.match(head, /\r\nRetry-After: 1(\r\n|$)/);
      assert.match(head, /\r\nConnection: close(\r\n|$)/);
      assert.deepEqual(JSON.parse(body), { code: 14, message: "too many connections", details: [] });

      const extraH2 = http2.connect(server.url);
      const h2Refused = new Promise<void>((resolve) => extraH2.once("close", resolve));
      extraH2.on("error", () => {});
      await within(h2Refused, slackMs(), "HTTP/2 connection beyond the maximum still open");

      // The open connections still work, and a place freed serves the next client.
      first.socket.write("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n");
      await waitFor(() => first.received().split("ok 0").length === 3);
      second.socket.destroy();
      await waitFor(async () => (await get(server.url).catch(() => ({ status: 0 }))).status === 200);
      assert.equal(server.warnings.length, 1, "one warning per interval");
      assert.match(server.warnings[0], /^refused 1 connection\(s\): 2 open \(PLATFORM_MAX_CONNECTIONS\)$/);
      first.socket.destroy();
    } finally {
      await server.close();
    }
  });
});

async function waitFor(condition: () => boolean | Promise<boolean>, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + testTime(timeoutMs);
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
