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

/** How long a connection may take for what, and how many may be open (see docs/operations.md). */
export interface ConnectionLimits {
  /** From accept to the first bytes (and TLS handshake), and from a request's first byte to its headers' end. */
  headersTimeoutMs: number;
  /** From a request's first byte until its body is received. */
  requestTimeoutMs: number;
  /** Keep-alive idle between requests, HTTP/2 session without streams, nothing moving on a socket or stream. */
  idleTimeoutMs: number;
  /** Open connections; more are refused. */
  maxConnections: number;
}

export interface ListenerOptions {
  limits: ConnectionLimits;
  /** How long requests in flight may take to finish after close() before their connections are cut. */
  graceMs?: number;
  tls?: TlsOptions;
  /** Operator warnings (rate-limited), e.g. app.log.warn. */
  warn?: (message: string) => void;
}

/** First bytes of every HTTP/2 connection with prior knowledge (RFC 9113 §3.4). */
const H2_PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");

/** How long open connections may finish their requests after close() before they are cut (default). */
const GRACE_MS = 25_000;
/** While closing, how often HTTP/1.1 connections without a request in flight are looked at (then ended). */
const QUIET_CHECK_MS = 250;
/**
 * A closing listener keeps taking the connections waiting in the system's accept queue (Node takes one per
 * turn of the event loop) until a turn takes none, for at most this long.
 */
const ACCEPT_QUEUE_DRAIN_MS = 2_000;

/** What a graceful close did with the requests it found (`DualProtocolServer.drained`). */
export interface DrainCounts {
  /** Requests answered (or given up by their clients) after close() began. */
  finished: number;
  /** Requests still in flight when the grace period ended: their connections were cut. */
  cutOff: number;
}

/** Per HTTP/2 connection; what gRPC servers commonly allow. */
const MAX_CONCURRENT_STREAMS = 100;
/** Request header block per HTTP/2 stream (HTTP/1.1 allows 16 KiB of header bytes; HPACK counts 32 more per field). */
const MAX_HEADER_LIST_SIZE = 32 * 1024;
/** Megabytes nghttp2 may buffer per HTTP/2 connection (Node's default, made explicit). */
const MAX_SESSION_MEMORY_MB = 10;

/**
 * Cleartext connections beyond maxConnections still get a 503 (which needs their first bytes); at most this
 * many at a time, each for at most REFUSAL_LINGER_MS. Beyond that Node drops connections at accept.
 */
const REFUSAL_SLOTS = 64;
const REFUSAL_LINGER_MS = 1000;
const REFUSAL_BODY = JSON.stringify({ code: 14, message: "too many connections", details: [] });
const REFUSAL_RESPONSE = Buffer.from(
  "HTTP/1.1 503 Service Unavailable\r\n" +
    "Content-Type: application/json\r\n" +
    `Content-Length: ${Buffer.byteLength(REFUSAL_BODY)}\r\n` +
    "Retry-After: 1\r\n" +
    "Connection: close\r\n\r\n" +
    REFUSAL_BODY,
);
/** At most one warning about refused connections per this interval. */
const WARNING_INTERVAL_MS = 10_000;

/** Whether the bytes received so far could be the start of the HTTP/2 preface. */
function mayBeHttp2(bytes: Buffer): boolean {
  const n = Math.min(bytes.length, H2_PREFACE.length);
  return bytes.subarray(0, n).equals(H2_PREFACE.subarray(0, n));
}

/** gRPC and Connect streaming calls may keep their request open for long: only idleness bounds them. */
function isStreamingCall(headers: http2.IncomingHttpHeaders): boolean {
  const type = String(headers["content-type"] ?? "");
  return type.startsWith("application/grpc") || type.startsWith("application/connect+");
}

/**
 * The HTTP/1.1 and HTTP/2 servers behind one listener, the bounds on their connections, and what a graceful
 * close needs to know about them (idle keep-alive connections are ended here, where http.Server's
 * closeIdleConnections would destroy them).
 */
class Connections {
  readonly h1: http.Server;
  readonly h2: http2.Http2Server;
  closing = false;
  /** HTTP/2 sessions with their number of open streams and the timer closing them when they have none. */
  private readonly sessions = new Map<http2.ServerHttp2Session, { streams: number; idle?: NodeJS.Timeout }>();
  /** Accepted TCP connections (counted against maxConnections; cut when the grace period ends). */
  private readonly accepted = new Set<net.Socket>();
  /**
   * Connections handed to the HTTP/1.1 server: their requests in flight, and `quiet`, the bytes read from
   * the socket when its last request was answered (-1 while one may be under way): a connection is idle
   * only while nothing arrived since, since a request is seen only once its headers are parsed.
   */
  private readonly http1 = new Map<net.Socket, { inFlight: number; quiet: number }>();
  readonly drained: DrainCounts = { finished: 0, cutOff: 0 };
  private refusedSinceWarning = 0;
  private lastWarning = Number.NEGATIVE_INFINITY;
  /** Connections taken from the system so far (accepted or refused). */
  private taken = 0;

