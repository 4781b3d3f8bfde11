import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { describe, it } from "node:test";
import { tempDir } from "../test/helpers.ts";
import {
  CODEHOST_B_PUBLIC_ISSUER,
  ConfigError,
  defaultMaxConnections,
  externalOrigin,
  loadConfig,
  variables,
} from "./config.ts";

describe("config", () => {
  it("lists every variable it reads (for --config files and --help), each in README's table", () => {
    const source = readFileSync(new URL("./config.ts", import.meta.url), "utf8");
    const read = new Set([...source.matchAll(/str\("([A-Z_]+)"/g)].map((m) => m[1]));
    const listed = new Set(variables.map((v) => v.name));
    assert.deepEqual(
      [...read].filter((name) => !listed.has(name)),
      [],
      "read but not in `variables`",
    );
    assert.deepEqual(
      [...listed].filter((name) => !read.has(name)),
      [],
      "in `variables` but never read",
    );
    const readme = readFileSync(new URL("../README.md", import.meta.url), "utf8");
    const documented = new Set([...readme.matchAll(/^\| `([A-Z_]+)` \|/gm)].map((m) => m[1]));
    assert.deepEqual(
      [...listed].filter((name) => !documented.has(name)),
      [],
      "missing in README.md",
    );
  });

  it("has the documented defaults", () => {
    const config = loadConfig({});
    assert.equal(config.port, 8080);
    assert.equal(config.externalDomain, "localhost");
    assert.equal(config.externalPort, 8080);
    assert.equal(config.externalSecure, false);
    assert.equal(config.databaseUrl, undefined);
    assert.equal(config.dataDir, path.resolve(".data"));
    assert.deepEqual(config.firstInstance, {
      orgName: "Platform",
      adminUsername: "admin",
      adminPassword: undefined,
      patPath: undefined,
    });
    assert.deepEqual(config.systemApiUsers, {});
    assert.equal(config.logLevel, "info");
    assert.equal(config.logFormat, "auto");
    assert.equal(config.maxSearchLimit, 1000);
    assert.equal(config.maxPasswordAttempts, 10);
    assert.deepEqual(
      [config.passwordLockout, config.passwordLockoutSeconds, config.passwordLockoutMaxSeconds],
      ["temporary", 60, 900],
    );
    assert.equal(config.maxRequestBodyBytes, 1024 * 1024);
    assert.equal(externalOrigin(config), "http://localhost:8080");
    assert.deepEqual(config.notification, { maxAttempts: 8, retryDelayMs: 5000, codeTtlSeconds: 3600 });
  });

  it("PLATFORM_ASSERTION_AUDIENCE is compatible (the default) or strict; anything else names the variable", () => {
    assert.equal(loadConfig({}).assertionAudience, "compatible");
    assert.equal(loadConfig({ PLATFORM_ASSERTION_AUDIENCE: "strict" }).assertionAudience, "strict");
    assert.equal(loadConfig({ PLATFORM_ASSERTION_AUDIENCE: "Compatible" }).assertionAudience, "compatible");
    assert.throws(
      () => loadConfig({ PLATFORM_ASSERTION_AUDIENCE: "fapi" }),
      (error: Error) =>
        error instanceof ConfigError &&
        error.message === 'PLATFORM_ASSERTION_AUDIENCE: "fapi" is not one of compatible, strict',
    );
  });

  it("PLATFORM_NOTIFICATION_CODE_TTL takes seconds or a number with s, m or h", () => {
    for (const [raw, seconds] of [
      ["600", 600],
      ["90m", 5400],
      ["2h", 7200],
      ["120s", 120],
    ] as const)
      assert.equal(loadConfig({ PLATFORM_NOTIFICATION_CODE_TTL: raw }).notification.codeTtlSeconds, seconds);
  });

  it("PLATFORM_IDP_CODEHOST_B_ISSUER replaces the public codehost_b issuer; it must be an http(s) URL", () => {
    assert.equal(loadConfig({}).idpCodehostBIssuer, CODEHOST_B_PUBLIC_ISSUER);
    assert.equal(
      loadConfig({ PLATFORM_IDP_CODEHOST_B_ISSUER: "http://127.0.0.1:9000/" }).idpCodehostBIssuer,
      "http://127.0.0.1:9000",
    );
    for (const bad of ["codehost.internal", "ftp://codehost.internal", "https://codehost.internal/?a=b"]) {
      assert.throws(
        () => loadConfig({ PLATFORM_IDP_CODEHOST_B_ISSUER: bad }),
        (e: unknown) => e instanceof ConfigError && e.variable === "PLATFORM_IDP_CODEHOST_B_ISSUER",
      );
    }
  });

  it("PLATFORM_LOG_FORMAT is json, pretty or auto (any case)", () => {
    for (const format of ["json", "pretty", "auto"] as const) {
      assert.equal(loadConfig({ PLATFORM_LOG_FORMAT: format }).logFormat, format);
      assert.equal(loadConfig({ PLATFORM_LOG_FORMAT: format.toUpperCase() }).logFormat, format);
    }
    assert.throws(
      () => loadConfig({ PLATFORM_LOG_FORMAT: "xml" }),
      /^ConfigError: PLATFORM_LOG_FORMAT: must be one of auto, json, pretty$/,
    );
  });

  it("builds external URLs without the scheme's default port", () => {
    assert.equal(
      externalOrigin(loadConfig({ PLATFORM_EXTERNAL_PORT: "443", PLATFORM_EXTERNAL_SECURE: "true" })),
      "https://localhost",
    );
    assert.equal(
      externalOrigin(
        loadConfig({ PLATFORM_EXTERNAL_DOMAIN: "id.example.com", PLATFORM_EXTERNAL_PORT: "80" }),
      ),
      "http://id.example.com",
    );
  });

  it("rejects each bad value with one line naming the variable", () => {
    const cases: Array<[Record<string, string>, string]> = [
      [{ PLATFORM_PORT: "70000" }, "PLATFORM_PORT"],
      [{ PLATFORM_PORT: "-1" }, "PLATFORM_PORT"],
      [{ PLATFORM_EXTERNAL_PORT: "x" }, "PLATFORM_EXTERNAL_PORT"],
      [{ PLATFORM_EXTERNAL_SECURE: "maybe" }, "PLATFORM_EXTERNAL_SECURE"],
      [{ PLATFORM_EXTERNAL_DOMAIN: "bad domain" }, "PLATFORM_EXTERNAL_DOMAIN"],
      [{ DATABASE_URL: "mysql://localhost/x" }, "DATABASE_URL"],
      [{ DATABASE_URL: "not a url" }, "DATABASE_URL"],
      [{ PLATFORM_LOG_LEVEL: "loud" }, "PLATFORM_LOG_LEVEL"],
      [{ PLATFORM_LOG_FORMAT: "xml" }, "PLATFORM_LOG_FORMAT"],
      [{ PLATFORM_FIRSTINSTANCE_ADMIN_PASSWORD: "short" }, "PLATFORM_FIRSTINSTANCE_ADMIN_PASSWORD"],
      [{ PLATFORM_FIRSTINSTANCE_ADMIN_USERNAME: "a b" }, "PLATFORM_FIRSTINSTANCE_ADMIN_USERNAME"],
      [{ PLATFORM_SYSTEM_API_USERS: "{" }, "PLATFORM_SYSTEM_API_USERS"],
      [{ PLATFORM_SYSTEM_API_USERS: '{"ops": "not a key"}' }, "PLATFORM_SYSTEM_API_USERS"],
      [{ PLATFORM_MAX_SEARCH_LIMIT: "0" }, "PLATFORM_MAX_SEARCH_LIMIT"],
      [{ PLATFORM_MAX_PASSWORD_ATTEMPTS: "ten" }, "PLATFORM_MAX_PASSWORD_ATTEMPTS"],
      [{ PLATFORM_PASSWORD_LOCKOUT: "forever" }, "PLATFORM_PASSWORD_LOCKOUT"],
      [{ PLATFORM_PASSWORD_LOCKOUT_SECONDS: "0" }, "PLATFORM_PASSWORD_LOCKOUT_SECONDS"],
      [
        { PLATFORM_PASSWORD_LOCKOUT_SECONDS: "600", PLATFORM_PASSWORD_LOCKOUT_MAX_SECONDS: "60" },
        "PLATFORM_PASSWORD_LOCKOUT_MAX_SECONDS",
      ],
      [{ PLATFORM_MASTERKEY: "too short" }, "PLATFORM_MASTERKEY"],
      [{ PLATFORM_MASTERKEY: "a".repeat(63) }, "PLATFORM_MASTERKEY"],
      [{ PLATFORM_MAX_REQUEST_BODY_BYTES: "1MiB" }, "PLATFORM_MAX_REQUEST_BODY_BYTES"],
      [{ PLATFORM_MAX_REQUEST_BODY_BYTES: "100" }, "PLATFORM_MAX_REQUEST_BODY_BYTES"],
      [{ PLATFORM_MAX_REQUEST_BODY_BYTES: "2147483648" }, "PLATFORM_MAX_REQUEST_BODY_BYTES"],
      [{ PLATFORM_HTTP_HEADERS_TIMEOUT_MS: "10s" }, "PLATFORM_HTTP_HEADERS_TIMEOUT_MS"],
      [{ PLATFORM_HTTP_HEADERS_TIMEOUT_MS: "0" }, "PLATFORM_HTTP_HEADERS_TIMEOUT_MS"],
      [{ PLATFORM_HTTP_REQUEST_TIMEOUT_MS: "5000" }, "PLATFORM_HTTP_REQUEST_TIMEOUT_MS"],
      [{ PLATFORM_HTTP_IDLE_TIMEOUT_MS: "-1" }, "PLATFORM_HTTP_IDLE_TIMEOUT_MS"],
      [{ PLATFORM_MAX_CONNECTIONS: "0" }, "PLATFORM_MAX_CONNECTIONS"],
      [{ OTEL_EXPORTER_OTLP_ENDPOINT: "collector:4318" }, "OTEL_EXPORTER_OTLP_ENDPOINT"],
      [{ OTEL_EXPORTER_OTLP_ENDPOINT: "grpc://collector:4317" }, "OTEL_EXPORTER_OTLP_ENDPOINT"],
      [
        { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://u:p@c/v1/traces" },
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
      ],
      [{ OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" }, "OTEL_EXPORTER_OTLP_PROTOCOL"],
      [{ OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: "thrift" }, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"],
      [{ OTEL_EXPORTER_OTLP_HEADERS: "api-key" }, "OTEL_EXPORTER_OTLP_HEADERS"],
      [{ OTEL_EXPORTER_OTLP_TRACES_HEADERS: "bad name=1" }, "OTEL_EXPORTER_OTLP_TRACES_HEADERS"],
      [{ OTEL_RESOURCE_ATTRIBUTES: "=x" }, "OTEL_RESOURCE_ATTRIBUTES"],
      [{ OTEL_TRACES_SAMPLER: "jaeger_remote" }, "OTEL_TRACES_SAMPLER"],
      [{ OTEL_TRACES_SAMPLER: "traceidratio", OTEL_TRACES_SAMPLER_ARG: "1.5" }, "OTEL_TRACES_SAMPLER_ARG"],
      [{ OTEL_TRACES_SAMPLER: "traceidratio", OTEL_TRACES_SAMPLER_ARG: "half" }, "OTEL_TRACES_SAMPLER_ARG"],
      [{ OTEL_TRACES_EXPORTER: "zipkin" }, "OTEL_TRACES_EXPORTER"],
      [{ OTEL_SDK_DISABLED: "yes please" }, "OTEL_SDK_DISABLED"],
      [{ PLATFORM_NOTIFICATION_CODE_TTL: "1d" }, "PLATFORM_NOTIFICATION_CODE_TTL"],
      [{ PLATFORM_NOTIFICATION_CODE_TTL: "30" }, "PLATFORM_NOTIFICATION_CODE_TTL"],
      [{ PLATFORM_NOTIFICATION_CODE_TTL: "169h" }, "PLATFORM_NOTIFICATION_CODE_TTL"],
      [{ PLATFORM_NOTIFICATION_MAX_ATTEMPTS: "0" }, "PLATFORM_NOTIFICATION_MAX_ATTEMPTS"],
      [{ PLATFORM_NOTIFICATION_RETRY_DELAY_MS: "5s" }, "PLATFORM_NOTIFICATION_RETRY_DELAY_MS"],
    ];
    for (const [env, variable] of cases) {
      assert.throws(
        () => loadConfig(env),
        (error) =>
          error instanceof ConfigError &&
          error.variable === variable &&
          error.message.startsWith(`${variable}: `) &&
          !error.message.includes("\n"),
        JSON.stringify(env),
      );
    }
  });

  it("takes PLATFORM_MASTERKEY as 64 hex characters, base64 / base64url of 32 bytes, or 32 characters", () => {
    const bytes = Buffer.from(Array.from({ length: 32 }, (_, i) => (i * 37 + 250) % 256));
    for (const raw of [bytes.toString("hex"), bytes.toString("base64"), bytes.toString("base64url")]) {
      assert.deepEqual(loadConfig({ PLATFORM_MASTERKEY: raw }).masterKey, bytes, raw);
    }
    const zitadelStyle = "MasterkeyNeedsToHave32Characters";
    assert.deepEqual(loadConfig({ PLATFORM_MASTERKEY: zitadelStyle }).masterKey, Buffer.from(zitadelStyle));
    assert.equal(loadConfig({}).masterKey, undefined);
  });

  it("takes the request body limit in bytes", () => {
    assert.equal(loadConfig({ PLATFORM_MAX_REQUEST_BODY_BYTES: "65536" }).maxRequestBodyBytes, 65536);
    const file = path.join(tempDir(), "platform.yaml");
    writeFileSync(file, "PLATFORM_MAX_REQUEST_BODY_BYTES: 2048\n");
    assert.equal(loadConfig({}, file).maxRequestBodyBytes, 2048);
    assert.throws(
      () => loadConfig({ PLATFORM_MAX_REQUEST_BODY_BYTES: "100" }),
      /^ConfigError: PLATFORM_MAX_REQUEST_BODY_BYTES: 100 is outside 1024\.\.1073741824$/,
    );
  });

  it("bounds connections by default, the maximum from the open-file limit", () => {
    const config = loadConfig({});
    assert.deepEqual(config.connections, {
      headersTimeoutMs: 10_000,
      requestTimeoutMs: 30_000,
      idleTimeoutMs: 65_000,
      maxConnections: defaultMaxConnections(),
    });
    const limits = (soft: string) => {
      const file = path.join(tempDir(), "limits");
      writeFileSync(
        file,
        "Limit                     Soft Limit           Hard Limit           Units     \n" +
          "Max open files            " +
          soft.padEnd(21) +
          "1048576              files     \n",
      );
      return file;
    };
    assert.equal(defaultMaxConnections(limits("20000")), 18_000, "a tenth kept");
    assert.equal(defaultMaxConnections(limits("1024")), 768, "at least 256 kept");
    assert.equal(defaultMaxConnections(limits("256")), 192, "a quarter of a small limit kept");
    assert.equal(defaultMaxConnections("/nonexistent"), 768, "1024 assumed without /proc");
    assert.equal(
      loadConfig({
        PLATFORM_HTTP_HEADERS_TIMEOUT_MS: "300",
        PLATFORM_HTTP_REQUEST_TIMEOUT_MS: "300",
        PLATFORM_MAX_CONNECTIONS: "5",
      }).connections.maxConnections,
      5,
    );
  });

  it("tracing: off without an OTLP endpoint; the standard OTEL_* variables otherwise", () => {
    assert.equal(loadConfig({}).tracing, undefined);
    assert.deepEqual(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318/" }).tracing, {
      url: "http://collector:4318/v1/traces",
      protocol: "http/protobuf",
      headers: {},
      serviceName: "platform",
      resourceAttributes: {},
      sampler: "parentbased_always_on",
      samplerRatio: 1,
    });
    const tracing = loadConfig({
      OTEL_EXPORTER_OTLP_ENDPOINT: "http://ignored:4318",
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "https://traces.example.com/otlp/v1/traces",
      OTEL_EXPORTER_OTLP_PROTOCOL: "HTTP/JSON",
      OTEL_EXPORTER_OTLP_HEADERS: "api-key=one,x-team=ops",
      OTEL_EXPORTER_OTLP_TRACES_HEADERS: "api-key=tw%C3%B6%2C",
      OTEL_RESOURCE_ATTRIBUTES: "service.name=idp,deployment.environment.name=prod",
      OTEL_TRACES_SAMPLER: "parentbased_traceidratio",
      OTEL_TRACES_SAMPLER_ARG: "0.25",
    }).tracing;
    assert.equal(tracing?.url, "https://traces.example.com/otlp/v1/traces", "the traces endpoint as given");
    assert.equal(tracing?.protocol, "http/json");
    assert.deepEqual(tracing?.headers, { "api-key": "twö,", "x-team": "ops" }, "traces headers win");
    assert.equal(tracing?.serviceName, "idp", "service.name of the attributes without OTEL_SERVICE_NAME");
    assert.equal(tracing?.resourceAttributes["deployment.environment.name"], "prod");
    assert.equal(tracing?.sampler, "parentbased_traceidratio");
    assert.equal(tracing?.samplerRatio, 0.25);
    const endpoint = { OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318" };
    assert.equal(loadConfig({ ...endpoint, OTEL_SERVICE_NAME: "iam" }).tracing?.serviceName, "iam");
    assert.equal(loadConfig({ ...endpoint, OTEL_SDK_DISABLED: "TRUE" }).tracing, undefined);
    assert.equal(loadConfig({ ...endpoint, OTEL_TRACES_EXPORTER: "none" }).tracing, undefined);
    assert.ok(loadConfig({ ...endpoint, OTEL_SDK_DISABLED: "false" }).tracing);
    // header values are secrets: an error names the entry, never its value
    assert.throws(
      () => loadConfig({ ...endpoint, OTEL_EXPORTER_OTLP_HEADERS: "authorization=Bearer%zzsecret" }),
      (error: Error) =>
        error.message.startsWith("OTEL_EXPORTER_OTLP_HEADERS: ") && !error.message.includes("secret"),
    );
  });

  it("reads a YAML file with the same keys, the environment winning", () => {
    const file = path.join(tempDir(), "platform.yaml");
    writeFileSync(file, "PLATFORM_PORT: 9090\nPLATFORM_EXTERNAL_DOMAIN: id.example.com\n");
    const config = loadConfig({ PLATFORM_EXTERNAL_DOMAIN: "env.example.com" }, file);
    assert.equal(config.port, 9090);
    assert.equal(config.externalDomain, "env.example.com");
    writeFileSync(file, "PLATFORM_PROT: 1\n");
    assert.throws(() => loadConfig({}, file), /--config: unknown key PLATFORM_PROT/);
  });
});
