import { readFileSync } from "node:fs";
import path from "node:path";
import YAML from "yaml";
import { loadOrCreateMasterKeyFile, masterKeyFile, parseMasterKey } from "./crypto/masterkey.ts";
import { DenyList } from "./net/deny-list.ts";
import { type AllowPrivate, allowPrivateValues } from "./net/outbound.ts";
import { parseTracingConfig, type TracingConfig } from "./tracing/config.ts";

/** Every setting (README's configuration table), validated once at start-up. */
export interface Config {
  port: number;
  externalDomain: string;
  externalPort: number;
  externalSecure: boolean;
  databaseUrl?: string;
  /** Named (prepared) statements on PostgreSQL (PLATFORM_DATABASE_PREPARED_STATEMENTS). */
  preparedStatements: boolean;
  /** Longest statement on PostgreSQL, in ms; 0: unbounded (PLATFORM_DATABASE_STATEMENT_TIMEOUT_MS). */
  statementTimeoutMs: number;
  dataDir: string;
  /** Most queries and transactions waiting for the embedded database's connection (PLATFORM_EMBEDDED_QUEUE_LIMIT). */
  embeddedQueueLimit: number;
  firstInstance: {
    orgName: string;
    adminUsername: string;
    /** undefined: a password is generated and printed once. */
    adminPassword?: string;
    patPath?: string;
  };
  /** System API users: id → PEM public key. */
  systemApiUsers: Record<string, string>;
  logLevel: string;
  /** Log line format: JSON lines, human-readable lines, or pretty on a terminal and JSON otherwise. */
  logFormat: LogFormat;
  trustProxy: boolean;
  /** Largest `limit` a search accepts (ListQuery). */
  maxSearchLimit: number;
  /** Wrong passwords in a row after which a user's password checks are locked out; 0 = never. */
  maxPasswordAttempts: number;
  /**
   * What reaching `maxPasswordAttempts` does: a temporary lockout (each further wrong password doubles it,
   * from `passwordLockoutSeconds` up to `passwordLockoutMaxSeconds`), or `permanent`: the user is LOCKED
   * until an administrator unlocks it.
   */
  passwordLockout: "temporary" | "permanent";
  passwordLockoutSeconds: number;
  passwordLockoutMaxSeconds: number;
  /** Shortest password the complexity policy accepts. */
  passwordMinLength: number;
  /** Login UI: password and registration posts per minute per client IP / per login name; 0 = no limit. */
  loginAttemptsPerIp: number;
  loginAttemptsPerName: number;
  /**
   * Issuer of codehost_b identity providers (an OpenID Connect provider at a fixed public issuer,
   * `CODEHOST_B_PUBLIC_ISSUER`); PLATFORM_IDP_CODEHOST_B_ISSUER replaces it (air-gapped installs, tests).
   */
  idpCodehostBIssuer: string;
  /** Certificate chain and key (PEM) when Platform terminates TLS itself. */
  tls?: { cert: Buffer; key: Buffer };
  /** PLATFORM_MASTERKEY (32 bytes): encrypts the OIDC signing keys at rest. See `resolveMasterKey`. */
  masterKey?: Buffer;
  /**
   * Which `aud` assertions signed for this server may carry (PLATFORM_ASSERTION_AUDIENCE; docs/oidc.md
   * "Audiences of assertions").
   */
  assertionAudience: AssertionAudienceProfile;
  /** Largest request body (REST) or request message (gRPC, gRPC-web, Connect) accepted, in bytes. */
  maxRequestBodyBytes: number;
  /**
   * How long a stop (SIGTERM, SIGINT) lets the requests and outbox sends in flight finish before it cuts
   * them off (PLATFORM_SHUTDOWN_GRACE_SECONDS; src/platform.ts `close`).
   */
  shutdownGraceSeconds: number;
  /** Bounds on client connections (src/server/listener.ts). */
  connections: {
    headersTimeoutMs: number;
    requestTimeoutMs: number;
    idleTimeoutMs: number;
    maxConnections: number;
  };
  /** The execution engine (src/execution, docs/actions.md "Calling targets"). */
  execution: ExecutionConfig;
  /** Delivery of notification messages (src/notifications, docs/notifications.md "Delivery"). */
  notification: NotificationConfig;
  /** The outbound-address policy of every outbound connection (src/net/outbound.ts). */
  outbound: OutboundConfig;
  /** OpenTelemetry tracing (src/tracing); undefined: off. */
  tracing?: TracingConfig;
  /** Where `GET /metrics` is served (src/metrics; docs/operations.md "Metrics"). */
  metrics: MetricsConfig;
}

/**
 * Metrics reveal every tenant's traffic, so they are served only where the operator asked: on a port of
 * their own (`port`, meant for the internal network), behind a bearer token (`token`), or both. Neither
 * set: not served at all.
 */
export interface MetricsConfig {
  /** A separate listener serving only `/metrics` (PLATFORM_METRICS_PORT); undefined: none. */
  port?: number;
  /** The bearer token `/metrics` requires (PLATFORM_METRICS_TOKEN); undefined: none. */
  token?: string;
}

