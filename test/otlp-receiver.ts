/**
 * An OTLP/HTTP trace receiver for tests (what an OpenTelemetry Collector listens with on port 4318):
 * accepts `POST /v1/traces`, answers 200 with an empty export response, decodes JSON exports (the
 * `http/json` protocol) into flat spans and keeps protobuf exports as they came (`http/protobuf`).
 */
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { testTime } from "./time.ts";

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  /** "" for a root span. */
  parentSpanId: string;
  name: string;
  /** 1 internal, 2 server, 3 client. */
  kind: number;
  attributes: Record<string, string | number | boolean>;
  /** 0 unset, 1 ok, 2 error. */
  status: number;
  resource: Record<string, string | number | boolean>;
}

export interface ReceivedExport {
  path: string;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

export const SpanKindNumber = { internal: 1, server: 2, client: 3 } as const;

export class OtlpReceiver {
  readonly exports: ReceivedExport[] = [];
  readonly spans: ReceivedSpan[] = [];
  private readonly server: Server;
  url = "";

  private constructor(private readonly status: number) {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const body = Buffer.concat(chunks);
        this.exports.push({ path: req.url ?? "/", headers: req.headers, body });
        if (req.method !== "POST" || req.url !== "/v1/traces" || this.status !== 200) {
          res.writeHead(req.url === "/v1/traces" ? this.status : 404).end();
          return;
        }
        const json = String(req.headers["content-type"]).startsWith("application/json");
        if (json) this.spans.push(...flatten(JSON.parse(body.toString("utf8"))));
        res.writeHead(200, { "content-type": json ? "application/json" : "application/x-protobuf" });
        res.end(json ? "{}" : "");
      });
    });
  }

  /** A receiver on 127.0.0.1; `status` other than 200: it refuses every export with that status. */
  static async start(status = 200): Promise<OtlpReceiver> {
    const receiver = new OtlpReceiver(status);
    await new Promise<void>((resolve) => receiver.server.listen(0, "127.0.0.1", resolve));
    receiver.url = `http://127.0.0.1:${(receiver.server.address() as AddressInfo).port}`;
    return receiver;
  }

  /** The spans of one trace. */
  trace(traceId: string): ReceivedSpan[] {
    return this.spans.filter((s) => s.traceId === traceId);
  }

  /** Waits until the spans received satisfy `done`; fails after `ms` (scaled by `testTime`) with what arrived. */
  async waitFor(done: (spans: ReceivedSpan[]) => boolean, limitMs = 10_000): Promise<ReceivedSpan[]> {
    const ms = testTime(limitMs);
    const deadline = Date.now() + ms;
    while (!done(this.spans)) {
      if (Date.now() > deadline)
        throw new Error(
          `the expected spans did not arrive in ${ms} ms; got: ${this.spans.map((s) => s.name).join(", ")}`,
        );
      await new Promise((r) => setTimeout(r, 25));
    }
    return this.spans;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }
}

interface OtlpAttribute {
  key: string;
  value: { stringValue?: string; intValue?: string | number; boolValue?: boolean; doubleValue?: number };
}

function attributes(list: OtlpAttribute[] | undefined): Record<string, string | number | boolean> {
  const out: Record<string, string | number | boolean> = {};
  for (const { key, value } of list ?? []) {
    out[key] =
      value.stringValue ??
      (value.intValue !== undefined ? Number(value.intValue) : undefined) ??
      value.boolValue ??
      value.doubleValue ??
      "";
  }
  return out;
}

// biome-ignore lint/suspicious/noExplicitAny: the OTLP JSON shape, read field by field
function flatten(body: any): ReceivedSpan[] {
  const spans: ReceivedSpan[] = [];
  for (const rs of body.resourceSpans ?? []) {
    const resource = attributes(rs.resource?.attributes);
    for (const ss of rs.scopeSpans ?? [])
      for (const s of ss.spans ?? [])
        spans.push({
          traceId: s.traceId,
          spanId: s.spanId,
          parentSpanId: s.parentSpanId ?? "",
          name: s.name,
          kind: s.kind,
          attributes: attributes(s.attributes),
          status: s.status?.code ?? 0,
          resource,
        });
  }
  return spans;
}
