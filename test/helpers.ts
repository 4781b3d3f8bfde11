import assert from "node:assert/strict";
import { cpSync, existsSync, mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import type { DestinationStream } from "pino";
import { type Config, loadConfig } from "../src/config.ts";
import type { Resolve } from "../src/net/outbound.ts";
import { createPlatform, listen, type Platform } from "../src/platform.ts";

export { testTime, testTimeScale } from "./time.ts";

export const ADMIN_PASSWORD = "Password1!";

/**
 * PLATFORM_MASTERKEY of test servers on PostgreSQL (required there; embedded test servers generate
 * their own into the data directory).
 */
export const TEST_MASTER_KEY = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/** A directory for one test, removed by the returned cleanup. */
export function tempDir(prefix = "platform-"): string {
  const base = process.env.PLATFORM_TEST_TMP ?? os.tmpdir();
  return mkdtempSync(path.join(base, prefix));
}

/** The backend under test: a fresh PostgreSQL database when DATABASE_URL is set, else a fresh PGlite dir. */
export interface TestBackend {
  env: Record<string, string>;
  cleanup(): Promise<void>;
}

export async function freshBackend(): Promise<TestBackend> {
  const url = process.env.DATABASE_URL;
  if (url) {
    const name = `platform_t_${Date.now().toString(36)}_${Math.random().toString(36).slice(2, 8)}`;
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${name}`);
    await admin.end();
    const dbUrl = new URL(url);
    dbUrl.pathname = `/${name}`;
    return {
      env: { DATABASE_URL: dbUrl.toString() },
      cleanup: async () => {
        const client = new pg.Client({ connectionString: url });
        await client.connect();
        await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
        await client.end();
      },
    };
  }
  const dataDir = tempDir("pglite-");
  const template = process.env.PLATFORM_TEST_PGLITE_TEMPLATE;
  if (template && existsSync(template)) cpSync(template, dataDir, { recursive: true });
  return {
    env: { PLATFORM_DATA_DIR: dataDir },
    cleanup: async () => rmSync(dataDir, { recursive: true, force: true }),
  };
}

export interface TestPlatform extends Platform {
  /** http://localhost:<port> once listening (`listen: true`). */
  url: string;
  backend: TestBackend;
  /** Closes the server and drops its database. */
  stop(): Promise<void>;
}

/** A Platform in this process on a fresh database, bootstrapped with a known admin password. */
export async function startPlatform(
  options: {
    env?: Record<string, string>;
    listen?: boolean;
    backend?: TestBackend;
    /** Resolves the host names of outbound connections (src/net/outbound.ts) in place of the system's. */
    resolve?: Resolve;
    /** Where the server's log lines go (instead of stdout; set PLATFORM_LOG_LEVEL in `env` too). */
    logDestination?: DestinationStream;
    /** Certificates SMTP providers' TLS trusts besides the system's (a test server's self-signed one). */
    smtpCa?: string[];
  } = {},
): Promise<TestPlatform> {
  const backend = options.backend ?? (await freshBackend());
  const config: Config = loadConfig({
    PLATFORM_PORT: "0",
    PLATFORM_LOG_LEVEL: "silent",
    PLATFORM_FIRSTINSTANCE_ADMIN_PASSWORD: ADMIN_PASSWORD,
    ...(backend.env.DATABASE_URL ? { PLATFORM_MASTERKEY: TEST_MASTER_KEY } : {}),
    ...backend.env,
    ...options.env,
  });
  const platform = await createPlatform(config, {
    resolve: options.resolve,
    logDestination: options.logDestination,
    smtpCa: options.smtpCa,
  });
  let url = "";
  if (options.listen) url = `http://localhost:${await listen(platform)}`;
  const stop = async () => {
    await platform.close();
    if (!options.backend) await backend.cleanup();
  };
  return Object.assign(platform, { url, backend, stop });
}

/**
 * The environment of a child `platform` process: this one's, without test-runner variables, with the test
 * master key when it runs on PostgreSQL.
 */
export function childEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PLATFORM_LOG_LEVEL: "warn",
    ...(extra.DATABASE_URL ? { PLATFORM_MASTERKEY: TEST_MASTER_KEY } : {}),
    ...extra,
  };
  delete env.NODE_TEST_CONTEXT;
  delete env.DATABASE_URL;
  return { ...env, ...extra };
}