export interface OutboundConfig {
  /** Which levels may reach loopback and private addresses (PLATFORM_OUTBOUND_ALLOW_PRIVATE). */
  allowPrivate: AllowPrivate;
  /** Hosts, addresses and networks no outbound connection may reach (entries as configured, each valid). */
  denyList: string[];
}

export interface ExecutionConfig {
  /** Attempts of an event delivery before it is given up. */
  maxAttempts: number;
  /** Delay before the first retry of an event delivery (doubling with each attempt, with jitter). */
  retryDelayMs: number;
  /** Largest answer body read from a target. */
  maxResponseBytes: number;
  /** How long a target's previous signing key stays valid after a rotation. */
  signingKeyGraceSeconds: number;
}

export interface NotificationConfig {
  /** Attempts of a message before it is given up. */
  maxAttempts: number;
  /** Delay before the first retry of a message (doubling with each attempt, with jitter). */
  retryDelayMs: number;
  /** How long a verification code stays valid (seconds). */
  codeTtlSeconds: number;
}

/** `PLATFORM_NOTIFICATION_CODE_TTL`: seconds, or a number with `s`, `m` or `h` (`3600`, `90m`, `1h`). */
function parseCodeTtl(raw: string): number {
  const match = /^(\d{1,7})\s*(s|m|h)?$/.exec(raw.trim());
  const seconds = match ? Number(match[1]) * { s: 1, m: 60, h: 3600 }[match[2] ?? "s"]! : Number.NaN;
  if (!(seconds >= 60 && seconds <= 7 * 86400))
    throw new ConfigError(
      "PLATFORM_NOTIFICATION_CODE_TTL",
      `must be a duration from 1 minute to 7 days (seconds, or with s, m or h: 3600, 90m, 1h); got "${raw}"`,
    );
  return seconds;
}

/**
 * PLATFORM_ASSERTION_AUDIENCE (src/oidc/assertion-audience.ts): `compatible` accepts what RFC 7523 §3 and
 * OpenID Connect Core §9 name, `strict` only the issuer, as RFC 7523bis and FAPI 2.0 ask.
 */
export const assertionAudienceProfiles = ["compatible", "strict"] as const;
export type AssertionAudienceProfile = (typeof assertionAudienceProfiles)[number];

export const logFormats = ["auto", "json", "pretty"] as const;
export type LogFormat = (typeof logFormats)[number];

/** A bad configuration value: one clear line naming the variable. */
export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    problem: string,
  ) {
    super(`${variable}: ${problem}`);
    this.name = "ConfigError";
  }
}

interface VariableSpec {
  name: string;
  default?: string;
  description: string;
}

/** The public issuer of codehost_b identity providers (OpenID Connect discovery below it). */
export const CODEHOST_B_PUBLIC_ISSUER = "https://gitlab.com";

