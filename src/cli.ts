import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { adminToken } from "./cli/admin-token.ts";
import { CommandError } from "./cli/database.ts";
import { rotateKeys } from "./cli/keys.ts";
import { type Config, ConfigError, externalOrigin, loadConfig, variables } from "./config.ts";
import { DatabaseFullError } from "./errors.ts";
import { EventStore } from "./eventstore/eventstore.ts";
import { createPlatform, listen } from "./platform.ts";
import { projections } from "./query/projections/index.ts";
import type { Database } from "./storage/database.ts";
import { migrate } from "./storage/migrate.ts";
import { openDatabase } from "./storage/open.ts";

/** A command of the CLI: its synopsis, what it does, and the options it reads. */
interface CommandHelp {
  synopsis: string;
  description: string;
  options: string[];
}

const commandHelp: Record<string, CommandHelp> = {
  start: {
    synopsis: "start",
    description: "migrate the database, bootstrap on first start, serve",
    options: ["config"],
  },
  migrate: {
    synopsis: "migrate",
    description: "apply pending database migrations and exit",
    options: ["config"],
  },
  projections: {
    synopsis: "projections rebuild [NAME...]",
    description: "rebuild read models from the events (all when no name is given)",
    options: ["config"],
  },
  keys: {
    synopsis: "keys rotate [--instance ID]",
    description:
      "new OIDC signing keys now, for one instance or all (the old ones stay published until the tokens they signed expire)",
    options: ["config", "instance"],
  },
  "admin-token": {
    synopsis: "admin-token --out FILE [--instance ID] [--user NAME] [--force]",
    description:
      'a personal access token of an administrator, written to FILE (mode 0600; "-": standard output): the machine user admin-client with IAM_OWNER (created when missing), or the existing machine user NAME; while a server holds the embedded database, that server issues it (asked over PLATFORM_DATA_DIR/admin.sock, mode 0600)',
    options: ["config", "instance", "out", "user", "force"],
  },
};

const optionHelp: Record<string, [string, string]> = {
  config: [
    "--config FILE",
    "YAML file with the same keys as the environment variables (the environment wins)",
  ],
  instance: [
    "--instance ID",
    "keys rotate: only this instance; admin-token: this instance (default: the first)",
  ],
  out: ["--out FILE", 'admin-token: where the token goes ("-": standard output)'],
  user: ["--user NAME", "admin-token: an existing machine user instead of admin-client"],
  force: ["--force", "admin-token: replace FILE when it exists"],
  help: ["-h, --help", "show this help (after a command: that command's help)"],
  version: ["-v, --version", "print the version and exit"],
};

/**
 * Two columns: each name padded to the longest (at most 46 characters), each description wrapped beside
 * it; a longer name stands on its own line, its description under the column.
 */
function columns(rows: [string, string][], indent = 2, width = 110): string {
  const nameWidth = Math.min(46, Math.max(...rows.map(([name]) => name.length)) + 2);
  const textWidth = width - indent - nameWidth;
  const pad = " ".repeat(indent + nameWidth);
  return rows
    .map(([name, text]) => {
      const lines = wrap(text, textWidth);
      const head = " ".repeat(indent) + name;
      if (name.length + 2 > nameWidth) return [head, ...lines.map((line) => pad + line)].join("\n");
      return lines.map((line, i) => (i === 0 ? head.padEnd(indent + nameWidth) : pad) + line).join("\n");
    })
    .join("\n");
}