/** A machine user with a PAT, optionally holding roles in a context: returns its ID and bearer token. */
export async function addMachineUser(
  platform: Platform,
  options: {
    username: string;
    instanceId?: string;
    orgId?: string;
    /** A project membership needs `contextId` (the project's ID). */
    membership?: { contextType: "instance" | "org" | "project"; contextId?: string; roles: string[] };
  },
): Promise<{ userId: string; token: string }> {
  const { addMachineEvent, addPatEvent } = await import("../src/domain/user/commands.ts");
  const { addMembershipEvent } = await import("../src/domain/membership/commands.ts");
  const { ContextType } = await import("../src/domain/membership/events.ts");
  const { newId } = await import("../src/id.ts");
  const { randomToken, sha256 } = await import("../src/crypto/tokens.ts");
  const instanceId = options.instanceId ?? platform.bootstrapResult!.instanceId;
  const orgId = options.orgId ?? platform.bootstrapResult!.orgId;
  const userId = newId();
  const token = randomToken();
  const events = [
    addMachineEvent(userId, orgId, {
      username: options.username,
      name: options.username,
      access_token_type: 0,
    }),
    addPatEvent(userId, orgId, { pat_id: newId(), token_hash: sha256(token) }),
  ];
  if (options.membership) {
    const type = ContextType[options.membership.contextType];
    const contextId = options.membership.contextId ?? (type === ContextType.instance ? instanceId : orgId);
    // a project membership belongs to the project's organization
    const owner =
      type === ContextType.project
        ? (
            await platform.db.query<{ org_id: string }>(
              "SELECT org_id FROM projects WHERE instance_id = $1 AND id = $2",
              [instanceId, contextId],
            )
          )[0].org_id
        : contextId;
    events.push(
      addMembershipEvent(newId(), owner, {
        context_type: type,
        context_id: contextId,
        user_id: userId,
        roles: options.membership.roles,
      }),
    );
  }
  await platform.eventStore.push({ instanceId, creator: "test" }, async () => events);
  return { userId, token };
}

/** Number of events in the store (to prove a failed call stored nothing). */
export async function eventCount(platform: Platform): Promise<number> {
  const rows = await platform.db.query<{ n: number }>("SELECT count(*)::int AS n FROM events");
  return Number(rows[0].n);
}

/** A further organization in the first instance. */
export async function addOrg(platform: Platform, name: string): Promise<string> {
  const { addOrgEvents } = await import("../src/domain/org/commands.ts");
  const { newId } = await import("../src/id.ts");
  const orgId = newId();
  const instanceId = platform.bootstrapResult!.instanceId;
  await platform.eventStore.push({ instanceId, creator: "test" }, async () =>
    addOrgEvents(orgId, name, platform.config.externalDomain),
  );
  return orgId;
}

/** An HTTP/1.1 request with full control of the headers (fetch may not set Host). */
export async function rawRequest(
  url: string,
  options: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: string }> {
  const http = await import("node:http");
  return new Promise((resolve, reject) => {
    const request = http.request(
      url,
      { method: options.method ?? "GET", headers: options.headers },
      (response) => {
        let body = "";
        response.setEncoding("utf8");
        response.on("data", (chunk) => (body += chunk));
        response.on("end", () =>
          resolve({ status: response.statusCode ?? 0, headers: response.headers, body }),
        );
      },
    );
    request.on("error", reject);
    request.end(options.body);
  });
}

/** A JSON value of an answer: checked field by field. */
// biome-ignore lint/suspicious/noExplicitAny: JSON answers are checked field by field
export type Json = any;

/** The answer to a REST call of a test. */
export interface RestReply {
  status: number;
  /** The body as received. */
  text: string;
  /** The body parsed as JSON (undefined only for a `raw` call whose answer is not JSON; a call whose answer
   * is not JSON throws). */
  json: Json;
  headers: Record<string, string | string[] | undefined>;
}

export interface RestOptions {
  /** A body sent as JSON. */
  json?: unknown;
  /** A body sent as is, labelled JSON (for malformed or hand-written JSON). */
  body?: string;
  /** The bearer token: the client's default when undefined, none when null or empty. */
  token?: string | null;
  /** Further request headers (they override the defaults). */
  headers?: Record<string, string>;
  /** A Host header: the call goes to 127.0.0.1 over raw HTTP/1.1 with it (fetch may not set Host). */
  host?: string;
  /** The answer may be other than JSON: parsed only when its content type is JSON. */
  raw?: boolean;
}

export type RestCall = (method: string, path: string, options?: RestOptions) => Promise<RestReply>;

/**
 * REST calls of a test against a listening platform (or a function giving it, for clients made before it
 * starts), with `defaultToken()` as bearer token unless a call names its own. Every answer must be JSON
 * (else the call throws), unless the call is `raw`. `onReply` sees every answer (e.g. to keep the texts).
 */