/** The table README.md documents; kept here so `platform --help` and the docs cannot drift apart. */
export const variables: VariableSpec[] = [
  { name: "PLATFORM_PORT", default: "8080", description: "listening port (HTTP/1.1 and h2c)" },
  {
    name: "PLATFORM_EXTERNAL_DOMAIN",
    default: "localhost",
    description: "first instance's domain; issuer host",
  },
  {
    name: "PLATFORM_EXTERNAL_PORT",
    default: "= PLATFORM_PORT",
    description: "port in external URLs (omitted when 80/443)",
  },
  { name: "PLATFORM_EXTERNAL_SECURE", default: "false", description: "https in external URLs" },
  { name: "DATABASE_URL", description: "PostgreSQL URL; unset: embedded database in PLATFORM_DATA_DIR" },
  {
    name: "PLATFORM_DATABASE_PREPARED_STATEMENTS",
    default: "true",
    description:
      "PostgreSQL: each connection prepares a statement once (false: behind a pooler in transaction mode that cannot keep them)",
  },
  {
    name: "PLATFORM_DATABASE_STATEMENT_TIMEOUT_MS",
    default: "5000",
    description:
      "PostgreSQL: longest statement; a slower or unanswered one ends with 503 (its connection is dropped when the server does not answer); 0 = unbounded",
  },
  { name: "PLATFORM_DATA_DIR", default: "./.data", description: "embedded database directory" },
  {
    name: "PLATFORM_EMBEDDED_QUEUE_LIMIT",
    default: "256",
    description:
      "embedded database: most queries and transactions waiting for its one connection (served first come, first served by request); beyond, the latest request's is refused with 503 and Retry-After",
  },
  { name: "PLATFORM_FIRSTINSTANCE_ORG_NAME", default: "Platform", description: "first organization" },
  { name: "PLATFORM_FIRSTINSTANCE_ADMIN_USERNAME", default: "admin", description: "first human IAM_OWNER" },
  {
    name: "PLATFORM_FIRSTINSTANCE_ADMIN_PASSWORD",
    default: "generated",
    description: "printed once on first start when generated",
  },
  {
    name: "PLATFORM_FIRSTINSTANCE_PAT_PATH",
    description: "machine user admin-client with IAM_OWNER; its PAT is written here (0600)",
  },
  { name: "PLATFORM_SYSTEM_API_USERS", description: 'JSON {"<id>": "<PEM public key>"}: system API users' },
  {
    name: "PLATFORM_MASTERKEY",
    default: "generated (embedded)",
    description:
      "32-byte key encrypting the OIDC signing keys: 64 hex chars, base64, or 32 characters; required with DATABASE_URL",
  },
  {
    name: "PLATFORM_ASSERTION_AUDIENCE",
    default: "compatible",
    description:
      "aud of client assertions and jwt-bearer assertions: compatible (the issuer, the token endpoint or the endpoint called; a string or a one-element array) or strict (the issuer as a string)",
  },
  { name: "PLATFORM_LOG_LEVEL", default: "info", description: "pino log level" },
  {
    name: "PLATFORM_LOG_FORMAT",
    default: "auto",
    description:
      "json, pretty, or auto: human-readable lines when stdout is a terminal, JSON lines otherwise",
  },
  { name: "PLATFORM_TRUST_PROXY", default: "false", description: "honour X-Forwarded-Host / -Proto" },
  { name: "PLATFORM_MAX_SEARCH_LIMIT", default: "1000", description: "largest search `limit` accepted" },
  {
    name: "PLATFORM_MAX_PASSWORD_ATTEMPTS",
    default: "10",
    description: "wrong passwords in a row that lock a user's password checks out; 0 = off",
  },
  {
    name: "PLATFORM_PASSWORD_LOCKOUT",
    default: "temporary",
    description:
      "temporary: the lockout ends by itself, doubling with each further wrong password; permanent: the user is locked until an administrator unlocks it",
  },
  {
    name: "PLATFORM_PASSWORD_LOCKOUT_SECONDS",
    default: "60",
    description: "first temporary lockout (seconds)",
  },
  {
    name: "PLATFORM_PASSWORD_LOCKOUT_MAX_SECONDS",
    default: "900",
    description: "longest temporary lockout (seconds)",
  },
  {
    name: "PLATFORM_PASSWORD_MIN_LENGTH",
    default: "8",
    description: "shortest password the complexity policy accepts",
  },
  { name: "PLATFORM_TLS_CERT_FILE", description: "PEM certificate chain: serve HTTPS on PLATFORM_PORT" },
  { name: "PLATFORM_TLS_KEY_FILE", description: "PEM private key of that certificate (both or neither)" },
  {
    name: "PLATFORM_MAX_REQUEST_BODY_BYTES",
    default: "1048576",
    description: "largest request body / message accepted (bytes); larger answers 413",
  },
  {
    name: "PLATFORM_HTTP_HEADERS_TIMEOUT_MS",
    default: "10000",
    description: "time for a connection's first bytes (TLS handshake) and for a request's headers",
  },
  {
    name: "PLATFORM_HTTP_REQUEST_TIMEOUT_MS",
    default: "30000",
    description: "time from a request's first byte until its body is received",
  },
  {
    name: "PLATFORM_HTTP_IDLE_TIMEOUT_MS",
    default: "65000",
    description: "keep-alive idle, HTTP/2 connection without requests, nothing moving on a connection",
  },
  {
    name: "PLATFORM_MAX_CONNECTIONS",
    default: "from the open-file limit",
    description: "open client connections; more are refused (503 on cleartext HTTP/1.1)",
  },
  {
    name: "PLATFORM_SHUTDOWN_GRACE_SECONDS",
    default: "25",
    description:
      "on SIGTERM/SIGINT: time for requests and deliveries in flight to finish before they are cut",
  },
  {
    name: "PLATFORM_LOGIN_ATTEMPTS_PER_IP",
    default: "300",
    description: "login UI: sign-in and registration posts per minute per client IP; 0 = no limit",
  },
  {
    name: "PLATFORM_LOGIN_ATTEMPTS_PER_NAME",
    default: "30",
    description: "login UI: password posts per minute per login name; 0 = no limit",
  },
  {
    name: "PLATFORM_IDP_CODEHOST_B_ISSUER",
    default: CODEHOST_B_PUBLIC_ISSUER,
    description:
      "issuer of codehost_b identity providers (replaces the public one: air-gapped installs, tests)",
  },
  {
    name: "PLATFORM_OUTBOUND_ALLOW_PRIVATE",
    default: "instance",
    description:
      "who may reach loopback and private addresses: instance (targets, instance identity providers), all (organizations' identity providers too), none (see docs/operations.md)",
  },
  {
    name: "PLATFORM_EXECUTION_DENY_LIST",
    description:
      "comma-separated IPs, CIDR networks and host names (*.domain) no outbound connection may reach, on top of the outbound-address policy (see docs/operations.md)",
  },
  {
    name: "PLATFORM_EXECUTION_MAX_ATTEMPTS",
    default: "12",
    description: "attempts of an event delivery before it is marked failed",
  },
  {
    name: "PLATFORM_EXECUTION_RETRY_DELAY_MS",
    default: "1000",
    description: "first retry delay of an event delivery; doubles per attempt (jittered, at most 1 h)",
  },
  {
    name: "PLATFORM_NOTIFICATION_MAX_ATTEMPTS",
    default: "8",
    description: "attempts of a notification message (e-mail, SMS) before it is stored FAILED",
  },
  {
    name: "PLATFORM_NOTIFICATION_RETRY_DELAY_MS",
    default: "5000",
    description: "first retry delay of a notification message; doubles per attempt (jittered, at most 1 h)",
  },
  {
    name: "PLATFORM_NOTIFICATION_CODE_TTL",
    default: "1h",
    description:
      "how long a verification code (e-mail, phone) stays valid: seconds, or with s, m or h; 1 minute to 7 days",
  },
  {
    name: "PLATFORM_EXECUTION_MAX_RESPONSE_BYTES",
    default: "1048576",
    description: "largest answer body read from a target; larger is an error of the target",
  },
  {
    name: "PLATFORM_EXECUTION_SIGNING_KEY_GRACE_SECONDS",
    default: "86400",
    description: "how long a target's previous signing key is still sent after a rotation",
  },
  {
    name: "PLATFORM_METRICS_PORT",
    description:
      "serve GET /metrics (Prometheus) on this port of its own, all interfaces; unset: not on a port of its own (see docs/operations.md)",
  },
  {
    name: "PLATFORM_METRICS_TOKEN",
    description:
      "bearer token GET /metrics requires (at least 16 characters); set without PLATFORM_METRICS_PORT: /metrics is served on PLATFORM_PORT",
  },
  {
    name: "OTEL_EXPORTER_OTLP_ENDPOINT",
    description:
      "OTLP/HTTP base URL (e.g. http://collector:4318): traces go to <it>/v1/traces; unset: no tracing",
  },
  {
    name: "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    description: "full OTLP/HTTP traces URL, instead of OTEL_EXPORTER_OTLP_ENDPOINT",
  },
  {
    name: "OTEL_EXPORTER_OTLP_PROTOCOL",
    default: "http/protobuf",
    description: "http/protobuf or http/json (gRPC is not supported)",
  },
  { name: "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", description: "the same, for traces only" },
  {
    name: "OTEL_EXPORTER_OTLP_HEADERS",
    description: "headers of the export requests: key=value,... (values percent-encoded)",
  },
  { name: "OTEL_EXPORTER_OTLP_TRACES_HEADERS", description: "the same, for traces only (added over them)" },
  { name: "OTEL_SERVICE_NAME", default: "platform", description: "service.name of the spans" },
  { name: "OTEL_RESOURCE_ATTRIBUTES", description: "more resource attributes: key=value,..." },
  {
    name: "OTEL_TRACES_SAMPLER",
    default: "parentbased_always_on",
    description: "always_on, always_off, traceidratio, or parentbased_ of one of them",
  },
  { name: "OTEL_TRACES_SAMPLER_ARG", default: "1", description: "the ratio of the traceidratio samplers" },
  { name: "OTEL_TRACES_EXPORTER", default: "otlp", description: "otlp, or none: no tracing" },
  { name: "OTEL_SDK_DISABLED", default: "false", description: "true: no tracing" },
];

