import { rmSync } from "node:fs";
import net from "node:net";
import path from "node:path";
import type { FastifyBaseLogger } from "fastify";
import { CommandError } from "./database.ts";

/**
 * `<dataDir>/admin.sock`: how `platform admin-token` reaches a server that holds the embedded database
 * (which admits one process). The socket has mode 0600, so only the owner of the data directory (and
 * root) can connect: the same people who could open the database itself once the server stops. Access to
 * the files stays the authorization; the socket adds no other way in.
 *
 * One operation, one exchange per connection: the client sends one line of JSON (at most
 * `MAX_REQUEST_BYTES`) `{"op":"admin-token","instanceId"?:string,"username"?:string}`, the server answers
 * one line `{"ok":true,"issued":{…}}` or `{"ok":false,"error":"…"}` and closes. A connection that sends
 * more, or nothing within `REQUEST_TIMEOUT_MS`, is closed.
 */
export const ADMIN_SOCKET = "admin.sock";
export const MAX_REQUEST_BYTES = 4096;
const REQUEST_TIMEOUT_MS = 10_000;
/** The client's wait for the answer: issuing is one transaction, but the server may be busy. */
const ANSWER_TIMEOUT_MS = 60_000;
const MAX_ANSWER_BYTES = 64 * 1024;
/** Names and IDs are short; anything longer is not a request of the command. */
const MAX_FIELD_LENGTH = 200;

export function adminSocketPath(dataDir: string): string {
  return path.join(dataDir, ADMIN_SOCKET);
}

export interface AdminTokenRequest {
  instanceId?: string;
  username?: string;
}

/** What the server answers: the issued token and what changed (`Issued` of src/cli/admin-token.ts). */
export interface AdminTokenAnswer {
  instanceId: string;
  userId: string;
  username: string;
  patId: string;
  token: string;
  changes: string[];
}

export interface AdminSocket {
  readonly path: string;
  close(): Promise<void>;
}

/**
 * Listens on `<dataDir>/admin.sock`. Call it only while holding the data directory's lock: whatever is at
 * that path then is left by a process that died (a stale socket) and is replaced. The socket is bound
 * under umask 0177, so it is created with mode 0600 and never wider, not even for a moment.
 */
export async function listenAdminSocket(
  dataDir: string,
  issue: (request: AdminTokenRequest) => Promise<AdminTokenAnswer>,
  log: FastifyBaseLogger,
): Promise<AdminSocket> {
  const socketPath = adminSocketPath(dataDir);
  rmSync(socketPath, { force: true });
  /** Connections that have not sent their request yet: dropped at close (those issuing are waited for). */
  const waiting = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    waiting.add(socket);
    socket.once("close", () => waiting.delete(socket));
    serve(socket, () => waiting.delete(socket), issue, log);
  });
  server.maxConnections = 8;
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    // The bind happens synchronously inside listen(); the umask applies to it alone.
    const umask = process.umask(0o177);
    try {
      server.listen({ path: socketPath, readableAll: false, writableAll: false }, () => {
        server.off("error", reject);
        resolve();
      });
    } finally {
      process.umask(umask);
    }
  });
  server.on("error", (error) => log.error({ err: error }, "admin socket failed"));
  let closing: Promise<void> | undefined;
  return {
    path: socketPath,
    close() {
      closing ??= new Promise<void>((resolve) => {
        for (const socket of waiting) socket.destroy();
        server.close(() => {
          rmSync(socketPath, { force: true });
          resolve();
        });
      });
      return closing;
    },
  };
}

