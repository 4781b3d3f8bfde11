import http from "node:http";
import http2 from "node:http2";
import net from "node:net";
import tls from "node:tls";

type Handler = (
  req: http.IncomingMessage | http2.Http2ServerRequest,
  res: http.ServerResponse | http2.Http2ServerResponse,
) => void;

/** Certificate chain and private key (PEM) when Platform terminates TLS itself. */
export interface TlsOptions {
  cert: string | Buffer;
  key: string | Buffer;
}

/** First bytes of every HTTP/2 connection with prior knowledge (RFC 9113 §3.4). */
const H2_PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");

/** How long open connections may finish their requests after close() before they are cut. */
const GRACE_MS = 10_000;

/**
 * The HTTP/1.1 and HTTP/2 servers behind one listener, and what a graceful close needs to know about
 * their connections. http.Server tracks idle connections only when it listens itself, so track them here.
 */
class Connections {
  readonly h1: http.Server;
  readonly h2: http2.Http2Server;
  closing = false;
  private readonly sessions = new Set<http2.ServerHttp2Session>();
  /** Accepted TCP connections (cut when the grace period ends). */
  private readonly accepted = new Set<net.Socket>();
  /** Connections handed to the HTTP/1.1 server, with their number of requests in flight. */
  private readonly http1 = new Map<net.Socket, number>();

  constructor(handler: Handler) {
    this.h1 = http.createServer({ keepAliveTimeout: 65_000 }, handler as http.RequestListener);
    this.h2 = http2.createServer(
      {},
      handler as (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => void,
    );
    this.h1.on("request", (req: http.IncomingMessage, res: http.ServerResponse) => {
      const socket = req.socket;
      this.http1.set(socket, (this.http1.get(socket) ?? 0) + 1);
      res.once("close", () => {
        const left = (this.http1.get(socket) ?? 1) - 1;
        this.http1.set(socket, Math.max(0, left));
        if (this.closing && left <= 0) socket.end();
      });
    });
    this.h2.on("session", (session) => {
      this.sessions.add(session);
      session.once("close", () => this.sessions.delete(session));
    });
  }

  accept(socket: net.Socket): void {
    this.accepted.add(socket);
    socket.once("close", () => this.accepted.delete(socket));
    socket.on("error", () => socket.destroy());
  }

  serve(socket: net.Socket, isH2: boolean): void {
    if (isH2) {
      // The HTTP/2 session reads what is buffered with socket.read() on the next tick; resuming here
      // would emit those bytes to nobody.
      this.h2.emit("connection", socket);
      return;
    }
    this.http1.set(socket, 0);
    socket.once("close", () => this.http1.delete(socket));
    this.h1.emit("connection", socket);
    socket.resume();
  }

  /** Ends idle HTTP/1.1 keep-alive connections and asks HTTP/2 clients to go away (GOAWAY). */
  closeIdle(): void {
    for (const [socket, inFlight] of this.http1) if (inFlight === 0) socket.end();
    this.closeHttp2Sessions();
  }

  closeHttp2Sessions(): void {
    for (const session of this.sessions) session.close();
  }

  /** Marks the close: requests in flight finish with `Connection: close`; connections left are cut later. */
  beginClose(server: net.Server): void {
    this.closing = true;
    this.closeIdle();
    const deadline = setTimeout(() => {
      for (const socket of this.accepted) socket.destroy();
    }, GRACE_MS);
    deadline.unref();
    server.once("close", () => clearTimeout(deadline));
  }
}

/**
 * One TCP port for HTTP/1.1 and cleartext HTTP/2: peek at the first bytes of each connection and hand
 * it to the HTTP/1.1 or the HTTP/2 server. gRPC clients speak h2c with prior knowledge; browsers and
 * REST clients speak HTTP/1.1. Implements what Fastify's `serverFactory` needs for a graceful close.
 */
export class DualProtocolServer extends net.Server {
  private readonly routing: Connections;

  constructor(handler: Handler) {
    super();
    this.routing = new Connections(handler);
    this.on("connection", (socket) => this.route(socket));
  }

  get closing(): boolean {
    return this.routing.closing;
  }

  private route(socket: net.Socket): void {
    this.routing.accept(socket);
    let buffered = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      const n = Math.min(buffered.length, H2_PREFACE.length);
      const isH2 = buffered.subarray(0, n).equals(H2_PREFACE.subarray(0, n));
      if (isH2 && buffered.length < H2_PREFACE.length) return; // need more bytes to decide
      socket.off("data", onData);
      socket.pause();
      socket.unshift(buffered);
      this.routing.serve(socket, isH2);
    };
    socket.on("data", onData);
  }

  /** Fastify calls this on close. */
  closeIdleConnections(): void {
    this.routing.closeIdle();
  }

  closeHttp2Sessions(): void {
    this.routing.closeHttp2Sessions();
  }

  /** Stops accepting; in-flight requests finish, then `callback`; connections left after 10 s are cut. */
  override close(callback?: (err?: Error) => void): this {
    super.close(callback);
    this.routing.beginClose(this);
    return this;
  }
}

/** The same over TLS: the client's ALPN choice (`h2`, else HTTP/1.1) picks the server. */
export class SecureDualProtocolServer extends tls.Server {
  private readonly routing: Connections;

  constructor(handler: Handler, options: TlsOptions) {
    super({ cert: options.cert, key: options.key, ALPNProtocols: ["h2", "http/1.1"] });
    this.routing = new Connections(handler);
    this.on("connection", (socket: net.Socket) => this.routing.accept(socket));
    this.on("secureConnection", (socket: tls.TLSSocket) =>
      this.routing.serve(socket, socket.alpnProtocol === "h2"),
    );
    this.on("tlsClientError", (_error, socket) => socket.destroy());
  }

  get closing(): boolean {
    return this.routing.closing;
  }

  closeIdleConnections(): void {
    this.routing.closeIdle();
  }

  closeHttp2Sessions(): void {
    this.routing.closeHttp2Sessions();
  }

  override close(callback?: (err?: Error) => void): this {
    super.close(callback);
    this.routing.beginClose(this);
    return this;
  }
}

/** The listener for Fastify's `serverFactory`: cleartext, or TLS when a certificate is configured. */
export function createListener(
  handler: Handler,
  tlsOptions?: TlsOptions,
): DualProtocolServer | SecureDualProtocolServer {
  return tlsOptions ? new SecureDualProtocolServer(handler, tlsOptions) : new DualProtocolServer(handler);
}