  constructor(
    handler: Handler,
    readonly limits: ConnectionLimits,
    private readonly warn: (message: string) => void = () => {},
    private readonly graceMs = GRACE_MS,
  ) {
    this.h1 = http.createServer(
      {
        keepAliveTimeout: limits.idleTimeoutMs,
        headersTimeout: limits.headersTimeoutMs,
        requestTimeout: limits.requestTimeoutMs,
        // How often Node looks for expired headers/requests, i.e. how late a bound may be enforced.
        connectionsCheckingInterval: Math.min(1000, Math.max(25, Math.floor(limits.headersTimeoutMs / 4))),
      },
      handler as http.RequestListener,
    );
    // Node enforces headersTimeout and requestTimeout (answering 408) only on connections its
    // connection list knows, and starts that list when the server emits "listening" — which this server,
    // fed sockets with emit("connection"), never does by itself.
    this.h1.emit("listening");
    // Inactivity on a socket (no byte in or out), including keep-alive idle; see onHttp1Timeout.
    this.h1.timeout = limits.idleTimeoutMs;
    this.h1.on("timeout", (socket: net.Socket) => this.onHttp1Timeout(socket));
    this.h1.on("request", (req: http.IncomingMessage, res: http.ServerResponse) => {
      const socket = req.socket;
      const state = this.http1.get(socket);
      if (!state) return;
      state.inFlight++;
      state.quiet = -1;
      res.once("close", () => {
        state.inFlight = Math.max(0, state.inFlight - 1);
        if (state.inFlight === 0) state.quiet = socket.bytesRead;
        if (this.closing) {
          this.drained.finished++;
          if (state.inFlight === 0) socket.end();
        }
      });
    });

    this.h2 = http2.createServer(
      {
        settings: { maxConcurrentStreams: MAX_CONCURRENT_STREAMS, maxHeaderListSize: MAX_HEADER_LIST_SIZE },
        maxSessionMemory: MAX_SESSION_MEMORY_MB,
      },
      handler as (req: http2.Http2ServerRequest, res: http2.Http2ServerResponse) => void,
    );
    this.h2.on("session", (session) => this.trackSession(session));
  }

  /** Counts the connection; false when it is one too many (the caller refuses it). */
  accept(socket: net.Socket): boolean {
    this.taken++;
    socket.on("error", () => socket.destroy());
    if (this.accepted.size >= this.limits.maxConnections) return false;
    this.accepted.add(socket);
    socket.once("close", () => this.accepted.delete(socket));
    return true;
  }

  serve(socket: net.Socket, isH2: boolean): void {
    if (isH2) {
      // The HTTP/2 session reads what is buffered with socket.read() on the next tick; resuming here
      // would emit those bytes to nobody.
      this.h2.emit("connection", socket);
      return;
    }
    this.http1.set(socket, { inFlight: 0, quiet: -1 }); // its first request is arriving
    socket.once("close", () => this.http1.delete(socket));
    this.h1.emit("connection", socket);
    socket.resume();
  }

  /**
   * An HTTP/1.1 socket on which nothing moved for idleTimeoutMs (or keep-alive idle ran out). Cut it,
   * unless a handler is still working on a request on it (nothing waiting to be sent): only reading
   * (bounded by Node's headers and request timeouts) and sending are bounded, not the handler.
   */
  private onHttp1Timeout(socket: net.Socket): void {
    if ((this.http1.get(socket)?.inFlight ?? 0) > 0 && socket.writableLength === 0) return;
    socket.destroy();
  }

  private trackSession(session: http2.ServerHttp2Session): void {
    const state: { streams: number; idle?: NodeJS.Timeout } = { streams: 0 };
    const closeWhenIdle = () => {
      // Without streams for idleTimeoutMs (PINGs do not count): GOAWAY, then close.
      state.idle = setTimeout(() => session.close(), this.limits.idleTimeoutMs);
      state.idle.unref();
    };
    this.sessions.set(session, state);
    closeWhenIdle();
    session.on("stream", (stream, headers) => {
      clearTimeout(state.idle);
      state.streams++;
      this.boundStream(stream, headers);
      stream.once("close", () => {
        if (this.closing) this.drained.finished++;
        if (--state.streams === 0 && !session.closed) closeWhenIdle();
      });
    });
    session.once("close", () => {
      clearTimeout(state.idle);
      this.sessions.delete(session);
    });
  }