function serve(
  socket: net.Socket,
  onRequest: () => void,
  issue: (request: AdminTokenRequest) => Promise<AdminTokenAnswer>,
  log: FastifyBaseLogger,
): void {
  let received = "";
  let answered = false;
  const answer = (body: object) => {
    if (answered) return;
    answered = true;
    socket.setTimeout(0);
    socket.end(`${JSON.stringify(body)}\n`);
  };
  socket.setEncoding("utf8");
  socket.setTimeout(REQUEST_TIMEOUT_MS, () => socket.destroy());
  socket.on("error", () => socket.destroy());
  socket.on("data", (chunk: string) => {
    if (answered) return;
    received += chunk;
    const end = received.indexOf("\n");
    if (end < 0 && Buffer.byteLength(received) <= MAX_REQUEST_BYTES) return;
    if (end < 0 || Buffer.byteLength(received.slice(0, end)) > MAX_REQUEST_BYTES) {
      answer({ ok: false, error: `request longer than ${MAX_REQUEST_BYTES} bytes` });
      return;
    }
    socket.pause();
    socket.setTimeout(0); // the request is in: issuing may take a while, and is not cut short
    onRequest();
    const request = parseRequest(received.slice(0, end));
    if (typeof request === "string") {
      answer({ ok: false, error: request });
      return;
    }
    issue(request).then(
      (issued) => {
        log.info({ patId: issued.patId, userId: issued.userId }, "admin token issued over the admin socket");
        answer({ ok: true, issued });
      },
      (error: Error) => {
        if (!(error instanceof CommandError))
          log.error({ err: error }, "admin token over the admin socket failed");
        answer({ ok: false, error: error.message.split("\n")[0] });
      },
    );
  });
}

/** The request, or what is wrong with it. */
function parseRequest(line: string): AdminTokenRequest | string {
  let parsed: unknown;
  try {
    parsed = JSON.parse(line);
  } catch {
    return "the request is not JSON";
  }
  if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) return "the request is not an object";
  const { op, instanceId, username, ...rest } = parsed as Record<string, unknown>;
  if (op !== "admin-token") return `unknown operation ${JSON.stringify(op)} (expected: admin-token)`;
  if (Object.keys(rest).length) return `unknown fields ${Object.keys(rest).join(", ")}`;
  for (const [name, value] of [
    ["instanceId", instanceId],
    ["username", username],
  ] as const)
    if (value !== undefined && (typeof value !== "string" || value.length > MAX_FIELD_LENGTH))
      return `${name} must be a string of at most ${MAX_FIELD_LENGTH} characters`;
  return { instanceId: instanceId as string | undefined, username: username as string | undefined };
}

/**
 * Asks the server listening on `socketPath` for an administrator token (the client side of
 * `listenAdminSocket`). Failures are `CommandError`s: one line for the operator.
 */
export function requestAdminToken(socketPath: string, request: AdminTokenRequest): Promise<AdminTokenAnswer> {
  return new Promise((resolve, reject) => {
    const socket = net.createConnection({ path: socketPath });
    let received = "";
    let settled = false;
    const settle = (error: Error | undefined, answer?: AdminTokenAnswer) => {
      if (settled) return;
      settled = true;
      socket.destroy();
      if (error) reject(error);
      else resolve(answer!);
    };
    socket.setEncoding("utf8");
    socket.setTimeout(ANSWER_TIMEOUT_MS, () =>
      settle(
        new CommandError(`the server did not answer over ${socketPath} within ${ANSWER_TIMEOUT_MS / 1000} s`),
      ),
    );
    socket.on("connect", () => {
      socket.write(`${JSON.stringify({ op: "admin-token", ...request })}\n`);
    });
    socket.on("error", (error: NodeJS.ErrnoException) => {
      const why =
        error.code === "EACCES" || error.code === "EPERM"
          ? "permission denied (only the owner of the data directory may use it)"
          : error.code === "ECONNREFUSED"
            ? "nothing listens on it"
            : error.message;
      settle(new CommandError(`cannot reach the running server over ${socketPath}: ${why}`));
    });
    socket.on("data", (chunk: string) => {
      received += chunk;
      if (received.length > MAX_ANSWER_BYTES)
        settle(new CommandError(`the answer over ${socketPath} is too long`));
    });
    socket.on("close", () => settle(new CommandError(`the server closed ${socketPath} without an answer`)));
    socket.on("end", () => {
      let answer: { ok?: boolean; issued?: AdminTokenAnswer; error?: string };
      try {
        answer = JSON.parse(received);
      } catch {
        settle(new CommandError(`the server closed ${socketPath} without an answer`));
        return;
      }
      if (answer.ok && answer.issued) settle(undefined, answer.issued);
      else settle(new CommandError(answer.error ?? `the server refused the request over ${socketPath}`));
    });
  });
}