/** An issuer URL: http(s), no query or fragment; a trailing slash is dropped. */
function parseIssuer(name: string, value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new ConfigError(name, `"${value}" is not a URL (expected https://host[/path])`);
  }
  if ((url.protocol !== "https:" && url.protocol !== "http:") || url.search || url.hash)
    throw new ConfigError(name, `"${value}" is not an http(s) issuer URL without query or fragment`);
  return value.replace(/\/+$/, "");
}

/** 1 MiB: far above any API request; bigger bodies are refused before they are parsed. */
const DEFAULT_MAX_REQUEST_BODY_BYTES = 1024 * 1024;
/** 1 GiB: a sanity cap (connect allows at most 4 GiB per message). */
const MAX_REQUEST_BODY_BYTES_LIMIT = 1024 * 1024 * 1024;

const logLevels = ["fatal", "error", "warn", "info", "debug", "trace", "silent"];

type Source = Record<string, string | undefined>;

/**
 * Reads the environment, over an optional YAML file whose keys are the same variable names
 * (environment wins). Throws ConfigError on the first bad value.
 */
export function loadConfig(env: Source = process.env, configFile?: string): Config {
  const source: Source = { ...(configFile ? readConfigFile(configFile) : {}), ...env };
  const str = (name: string, fallback?: string): string | undefined => {
    const value = source[name];
    return value === undefined || value === "" ? fallback : value;
  };

  const port = parsePort("PLATFORM_PORT", str("PLATFORM_PORT", "8080")!);
  const externalDomain = str("PLATFORM_EXTERNAL_DOMAIN", "localhost")!.toLowerCase();
  if (!/^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/.test(externalDomain)) {
    throw new ConfigError("PLATFORM_EXTERNAL_DOMAIN", `"${externalDomain}" is not a domain name`);
  }
  const externalPortRaw = str("PLATFORM_EXTERNAL_PORT");
  const externalPort =
    externalPortRaw === undefined ? port : parsePort("PLATFORM_EXTERNAL_PORT", externalPortRaw);

  const databaseUrl = str("DATABASE_URL");
  if (databaseUrl !== undefined) {
    let url: URL;
    try {
      url = new URL(databaseUrl);
    } catch {
      throw new ConfigError("DATABASE_URL", "is not a URL (expected postgres://user@host:port/database)");
    }
    if (url.protocol !== "postgres:" && url.protocol !== "postgresql:") {
      throw new ConfigError(
        "DATABASE_URL",
        `scheme must be postgres:// or postgresql://, not ${url.protocol}//`,
      );
    }
  }

  const logLevel = str("PLATFORM_LOG_LEVEL", "info")!;
  if (!logLevels.includes(logLevel)) {
    throw new ConfigError("PLATFORM_LOG_LEVEL", `must be one of ${logLevels.join(", ")}`);
  }

  const logFormat = str("PLATFORM_LOG_FORMAT", "auto")!.toLowerCase() as LogFormat;
  if (!logFormats.includes(logFormat)) {
    throw new ConfigError("PLATFORM_LOG_FORMAT", `must be one of ${logFormats.join(", ")}`);
  }

  const adminUsername = str("PLATFORM_FIRSTINSTANCE_ADMIN_USERNAME", "admin")!;
  if (!/^[A-Za-z0-9._@-]{1,200}$/.test(adminUsername)) {
    throw new ConfigError(
      "PLATFORM_FIRSTINSTANCE_ADMIN_USERNAME",
      "must be 1-200 letters, digits or . _ @ -",
    );
  }
  const adminPassword = str("PLATFORM_FIRSTINSTANCE_ADMIN_PASSWORD");
  if (adminPassword !== undefined && adminPassword.length < 8) {
    throw new ConfigError("PLATFORM_FIRSTINSTANCE_ADMIN_PASSWORD", "must be at least 8 characters");
  }
  const orgName = str("PLATFORM_FIRSTINSTANCE_ORG_NAME", "Platform")!;
  if (orgName.trim().length === 0 || orgName.length > 200) {
    throw new ConfigError("PLATFORM_FIRSTINSTANCE_ORG_NAME", "must be 1-200 characters");
  }

  const tlsFiles = { cert: str("PLATFORM_TLS_CERT_FILE"), key: str("PLATFORM_TLS_KEY_FILE") };
  if ((tlsFiles.cert === undefined) !== (tlsFiles.key === undefined)) {
    const missing = tlsFiles.cert === undefined ? "PLATFORM_TLS_CERT_FILE" : "PLATFORM_TLS_KEY_FILE";
    throw new ConfigError(missing, "must be set too (TLS needs a certificate and its key)");
  }
  const tls =
    tlsFiles.cert !== undefined && tlsFiles.key !== undefined
      ? {
          cert: readPem("PLATFORM_TLS_CERT_FILE", tlsFiles.cert),
          key: readPem("PLATFORM_TLS_KEY_FILE", tlsFiles.key),
        }
      : undefined;

  const masterKeyRaw = str("PLATFORM_MASTERKEY");
  const masterKey = masterKeyRaw === undefined ? undefined : parseMasterKey(masterKeyRaw);
  if (masterKeyRaw !== undefined && !masterKey) {
    throw new ConfigError(
      "PLATFORM_MASTERKEY",
      "must be 32 bytes: 64 hex characters, base64 of 32 bytes, or exactly 32 characters",
    );
  }
  const headersTimeoutMs = parseInteger(
    "PLATFORM_HTTP_HEADERS_TIMEOUT_MS",
    str("PLATFORM_HTTP_HEADERS_TIMEOUT_MS", "10000")!,
    50,
    600_000,
  );
  const requestTimeoutMs = parseInteger(
    "PLATFORM_HTTP_REQUEST_TIMEOUT_MS",
    str("PLATFORM_HTTP_REQUEST_TIMEOUT_MS", "30000")!,
    50,
    3_600_000,
  );
  if (requestTimeoutMs < headersTimeoutMs) {
    throw new ConfigError(
      "PLATFORM_HTTP_REQUEST_TIMEOUT_MS",
      `${requestTimeoutMs} is shorter than PLATFORM_HTTP_HEADERS_TIMEOUT_MS (${headersTimeoutMs}); the request includes its headers`,
    );
  }
  const connections = {
    headersTimeoutMs,
    requestTimeoutMs,
    idleTimeoutMs: parseInteger(
      "PLATFORM_HTTP_IDLE_TIMEOUT_MS",
      str("PLATFORM_HTTP_IDLE_TIMEOUT_MS", "65000")!,
      50,
      3_600_000,
    ),
    maxConnections: parseInteger(
      "PLATFORM_MAX_CONNECTIONS",
      str("PLATFORM_MAX_CONNECTIONS", String(defaultMaxConnections()))!,
      1,
      10_000_000,
    ),
  };

  const denyListRaw = str("PLATFORM_EXECUTION_DENY_LIST", "")!;
  let denyList: string[];
  try {
    denyList = new DenyList(denyListRaw.split(",")).entries.map((e) => e.trim()).filter((e) => e !== "");
  } catch (error) {
    throw new ConfigError("PLATFORM_EXECUTION_DENY_LIST", (error as Error).message);
  }
  const allowPrivate = str("PLATFORM_OUTBOUND_ALLOW_PRIVATE", "instance")!.toLowerCase() as AllowPrivate;
  if (!allowPrivateValues.includes(allowPrivate)) {
    throw new ConfigError(
      "PLATFORM_OUTBOUND_ALLOW_PRIVATE",
      `"${allowPrivate}" is not one of ${allowPrivateValues.join(", ")}`,
    );
  }
  const execution: ExecutionConfig = {
    maxAttempts: parseInteger(
      "PLATFORM_EXECUTION_MAX_ATTEMPTS",
      str("PLATFORM_EXECUTION_MAX_ATTEMPTS", "12")!,
      1,
      100,
    ),
    retryDelayMs: parseInteger(
      "PLATFORM_EXECUTION_RETRY_DELAY_MS",
      str("PLATFORM_EXECUTION_RETRY_DELAY_MS", "1000")!,
      10,
      3_600_000,
    ),
    maxResponseBytes: parseInteger(
      "PLATFORM_EXECUTION_MAX_RESPONSE_BYTES",
      str("PLATFORM_EXECUTION_MAX_RESPONSE_BYTES", "1048576")!,
      1024,
      MAX_REQUEST_BODY_BYTES_LIMIT,
    ),
    signingKeyGraceSeconds: parseInteger(
      "PLATFORM_EXECUTION_SIGNING_KEY_GRACE_SECONDS",
      str("PLATFORM_EXECUTION_SIGNING_KEY_GRACE_SECONDS", "86400")!,
      0,
      30 * 86400,
    ),
  };

  const passwordLockout = str("PLATFORM_PASSWORD_LOCKOUT", "temporary")!.toLowerCase();
  if (passwordLockout !== "temporary" && passwordLockout !== "permanent") {
    throw new ConfigError("PLATFORM_PASSWORD_LOCKOUT", "must be temporary or permanent");
  }
  const passwordLockoutSeconds = parseInteger(
    "PLATFORM_PASSWORD_LOCKOUT_SECONDS",
    str("PLATFORM_PASSWORD_LOCKOUT_SECONDS", "60")!,
    1,
    86_400,
  );
  const passwordLockoutMaxSeconds = parseInteger(
    "PLATFORM_PASSWORD_LOCKOUT_MAX_SECONDS",
    str("PLATFORM_PASSWORD_LOCKOUT_MAX_SECONDS", "900")!,
    1,
    30 * 86_400,
  );
  if (passwordLockoutMaxSeconds < passwordLockoutSeconds) {
    throw new ConfigError(
      "PLATFORM_PASSWORD_LOCKOUT_MAX_SECONDS",
      `${passwordLockoutMaxSeconds} is shorter than PLATFORM_PASSWORD_LOCKOUT_SECONDS (${passwordLockoutSeconds})`,
    );
  }
  const metrics = parseMetrics(port, str("PLATFORM_METRICS_PORT"), str("PLATFORM_METRICS_TOKEN"));
  const assertionAudience = str("PLATFORM_ASSERTION_AUDIENCE", "compatible")!.toLowerCase();
  if (!(assertionAudienceProfiles as readonly string[]).includes(assertionAudience)) {
    throw new ConfigError(
      "PLATFORM_ASSERTION_AUDIENCE",
      `"${assertionAudience}" is not one of ${assertionAudienceProfiles.join(", ")}`,
    );
  }

  return {
    port,
    externalDomain,
    externalPort,
    // Serving TLS implies https external URLs unless set otherwise (e.g. a TLS-terminating proxy in front).
    externalSecure: parseBool(
      "PLATFORM_EXTERNAL_SECURE",
      str("PLATFORM_EXTERNAL_SECURE", tls ? "true" : "false")!,
    ),
    databaseUrl,
    preparedStatements: parseBool(
      "PLATFORM_DATABASE_PREPARED_STATEMENTS",
      str("PLATFORM_DATABASE_PREPARED_STATEMENTS", "true")!,
    ),
    statementTimeoutMs: parseInteger(
      "PLATFORM_DATABASE_STATEMENT_TIMEOUT_MS",
      str("PLATFORM_DATABASE_STATEMENT_TIMEOUT_MS", "5000")!,
      0,
      3_600_000,
    ),
    dataDir: path.resolve(str("PLATFORM_DATA_DIR", "./.data")!),
    embeddedQueueLimit: parseInteger(
      "PLATFORM_EMBEDDED_QUEUE_LIMIT",
      str("PLATFORM_EMBEDDED_QUEUE_LIMIT", "256")!,
      1,
      1_000_000,
    ),
    firstInstance: {
      orgName,
      adminUsername,
      adminPassword,
      patPath: str("PLATFORM_FIRSTINSTANCE_PAT_PATH"),
    },
    systemApiUsers: parseSystemUsers(str("PLATFORM_SYSTEM_API_USERS")),
    logLevel,
    logFormat,
    trustProxy: parseBool("PLATFORM_TRUST_PROXY", str("PLATFORM_TRUST_PROXY", "false")!),
    maxSearchLimit: parseInteger(
      "PLATFORM_MAX_SEARCH_LIMIT",
      str("PLATFORM_MAX_SEARCH_LIMIT", "1000")!,
      1,
      1_000_000,
    ),
    maxPasswordAttempts: parseInteger(
      "PLATFORM_MAX_PASSWORD_ATTEMPTS",
      str("PLATFORM_MAX_PASSWORD_ATTEMPTS", "10")!,
      0,
      1000,
    ),
    passwordLockout,
    passwordLockoutSeconds,
    passwordLockoutMaxSeconds,
    passwordMinLength: parseInteger(
      "PLATFORM_PASSWORD_MIN_LENGTH",
      str("PLATFORM_PASSWORD_MIN_LENGTH", "8")!,
      1,
      128,
    ),
    loginAttemptsPerIp: parseInteger(
      "PLATFORM_LOGIN_ATTEMPTS_PER_IP",
      str("PLATFORM_LOGIN_ATTEMPTS_PER_IP", "300")!,
      0,
      1_000_000,
    ),
    loginAttemptsPerName: parseInteger(
      "PLATFORM_LOGIN_ATTEMPTS_PER_NAME",
      str("PLATFORM_LOGIN_ATTEMPTS_PER_NAME", "30")!,
      0,
      1_000_000,
    ),
    idpCodehostBIssuer: parseIssuer(
      "PLATFORM_IDP_CODEHOST_B_ISSUER",
      str("PLATFORM_IDP_CODEHOST_B_ISSUER", CODEHOST_B_PUBLIC_ISSUER)!,
    ),
    tls,
    masterKey,
    assertionAudience: assertionAudience as AssertionAudienceProfile,
    maxRequestBodyBytes: parseInteger(
      "PLATFORM_MAX_REQUEST_BODY_BYTES",
      str("PLATFORM_MAX_REQUEST_BODY_BYTES", String(DEFAULT_MAX_REQUEST_BODY_BYTES))!,
      1024,
      MAX_REQUEST_BODY_BYTES_LIMIT,
    ),
    shutdownGraceSeconds: parseInteger(
      "PLATFORM_SHUTDOWN_GRACE_SECONDS",
      str("PLATFORM_SHUTDOWN_GRACE_SECONDS", "25")!,
      0,
      3600,
    ),
    connections,
    execution,
    notification: {
      maxAttempts: parseInteger(
        "PLATFORM_NOTIFICATION_MAX_ATTEMPTS",
        str("PLATFORM_NOTIFICATION_MAX_ATTEMPTS", "8")!,
        1,
        100,
      ),
      retryDelayMs: parseInteger(
        "PLATFORM_NOTIFICATION_RETRY_DELAY_MS",
        str("PLATFORM_NOTIFICATION_RETRY_DELAY_MS", "5000")!,
        10,
        3_600_000,
      ),
      codeTtlSeconds: parseCodeTtl(str("PLATFORM_NOTIFICATION_CODE_TTL", "1h")!),
    },
    outbound: { allowPrivate, denyList },
    metrics,
    tracing: parseTracingConfig(
      {
        OTEL_SDK_DISABLED: str("OTEL_SDK_DISABLED"),
        OTEL_TRACES_EXPORTER: str("OTEL_TRACES_EXPORTER"),
        OTEL_EXPORTER_OTLP_ENDPOINT: str("OTEL_EXPORTER_OTLP_ENDPOINT"),
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: str("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
        OTEL_EXPORTER_OTLP_PROTOCOL: str("OTEL_EXPORTER_OTLP_PROTOCOL"),
        OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: str("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"),
        OTEL_EXPORTER_OTLP_HEADERS: str("OTEL_EXPORTER_OTLP_HEADERS"),
        OTEL_EXPORTER_OTLP_TRACES_HEADERS: str("OTEL_EXPORTER_OTLP_TRACES_HEADERS"),
        OTEL_SERVICE_NAME: str("OTEL_SERVICE_NAME"),
        OTEL_RESOURCE_ATTRIBUTES: str("OTEL_RESOURCE_ATTRIBUTES"),
        OTEL_TRACES_SAMPLER: str("OTEL_TRACES_SAMPLER"),
        OTEL_TRACES_SAMPLER_ARG: str("OTEL_TRACES_SAMPLER_ARG"),
      },
      (variable, problem) => {
        throw new ConfigError(variable, problem);
      },
    ),
  };
}

/** Shortest PLATFORM_METRICS_TOKEN accepted: a guessable token would publish every tenant's traffic. */
const MIN_METRICS_TOKEN_LENGTH = 16;

function parseMetrics(port: number, portRaw: string | undefined, token: string | undefined): MetricsConfig {
  const metricsPort = portRaw === undefined ? undefined : parsePort("PLATFORM_METRICS_PORT", portRaw);
  if (metricsPort !== undefined && metricsPort !== 0 && metricsPort === port) {
    throw new ConfigError(
      "PLATFORM_METRICS_PORT",
      `${metricsPort} is PLATFORM_PORT; leave it unset and set PLATFORM_METRICS_TOKEN to serve /metrics there`,
    );
  }
  if (token !== undefined && token.length < MIN_METRICS_TOKEN_LENGTH) {
    throw new ConfigError(
      "PLATFORM_METRICS_TOKEN",
      `must be at least ${MIN_METRICS_TOKEN_LENGTH} characters (e.g. \`openssl rand -hex 32\`)`,
    );
  }
  return { port: metricsPort, token };
}

/**
 * The master key the OIDC signing keys are encrypted with: PLATFORM_MASTERKEY, else (embedded database
 * only) the key in `<PLATFORM_DATA_DIR>/masterkey`, generated there on first start. With DATABASE_URL the
 * variable is required: several processes must share one key, and it must not live beside the database.
 */
export function resolveMasterKey(config: Pick<Config, "masterKey" | "databaseUrl" | "dataDir">): Buffer {
  if (config.masterKey) return config.masterKey;
  if (config.databaseUrl) {
    throw new ConfigError(
      "PLATFORM_MASTERKEY",
      "is required with DATABASE_URL (32 bytes, e.g. `openssl rand -hex 32`); it encrypts the OIDC signing keys",
    );
  }
  try {
    return loadOrCreateMasterKeyFile(config.dataDir);
  } catch (error) {
    throw new ConfigError(
      "PLATFORM_MASTERKEY",
      `cannot use ${masterKeyFile(config.dataDir)}: ${(error as Error).message.replace(/^PLATFORM_MASTERKEY: /, "")}`,
    );
  }
}

/**
 * Connections allowed by default: the process's soft open-file limit (Linux: /proc/self/limits, else
 * 1024) less what is kept for database connections, PGlite's files and logs (a tenth, at least 256 or a
 * quarter of small limits), so the database never fails with EMFILE because clients hold every descriptor.
 */
export function defaultMaxConnections(limitsFile = "/proc/self/limits"): number {
  let openFiles = 1024;
  try {
    const line = readFileSync(limitsFile, "utf8")
      .split("\n")
      .find((l) => l.startsWith("Max open files"));
    const soft = line?.slice("Max open files".length).trim().split(/\s+/)[0];
    if (soft === "unlimited") openFiles = 1_048_576;
    else if (soft && /^\d+$/.test(soft)) openFiles = Number(soft);
  } catch {
    // Not Linux: assume the common default.
  }
  const kept = Math.max(Math.ceil(openFiles / 10), Math.min(256, Math.ceil(openFiles / 4)));
  return Math.max(1, openFiles - kept);
}

/** The address clients use: scheme, host and the port unless it is the scheme's default. */
export function externalOrigin(config: Config, domain = config.externalDomain): string {
  const scheme = config.externalSecure ? "https" : "http";
  const port = config.externalPort === 80 || config.externalPort === 443 ? "" : `:${config.externalPort}`;
  return `${scheme}://${domain}${port}`;
}

function readConfigFile(file: string): Source {
  let parsed: unknown;
  try {
    parsed = YAML.parse(readFileSync(file, "utf8"));
  } catch (error) {
    throw new ConfigError("--config", `cannot read ${file}: ${(error as Error).message.split("\n")[0]}`);
  }
  if (parsed === null || parsed === undefined) return {};
  if (typeof parsed !== "object" || Array.isArray(parsed)) {
    throw new ConfigError("--config", `${file} must be a mapping of variable names to values`);
  }
  const known = new Set(variables.map((v) => v.name));
  const out: Source = {};
  for (const [key, value] of Object.entries(parsed)) {
    if (!known.has(key)) throw new ConfigError("--config", `unknown key ${key} in ${file}`);
    out[key] = typeof value === "object" ? JSON.stringify(value) : String(value);
  }
  return out;
}

function readPem(name: string, file: string): Buffer {
  let content: Buffer;
  try {
    content = readFileSync(file);
  } catch (error) {
    throw new ConfigError(
      name,
      `cannot read ${file} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`,
    );
  }
  if (!content.includes("-----BEGIN ")) throw new ConfigError(name, `${file} is not a PEM file`);
  return content;
}

function parseInteger(name: string, raw: string, min: number, max: number): number {
  if (!/^\d+$/.test(raw)) throw new ConfigError(name, `"${raw}" is not a whole number`);
  const value = Number(raw);
  if (value < min || value > max) throw new ConfigError(name, `${value} is outside ${min}..${max}`);
  return value;
}

function parsePort(name: string, raw: string): number {
  if (!/^\d+$/.test(raw) || Number(raw) > 65535) {
    throw new ConfigError(name, `"${raw}" is not a port number (0-65535)`);
  }
  return Number(raw);
}

function parseBool(name: string, raw: string): boolean {
  const lower = raw.toLowerCase();
  if (["true", "1", "yes"].includes(lower)) return true;
  if (["false", "0", "no"].includes(lower)) return false;
  throw new ConfigError(name, `"${raw}" is not a boolean (true or false)`);
}

function parseSystemUsers(raw: string | undefined): Record<string, string> {
  if (raw === undefined) return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    throw new ConfigError("PLATFORM_SYSTEM_API_USERS", 'is not JSON (expected {"<id>": "<PEM public key>"})');
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    throw new ConfigError("PLATFORM_SYSTEM_API_USERS", 'must be a JSON object {"<id>": "<PEM public key>"}');
  }
  for (const [id, key] of Object.entries(parsed)) {
    if (typeof key !== "string" || !key.includes("-----BEGIN PUBLIC KEY-----")) {
      throw new ConfigError("PLATFORM_SYSTEM_API_USERS", `key of "${id}" is not a PEM public key`);
    }
  }
  return parsed as Record<string, string>;
}
