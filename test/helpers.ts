import { cpSync, existsSync, mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import { type Config, loadConfig } from "../src/config.ts";
import { createPlatform, listen, type Platform } from "../src/platform.ts";

export const ADMIN_PASSWORD = "Password1!";

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
  options: { env?: Record<string, string>; listen?: boolean; backend?: TestBackend } = {},
): Promise<TestPlatform> {
  const backend = options.backend ?? (await freshBackend());
  const config: Config = loadConfig({
    PLATFORM_PORT: "0",
    PLATFORM_LOG_LEVEL: "silent",
    PLATFORM_FIRSTINSTANCE_ADMIN_PASSWORD: ADMIN_PASSWORD,
    ...backend.env,
    ...options.env,
  });
  const platform = await createPlatform(config);
  let url = "";
  if (options.listen) url = `http://localhost:${await listen(platform)}`;
  const stop = async () => {
    await platform.close();
    if (!options.backend) await backend.cleanup();
  };
  return Object.assign(platform, { url, backend, stop });
}

/** The environment of a child `platform` process: this one's, without test-runner variables. */
export function childEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, PLATFORM_LOG_LEVEL: "warn", ...extra };
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
    membership?: { contextType: "instance" | "org"; contextId?: string; roles: string[] };
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
    const type = options.membership.contextType === "instance" ? ContextType.instance : ContextType.org;
    const contextId = options.membership.contextId ?? (type === ContextType.instance ? instanceId : orgId);
    events.push(
      addMembershipEvent(newId(), type === ContextType.instance ? instanceId : contextId, {
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
