/**
 * The OpenTelemetry settings, from the standard `OTEL_*` variables (read by src/config.ts, so a YAML
 * `--config` file may set them too). Tracing is off unless an OTLP endpoint is configured; only OTLP over
 * HTTP is spoken (`http/protobuf`, the specification's default, or `http/json`), never gRPC.
 */

export const samplers = [
  "parentbased_always_on",
  "parentbased_always_off",
  "parentbased_traceidratio",
  "always_on",
  "always_off",
  "traceidratio",
] as const;
export type SamplerName = (typeof samplers)[number];

export const protocols = ["http/protobuf", "http/json"] as const;
export type OtlpProtocol = (typeof protocols)[number];

export interface TracingConfig {
  /** Where spans are POSTed: the traces endpoint as given, or the endpoint with `/v1/traces` appended. */
  url: string;
  protocol: OtlpProtocol;
  /** Headers of every export request (e.g. an API key of the tracing backend): secrets, never logged. */
  headers: Record<string, string>;
  /** `service.name` of every span (OTEL_SERVICE_NAME, else service.name of the attributes, else "platform"). */
  serviceName: string;
  /** Further resource attributes (OTEL_RESOURCE_ATTRIBUTES). */
  resourceAttributes: Record<string, string>;
  sampler: SamplerName;
  /** The ratio of the `*traceidratio` samplers (0 … 1). */
  samplerRatio: number;
}

/** The variables as read (undefined when unset or empty). */
export interface TracingVariables {
  OTEL_SDK_DISABLED?: string;
  OTEL_TRACES_EXPORTER?: string;
  OTEL_EXPORTER_OTLP_ENDPOINT?: string;
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?: string;
  OTEL_EXPORTER_OTLP_PROTOCOL?: string;
  OTEL_EXPORTER_OTLP_TRACES_PROTOCOL?: string;
  OTEL_EXPORTER_OTLP_HEADERS?: string;
  OTEL_EXPORTER_OTLP_TRACES_HEADERS?: string;
  OTEL_SERVICE_NAME?: string;
  OTEL_RESOURCE_ATTRIBUTES?: string;
  OTEL_TRACES_SAMPLER?: string;
  OTEL_TRACES_SAMPLER_ARG?: string;
}

export type Fail = (variable: string, problem: string) => never;

/** The tracing settings, or undefined when tracing is off (no endpoint, OTEL_SDK_DISABLED, exporter none). */
export function parseTracingConfig(vars: TracingVariables, fail: Fail): TracingConfig | undefined {
  const disabled = vars.OTEL_SDK_DISABLED?.toLowerCase();
  if (disabled !== undefined && disabled !== "true" && disabled !== "false")
    fail("OTEL_SDK_DISABLED", `"${vars.OTEL_SDK_DISABLED}" is not true or false`);
  const exporter = vars.OTEL_TRACES_EXPORTER?.toLowerCase() ?? "otlp";
  if (exporter !== "otlp" && exporter !== "none")
    fail("OTEL_TRACES_EXPORTER", `"${exporter}" is not supported (otlp or none)`);

  const tracesEndpoint = vars.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT;
  const endpoint = vars.OTEL_EXPORTER_OTLP_ENDPOINT;
  // Checked even while disabled, so that a typo shows at once rather than when tracing is switched on.
  if (tracesEndpoint !== undefined) httpUrl("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", tracesEndpoint, fail);
  if (endpoint !== undefined) httpUrl("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint, fail);
  const protocolVariable =
    vars.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL !== undefined
      ? "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
      : "OTEL_EXPORTER_OTLP_PROTOCOL";
  const protocol = (vars[protocolVariable] ?? "http/protobuf").toLowerCase() as OtlpProtocol;
  if (!protocols.includes(protocol)) {
    fail(
      protocolVariable,
      `"${protocol}" is not supported: Platform exports over HTTP (http/protobuf or http/json, port 4318)`,
    );
  }
  const headers = {
    ...keyValueList("OTEL_EXPORTER_OTLP_HEADERS", vars.OTEL_EXPORTER_OTLP_HEADERS, fail, HEADER_NAME),
    ...keyValueList(
      "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
      vars.OTEL_EXPORTER_OTLP_TRACES_HEADERS,
      fail,
      HEADER_NAME,
    ),
  };
  const resourceAttributes = keyValueList("OTEL_RESOURCE_ATTRIBUTES", vars.OTEL_RESOURCE_ATTRIBUTES, fail);
  const serviceName = vars.OTEL_SERVICE_NAME ?? resourceAttributes["service.name"] ?? "platform";
  if (serviceName.length > 255) fail("OTEL_SERVICE_NAME", "is longer than 255 characters");

  const sampler = (vars.OTEL_TRACES_SAMPLER?.toLowerCase() ?? "parentbased_always_on") as SamplerName;
  if (!samplers.includes(sampler))
    fail("OTEL_TRACES_SAMPLER", `"${sampler}" is not one of ${samplers.join(", ")}`);
  let samplerRatio = 1;
  const arg = vars.OTEL_TRACES_SAMPLER_ARG;
  if (arg !== undefined && sampler.endsWith("traceidratio")) {
    samplerRatio = Number(arg);
    if (
      !/^\s*[0-9.eE+-]+\s*$/.test(arg) ||
      !Number.isFinite(samplerRatio) ||
      samplerRatio < 0 ||
      samplerRatio > 1
    )
      fail("OTEL_TRACES_SAMPLER_ARG", `"${arg}" is not a ratio between 0 and 1`);
  }

  const url =
    tracesEndpoint ?? (endpoint === undefined ? undefined : `${endpoint.replace(/\/+$/, "")}/v1/traces`);
  if (disabled === "true" || exporter === "none" || url === undefined) return undefined;
  return { url, protocol, headers, serviceName, resourceAttributes, sampler, samplerRatio };
}

function httpUrl(variable: string, value: string, fail: Fail): void {
  const url = URL.parse(value);
  if (!url) fail(variable, `"${value}" is not a URL (expected http(s)://host:4318)`);
  if (url.protocol !== "http:" && url.protocol !== "https:")
    fail(variable, `"${value}" is not an http(s) URL (Platform exports OTLP over HTTP)`);
  if (url.username || url.password)
    fail(variable, "must not carry credentials; put them in OTEL_EXPORTER_OTLP_HEADERS");
}

/** An HTTP header name (RFC 9110 token). */
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/**
 * `key1=value1,key2=value2` with percent-encoded values (the W3C Baggage format the specification uses
 * for OTEL_EXPORTER_OTLP_HEADERS and OTEL_RESOURCE_ATTRIBUTES). Errors name the entry by position, never
 * by its value: header values are secrets.
 */
function keyValueList(
  variable: string,
  raw: string | undefined,
  fail: Fail,
  keyPattern = /^[^\s=,]+$/,
): Record<string, string> {
  const out: Record<string, string> = {};
  if (raw === undefined) return out;
  for (const [index, entry] of raw.split(",").entries()) {
    if (entry.trim() === "") continue;
    const eq = entry.indexOf("=");
    const key = eq < 0 ? "" : entry.slice(0, eq).trim();
    if (!keyPattern.test(key)) fail(variable, `entry ${index + 1} is not key=value`);
    try {
      out[key] = decodeURIComponent(entry.slice(eq + 1).trim());
    } catch {
      fail(variable, `the value of ${key} is not properly percent-encoded`);
    }
  }
  return out;
}
