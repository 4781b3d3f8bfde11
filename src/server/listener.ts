import http from "node:http";
import http2 from "node:http2";
import net from "node:net";

type Handler = (
  req: http.IncomingMessage | http2.Http2ServerRequest,
  res: http.ServerResponse | http2.Http2ServerResponse,
) => void;

/** First bytes of every HTTP/2 connection with prior knowledge (RFC 9113 §3.4). */
const H2_PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");

/**
 * One TCP port for HTTP/1.1 and cleartext HTTP/2: peek at the first bytes of each connection and hand
 * it to the HTTP/1.1 or the HTTP/2 server. gRPC clients speak h2c with prior knowledge; browsers and
 * REST clients speak HTTP/1.1. Implements what Fastify's `serverFactory` needs for a graceful close.
 */
export class DualProtocolServer extends net.Server {
  readonly h1: http.Server;
  readonly h2: http2.Http2Server;
  private readonly sessions = new Set<http2.ServerHttp2Session>();
  private readonly sockets = new Set<net.Socket>();
  private readonly h2Sockets = new WeakSet<net.Socket>();
  /** HTTP/1.1 connections with a request in flight (the others are idle keep-alive connections). */
  private readonly busy = new Map<net.Socket, number>();
  closing = false;

  constructor(handler: Handler) {
    super();
    this.h1 = http.createServer({ keepAliveTimeout: 65_000 }, handler as http.RequestListener);
    this.h2 = http2.createServer(
      {},
      handler as (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => void,
    );
    // http.Server tracks idle connections only when it listens itself, so track them here.
    this.h1.on("request", (req: http.IncomingMessage, res: http.ServerResponse) => {
      const socket = req.socket;
      this.busy.set(socket, (this.busy.get(socket) ?? 0) + 1);
      res.once("close", () => {
        const left = (this.busy.get(socket) ?? 1) - 1;
        if (left > 0) this.busy.set(socket, left);
        else this.busy.delete(socket);
        if (this.closing && left <= 0) socket.end();
      });
    });
    this.h2.on("session", (session) => {
      this.sessions.add(session);
      session.once("close", () => this.sessions.delete(session));
    });
    this.on("connection", (socket) => this.route(socket));
  }

  private route(socket: net.Socket): void {
    this.sockets.add(socket);
    socket.once("close", () => this.sockets.delete(socket));
    socket.on("error", () => socket.destroy());
    let buffered = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      const n = Math.min(buffered.length, H2_PREFACE.length);
      const isH2 = buffered.subarray(0, n).equals(H2_PREFACE.subarray(0, n));
      if (isH2 && buffered.length < H2_PREFACE.length) return; // need more bytes to decide
      socket.off("data", onData);
      socket.pause();
      socket.unshift(buffered);
      if (isH2) {
        this.h2Sockets.add(socket);
        // The HTTP/2 session reads what is buffered with socket.read() on the next tick; resuming here
        // would emit those bytes to nobody.
        this.h2.emit("connection", socket);
      } else {
        this.h1.emit("connection", socket);
        socket.resume();
      }
    };
    socket.on("data", onData);
  }

  /** Fastify calls this on close: end idle keep-alive connections and ask HTTP/2 clients to go away. */
  closeIdleConnections(): void {
    for (const socket of this.sockets) {
      if (this.isHttp1(socket) && !this.busy.has(socket)) socket.end();
    }
    this.closeHttp2Sessions();
  }

  private isHttp1(socket: net.Socket): boolean {
    return !this.h2Sockets.has(socket);
  }

  closeHttp2Sessions(): void {
    for (const session of this.sessions) session.close();
  }

  /**
   * Stops accepting; in-flight requests finish (their connections close afterwards), then `callback`.
   * Connections still open after `graceMs` are destroyed.
   */
  override close(callback?: (err?: Error) => void): this {
    this.closing = true;
    super.close(callback);
    this.closeIdleConnections();
    const deadline = setTimeout(() => {
      for (const socket of this.sockets) socket.destroy();
    }, 10_000);
    deadline.unref();
    this.once("close", () => clearTimeout(deadline));
    return this;
  }
}