export function restClient(
  platform: { url: string } | (() => { url: string }),
  defaultToken: () => string | undefined = () => undefined,
  onReply?: (reply: RestReply) => void,
): RestCall {
  return async (method, path, options = {}) => {
    const base = typeof platform === "function" ? platform().url : platform.url;
    const headers: Record<string, string> = {};
    const token = options.token === undefined ? defaultToken() : options.token;
    if (token) headers.authorization = `Bearer ${token}`;
    const body = options.json !== undefined ? JSON.stringify(options.json) : options.body;
    if (body !== undefined) headers["content-type"] = "application/json";
    Object.assign(headers, options.headers);
    let reply: RestReply;
    if (options.host !== undefined) {
      const url = new URL(path, base);
      url.hostname = "127.0.0.1";
      const response = await rawRequest(url.toString(), {
        method,
        headers: { ...headers, host: options.host },
        body,
      });
      reply = { status: response.status, text: response.body, json: undefined, headers: response.headers };
    } else {
      const response = await fetch(`${base}${path}`, { method, headers, body });
      const text = await response.text();
      reply = {
        status: response.status,
        text,
        json: undefined,
        headers: Object.fromEntries(response.headers),
      };
    }
    const isJson = String(reply.headers["content-type"] ?? "").includes("json");
    if (!options.raw || isJson) {
      try {
        reply.json = JSON.parse(reply.text);
      } catch {
        throw new Error(
          `${method} ${path}: the ${reply.status} answer is not JSON: ${reply.text.slice(0, 200)}`,
        );
      }
    }
    onReply?.(reply);
    return reply;
  };
}

/** Asserts an rpcStatus error: HTTP status, gRPC code and the start of the message (usually the field). */
export function assertRpcError(
  reply: RestReply,
  status: number,
  code: number,
  message?: RegExp | string,
): void {
  assert.equal(reply.status, status, reply.text);
  assert.equal(reply.json.code, code, reply.text);
  if (typeof message === "string") assert.ok(reply.json.message.startsWith(message), reply.json.message);
  else if (message) assert.match(reply.json.message, message);
}

/** Runs `fn` and asserts that it stored no event; returns what `fn` returned. */
export async function expectNothingStored<T>(
  platform: Platform,
  fn: () => Promise<T>,
  message = "nothing stored",
): Promise<T> {
  const before = await eventCount(platform);
  const result = await fn();
  assert.equal(await eventCount(platform), before, message);
  return result;
}

/** Asserts that `call` fails with an rpcStatus error (as assertRpcError) and stores nothing. */
export async function assertRejected(
  platform: Platform,
  call: () => Promise<RestReply>,
  status: number,
  code: number,
  message?: RegExp | string,
): Promise<void> {
  await expectNothingStored(platform, async () => assertRpcError(await call(), status, code, message));
}

/** The body option of a REST call for a test value: a string as is (e.g. malformed JSON), else as JSON. */
export function jsonOrRaw(body: unknown): Pick<RestOptions, "json" | "body"> {
  return typeof body === "string" ? { body } : { json: body };
}

/** The promise's value, or a failure if it takes longer than `ms`: a test of a missing bound fails, never hangs. */
export async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const giveUp = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} after ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, giveUp]);
  } finally {
    clearTimeout(timer);
  }
}

/** A client socket that records what it receives and when the server closes it (tests of connection bounds). */
export function watchSocket(socket: import("node:net").Socket) {
  const openedAt = performance.now();
  let received = "";
  socket.setEncoding("utf8");
  socket.on("data", (d: string) => (received += d));
  socket.on("error", () => {});
  const closed = new Promise<number>((resolve) =>
    socket.once("close", () => resolve(performance.now() - openedAt)),
  );
  return {
    socket,
    received: () => received,
    /** Milliseconds from connect until closed; fails if still open after `giveUpMs`. */
    closedWithin: (giveUpMs: number): Promise<number> => within(closed, giveUpMs, "still open"),
  };
}

/**
 * Calls a unary RPC over gRPC (binary protobuf on HTTP/2) with the request written as proto3 JSON, and
 * answers the response as proto3 JSON with snake_case names. Binary protobuf carries no presence for empty
 * lists and for fields without `optional` at their zero value: what a patch can tell over gRPC differs from
 * what it can tell from JSON, which is why patch tests call both. A failed call throws the ConnectError.
 */
export async function grpcCall(
  platform: { url: string },
  token: string,
  service: import("@bufbuild/protobuf").DescService,
  method: string,
  request: Json,
): Promise<Json> {
  const { fromJson, toJson } = await import("@bufbuild/protobuf");
  const { createGrpcTransport } = await import("@connectrpc/connect-node");
  const desc = service.methods.find((m) => m.name === method);
  if (!desc) throw new Error(`${service.typeName} has no method ${method}`);
  const transport = createGrpcTransport({ baseUrl: platform.url });
  const response = await transport.unary(
    desc as never,
    undefined,
    undefined,
    { authorization: `Bearer ${token}` },
    fromJson(desc.input, request),
    undefined,
  );
  return toJson(desc.output, response.message as never, { useProtoFieldName: true });
}
