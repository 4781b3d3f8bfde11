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