function wrap(text: string, width: number): string[] {
  const lines: string[] = [];
  let line = "";
  for (const word of text.split(" ")) {
    if (line && line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else line = line ? `${line} ${word}` : word;
  }
  return [...lines, line];
}

const environmentHelp = (): string =>
  columns(variables.map((v) => [v.name, `${v.description}${v.default ? ` (default: ${v.default})` : ""}`]));

const usage = `Usage: platform <command> [--config FILE]
       platform <command> --help

Commands:
${columns(Object.values(commandHelp).map((c) => [c.synopsis, c.description]))}

Options:
${columns(Object.values(optionHelp))}

Environment:
${environmentHelp()}
`;

/** One command's help: its synopsis, what it does, its options and the environment it reads. */
function usageOf(command: string): string {
  const help = commandHelp[command];
  return `Usage: platform ${help.synopsis}

${wrap(help.description, 106).join("\n")}

Options:
${columns([...help.options, "help"].map((name) => optionHelp[name]))}

Environment:
${environmentHelp()}
`;
}

export async function main(argv: string[]): Promise<number> {
  let parsed: ReturnType<typeof parseCli>;
  try {
    parsed = parseCli(argv);
  } catch (error) {
    process.stderr.write(`platform: ${(error as Error).message}\n${usage}`);
    return 2;
  }
  const { values, positionals } = parsed;
  const [command, ...rest] = positionals;
  if (values.version || command === "version") {
    process.stdout.write(`platform ${version()}\n`);
    return 0;
  }
  const helpTopic = command === "help" ? rest[0] : command;
  if (helpTopic !== undefined && helpTopic in commandHelp && (values.help || command === "help")) {
    process.stdout.write(usageOf(helpTopic));
    return 0;
  }
  if (values.help || command === undefined || command === "help") {
    process.stdout.write(usage);
    return command === undefined && !values.help ? 2 : 0;
  }

  let config: Config;
  try {
    config = loadConfig(process.env, values.config);
  } catch (error) {
    if (error instanceof ConfigError) return fail(error.message);
    throw error;
  }

  try {
    switch (command) {
      case "start":
        return await start(config);
      case "migrate": {
        const db = await openDatabase(config);
        printNotices(db);
        try {
          const applied = await migrate(db);
          process.stdout.write(
            applied.length ? `applied migrations ${applied.join(", ")}\n` : "database is up to date\n",
          );
        } finally {
          await db.close();
        }
        return 0;
      }
      case "projections": {
        if (rest[0] !== "rebuild")
          return fail(`unknown projections command "${rest[0] ?? ""}" (expected: rebuild)`);
        const names = rest.length > 1 ? rest.slice(1) : projections.map((p) => p.name);
        const unknown = names.filter((name) => !projections.some((p) => p.name === name));
        if (unknown.length)
          return fail(
            `unknown projection ${unknown.join(", ")} (known: ${projections.map((p) => p.name).join(", ")})`,
          );
        const db = await openDatabase(config);
        printNotices(db);
        try {
          await migrate(db);
          const store = new EventStore(db, projections);
          for (const name of names)
            process.stdout.write(`${name}: replayed ${await store.rebuild(name)} events\n`);
          await store.broadcast.flushed(); // running servers clear their caches
        } finally {
          await db.close();
        }
        return 0;
      }
      case "keys": {
        if (rest[0] !== "rotate") return fail(`unknown keys command "${rest[0] ?? ""}" (expected: rotate)`);
        return report(await rotateKeys(config, values.instance));
      }
      case "admin-token": {
        if (!values.out) return fail("admin-token: --out FILE is required (- for standard output)");
        const lines = await adminToken(config, {
          out: values.out,
          instanceId: values.instance,
          username: values.user,
          force: values.force,
        });
        // with the token on standard output, what was done goes to standard error
        return report(lines, values.out === "-" ? process.stderr : process.stdout);
      }
      default:
        return fail(`unknown command "${command}"; see platform --help`);
    }
  } catch (error) {
    if (error instanceof CommandError) return fail(error.message);
    // e.g. migrations on a full disk: the operator needs the detail a client does not get
    if (error instanceof DatabaseFullError) return fail(`${databaseName(config)}: ${error.detail}`);
    return fail((error as Error).message.split("\n")[0]);
  }
}

async function start(config: Config): Promise<number> {
  const platform = await createPlatform(config);
  let port: number;
  try {
    port = await listen(platform);
  } catch (error) {
    await platform.close();
    throw error;
  }
  const origin = externalOrigin({
    ...config,
    externalPort: config.externalPort === config.port ? port : config.externalPort,
  });
  const lines = [
    `Platform is running at ${origin}`,
    `  database: ${config.databaseUrl ? "PostgreSQL (DATABASE_URL)" : `embedded, in ${config.dataDir}`}`,
    ...(platform.db.notices ?? []).map((notice) => `  ${notice}`),
  ];
  const first = platform.bootstrapResult;
  if (first) {
    lines.push(`  first start: created instance ${first.instanceId} for ${config.externalDomain}`);
    lines.push(`  log in as "${first.adminUsername}"`);
    if (first.generatedPassword)
      lines.push(`  password: ${first.generatedPassword}   (generated; shown only this once)`);
    else lines.push("  password: the one in PLATFORM_FIRSTINSTANCE_ADMIN_PASSWORD");
    if (first.patPath) lines.push(`  personal access token of admin-client written to ${first.patPath}`);
  } else {
    lines.push(`  log in as "${config.firstInstance.adminUsername}" with the password set on first start`);
  }
  lines.push(`  API reference: ${origin}/docs`);
  lines.push(`  sign in: ${origin}/ (your account page)`);
  lines.push(`  console: ${origin}/ui/console/ (administration)`);
  const bearer = config.metrics.token === undefined ? "" : " (bearer token)";
  // the metrics listener speaks plain HTTP, even when the main port has TLS
  if (platform.metricsPort !== undefined)
    lines.push(`  metrics: http://${config.externalDomain}:${platform.metricsPort}/metrics${bearer}`);
  else if (bearer) lines.push(`  metrics: ${origin}/metrics${bearer}`);
  process.stdout.write(`${lines.join("\n")}\n`);

  await new Promise<void>((resolve) => {
    const onTerm = () => shutdown("SIGTERM");
    const onInt = () => shutdown("SIGINT");
    const shutdown = (signal: string) => {
      // a second signal, of either kind, ends the process at once (the default action)
      process.off("SIGTERM", onTerm);
      process.off("SIGINT", onInt);
      platform.app.log.info({ signal, graceSeconds: config.shutdownGraceSeconds }, "shutting down");
      platform.close().then(resolve, (error) => {
        platform.app.log.error({ err: error }, "shutdown failed");
        resolve();
      });
    };
    process.on("SIGTERM", onTerm);
    process.on("SIGINT", onInt);
  });
  return 0;
}

function parseCli(argv: string[]) {
  return parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      config: { type: "string" },
      instance: { type: "string" },
      out: { type: "string" },
      user: { type: "string" },
      force: { type: "boolean" },
      help: { type: "boolean", short: "h" },
      version: { type: "boolean", short: "v" },
    },
  });
}

/** The package's version, from package.json in the folder above this file's (`src/`). */
function version(): string {
  return JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")).version;
}

function printNotices(db: Database): void {
  for (const notice of db.notices ?? []) process.stderr.write(`platform: ${notice}\n`);
}

function report(lines: string[], stream: NodeJS.WritableStream = process.stdout): number {
  stream.write(lines.map((line) => `${line}\n`).join(""));
  return 0;
}

function fail(message: string): number {
  process.stderr.write(`platform: ${message}\n`);
  return 1;
}

/** The variable that names the database, for error lines. */
function databaseName(config: Config): string {
  return config.databaseUrl ? "DATABASE_URL" : "PLATFORM_DATA_DIR";
}