  /**
   * A stream whose client half stays open is reset (CANCEL) when nothing moves on it for idleTimeoutMs
   * or, unless it is a gRPC/Connect call (which may stream for long), when its request is not received
   * within requestTimeoutMs. A stream whose handler is still working is left alone; one whose client
   * does not take the response for idleTimeoutMs is reset.
   */
  private boundStream(stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders): void {
    const cancel = () => {
      if (!stream.closed) stream.close(http2.constants.NGHTTP2_CANCEL);
    };
    const clientHalfOpen = () => !stream.closed && !stream.state.remoteClose;
    // setTimeout(ms, callback) would call back only once; a stream may be found busy, then idle later.
    stream.setTimeout(this.limits.idleTimeoutMs);
    stream.on("timeout", () => {
      if (clientHalfOpen() || stream.writableLength > 0) cancel();
    });
    if (!isStreamingCall(headers)) {
      const request = setTimeout(() => {
        if (clientHalfOpen()) cancel();
      }, this.limits.requestTimeoutMs);
      request.unref();
      stream.once("close", () => clearTimeout(request));
    }
  }

  /**
   * Calls `stop` (closing the listening socket) once the connections the system has already accepted are
   * taken: when two turns of the event loop in a row took none (Node takes at most one per turn, so a busy
   * process may leave many waiting, and closing the socket would reset them), at the latest after
   * ACCEPT_QUEUE_DRAIN_MS (or the grace period, if shorter).
   */
  stopListening(stop: () => void): void {
    const until = Date.now() + Math.min(ACCEPT_QUEUE_DRAIN_MS, this.graceMs);
    let seen = this.taken;
    let quietTurns = 0;
    const look = () => {
      if (this.taken === seen) quietTurns++;
      else [seen, quietTurns] = [this.taken, 0];
      if (quietTurns >= 2 || Date.now() >= until) stop();
      else setImmediate(look);
    };
    setImmediate(look);
  }

  /** A connection Node closed at accept (beyond its maxConnections). */
  noteDropped(): void {
    this.taken++;
    this.noteRefused();
  }

  /** Logs refused connections, at most once per WARNING_INTERVAL_MS. */
  noteRefused(): void {
    this.refusedSinceWarning++;
    const now = Date.now();
    if (now - this.lastWarning < WARNING_INTERVAL_MS) return;
    this.warn(
      `refused ${this.refusedSinceWarning} connection(s): ${this.limits.maxConnections} open ` +
        "(PLATFORM_MAX_CONNECTIONS)",
    );
    this.refusedSinceWarning = 0;
    this.lastWarning = now;
  }

  /**
   * Ends the HTTP/1.1 connections without a request in flight on which nothing arrived since their last
   * answer (or since the last look), and asks HTTP/2 clients to go away (GOAWAY).
   */
  closeIdle(): void {
    for (const [socket, state] of this.http1) {
      if (state.inFlight > 0) continue;
      if (state.quiet === socket.bytesRead) socket.end();
      else state.quiet = socket.bytesRead; // a request may be arriving: looked at again later
    }
    this.closeHttp2Sessions();
  }

  closeHttp2Sessions(): void {
    for (const session of this.sessions.keys()) session.close();
  }

  /**
   * Marks the close: every request of an accepted connection is still served, with `Connection: close`
   * (HTTP/1.1), and its connection ended once answered. Idle connections are ended after a turn of the
   * event loop, so that requests already received but not yet read (a busy process) are served too, and
   * looked at again every QUIET_CHECK_MS. Connections left when the grace period ends are cut.
   */
  beginClose(server: net.Server): void {
    if (this.closing) return;
    this.closing = true;
    this.closeHttp2Sessions();
    setImmediate(() => this.closeIdle());
    const looking = setInterval(() => this.closeIdle(), QUIET_CHECK_MS);
    looking.unref();
    const deadline = setTimeout(() => {
      clearInterval(looking);
      let cut = 0;
      for (const state of this.http1.values()) cut += state.inFlight;
      for (const state of this.sessions.values()) cut += state.streams;
      this.drained.cutOff += cut;
      for (const socket of this.accepted) socket.destroy();
    }, this.graceMs);
    deadline.unref();
    server.once("close", () => {
      clearInterval(looking);
      clearTimeout(deadline);
      this.h1.close(); // stops Node's connection checks
    });
  }
}

/**
 * One TCP port for HTTP/1.1 and cleartext HTTP/2: peek at the first bytes of each connection and hand
 * it to the HTTP/1.1 or the HTTP/2 server. gRPC clients speak h2c with prior knowledge; browsers and
 * REST clients speak HTTP/1.1. Implements what Fastify's `serverFactory` needs for a graceful close.
 */
export class DualProtocolServer extends net.Server {
  private readonly routing: Connections;
  private refusing = 0;

  constructor(handler: Handler, options: ListenerOptions) {
    super();
    this.routing = new Connections(handler, options.limits, options.warn, options.graceMs);
    // Beyond these Node closes connections at accept, before any byte is read.
    this.maxConnections = options.limits.maxConnections + REFUSAL_SLOTS;
    this.on("drop", () => this.routing.noteDropped());
    this.on("connection", (socket) => this.route(socket));
  }

  get closing(): boolean {
    return this.routing.closing;
  }

  /** What the close did with the requests in flight (counted from close() on). */
  get drained(): DrainCounts {
    return this.routing.drained;
  }

  private route(socket: net.Socket): void {
    if (!this.routing.accept(socket)) {
      this.refuse(socket);
      return;
    }
    let buffered = Buffer.alloc(0);
    // The first bytes must come within the headers timeout (a silent connection holds a descriptor).
    const sniffing = setTimeout(() => socket.destroy(), this.routing.limits.headersTimeoutMs);
    socket.once("close", () => clearTimeout(sniffing));
    const onData = (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      const isH2 = mayBeHttp2(buffered);
      if (isH2 && buffered.length < H2_PREFACE.length) return; // need more bytes to decide
      clearTimeout(sniffing);
      socket.off("data", onData);
      socket.pause();
      socket.unshift(buffered);
      this.routing.serve(socket, isH2);
    };
    socket.on("data", onData);
  }

  /**
   * One connection too many: an HTTP/1.1 client gets `503` with `Retry-After` and `Connection: close`
   * (its request is read and dropped so that closing does not reset the connection before the answer is
   * read); an HTTP/2 client is closed.
   */
  private refuse(socket: net.Socket): void {
    this.routing.noteRefused();
    if (this.refusing >= REFUSAL_SLOTS) {
      socket.destroy();
      return;
    }
    this.refusing++;
    const linger = setTimeout(() => socket.destroy(), REFUSAL_LINGER_MS);
    socket.once("close", () => {
      this.refusing--;
      clearTimeout(linger);
    });
    socket.once("data", (chunk: Buffer) => {
      if (mayBeHttp2(chunk)) socket.destroy();
      else socket.end(REFUSAL_RESPONSE);
    });
  }

  /** Fastify calls this on close, before `close`: the same as `close` does (idle is decided there). */
  closeIdleConnections(): void {
    this.routing.beginClose(this);
  }

  closeHttp2Sessions(): void {
    this.routing.closeHttp2Sessions();
  }

  /**
   * Stops accepting, once the connections the system already accepted are taken (they are served); the
   * requests in flight finish, then `callback`; connections left after the grace period are cut.
   */
  override close(callback?: (err?: Error) => void): this {
    this.routing.beginClose(this);
    this.routing.stopListening(() => super.close(callback));
    return this;
  }
}

/**
 * The same over TLS: the client's ALPN choice (`h2`, else HTTP/1.1) picks the server. The handshake must
 * finish within the headers timeout; connections beyond maxConnections are closed at accept (a TLS client
 * cannot be told why before a handshake).
 */
export class SecureDualProtocolServer extends tls.Server {
  private readonly routing: Connections;

  constructor(handler: Handler, options: ListenerOptions & { tls: TlsOptions }) {
    super({
      cert: options.tls.cert,
      key: options.tls.key,
      ALPNProtocols: ["h2", "http/1.1"],
      handshakeTimeout: options.limits.headersTimeoutMs,
    });
    this.routing = new Connections(handler, options.limits, options.warn, options.graceMs);
    this.maxConnections = options.limits.maxConnections;
    this.on("drop", () => this.routing.noteDropped());
    this.on("connection", (socket: net.Socket) => {
      if (!this.routing.accept(socket)) socket.destroy();
    });
    this.on("secureConnection", (socket: tls.TLSSocket) =>
      this.routing.serve(socket, socket.alpnProtocol === "h2"),
    );
    this.on("tlsClientError", (_error, socket) => socket.destroy());
  }

  get closing(): boolean {
    return this.routing.closing;
  }

  get drained(): DrainCounts {
    return this.routing.drained;
  }

  closeIdleConnections(): void {
    this.routing.beginClose(this);
  }

  closeHttp2Sessions(): void {
    this.routing.closeHttp2Sessions();
  }

  override close(callback?: (err?: Error) => void): this {
    this.routing.beginClose(this);
    this.routing.stopListening(() => super.close(callback));
    return this;
  }
}

/** The listener for Fastify's `serverFactory`: cleartext, or TLS when a certificate is configured. */
export function createListener(
  handler: Handler,
  options: ListenerOptions,
): DualProtocolServer | SecureDualProtocolServer {
  return options.tls
    ? new SecureDualProtocolServer(handler, { ...options, tls: options.tls })
    : new DualProtocolServer(handler, options);
}
