/**
 * Test support: a real local HTTP server standing in for action targets. It records every call (path,
 * headers, raw body, arrival time) and answers as each path's responder says (status, body, delay).
 */
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { TestPlatform } from "../../test/helpers.ts";
import { restClient } from "../../test/helpers.ts";
import { testTime } from "../../test/time.ts";

export interface ReceivedCall {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
  // biome-ignore lint/suspicious/noExplicitAny: payloads are checked field by field
  json: any;
  /** performance.now() when the body had arrived. */
  at: number;
}

export interface Answer {
  status?: number;
  body?: string | object;
  /** Milliseconds to wait before answering. */
  delayMs?: number;
  /** Answer only once this settles (a target that has not answered yet, for as long as the test needs). */
  until?: Promise<unknown>;
}

export type Responder = (call: ReceivedCall, nth: number) => Answer | undefined;

export class TestTarget {
  readonly calls: ReceivedCall[] = [];
  private readonly responders = new Map<string, Responder>();
  private readonly waiters: Array<() => void> = [];
  private readonly server: Server;
  port = 0;

  private constructor() {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", async () => {
        const body = Buffer.concat(chunks).toString("utf8");
        let json: unknown;
        try {
          json = JSON.parse(body);
        } catch {
          json = undefined;
        }
        const path = req.url ?? "/";
        const call: ReceivedCall = { path, headers: req.headers, body, json, at: performance.now() };
        this.calls.push(call);
        const nth = this.calls.filter((c) => c.path === path).length;
        for (const wake of this.waiters.splice(0)) wake();
        const answer = this.responders.get(path)?.(call, nth) ?? {};
        if (answer.delayMs) await new Promise((r) => setTimeout(r, answer.delayMs));
        if (answer.until) await answer.until.catch(() => {});
        if (res.destroyed) return;
        const out =
          answer.body === undefined
            ? ""
            : typeof answer.body === "string"
              ? answer.body
              : JSON.stringify(answer.body);
        res.writeHead(answer.status ?? 200, { "content-type": "application/json" });
        res.end(out);
      });
    });
  }

  /** A target server listening on 127.0.0.1 (on `port` when given, e.g. to come back after a restart). */
  static async start(port = 0): Promise<TestTarget> {
    const target = new TestTarget();
    await new Promise<void>((resolve, reject) => {
      target.server.once("error", reject);
      target.server.listen(port, "127.0.0.1", () => resolve());
    });
    target.port = (target.server.address() as AddressInfo).port;
    return target;
  }

  url(path: string): string {
    return `http://127.0.0.1:${this.port}${path}`;
  }

  /** How `path` answers (default: 200 with an empty body). */
  on(path: string, responder: Responder): this {
    this.responders.set(path, responder);
    return this;
  }

  callsTo(path: string): ReceivedCall[] {
    return this.calls.filter((c) => c.path === path);
  }

  /** Resolves once `path` received at least `count` calls; fails after `ms` (scaled by `testTime`). */
  waitFor(path: string, count: number, ms = 10_000): Promise<ReceivedCall[]> {
    return this.waitUntil(path, (calls) => calls.length >= count, ms, `${count} calls`);
  }

  /** Resolves once the calls to `path` satisfy `done`; fails after `ms` (scaled by `testTime`). */
  async waitUntil(
    path: string,
    done: (calls: ReceivedCall[]) => boolean,
    ms = 10_000,
    what = "the expected calls",
  ): Promise<ReceivedCall[]> {
    const limit = testTime(ms);
    const deadline = performance.now() + limit;
    while (!done(this.callsTo(path))) {
      const left = deadline - performance.now();
      if (left <= 0) {
        const got = this.callsTo(path).map(
          (c) => c.json?.event_type ?? c.json?.fullMethod ?? c.body.slice(0, 80),
        );
        throw new Error(`${path}: not ${what} after ${limit} ms; got ${JSON.stringify(got)}`);
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.min(left, 200));
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
    return this.callsTo(path);
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }
}

/** REST helpers of the execution tests: create targets and put executions as the IAM_OWNER `token`. */
export function actionsClient(platform: Pick<TestPlatform, "url">, token: string) {
  const rest = restClient(platform, () => token);
  return {
    rest,
    async target(
      name: string,
      url: string,
      options: {
        type?: "rest_webhook" | "rest_request_response";
        timeout?: string;
        interrupt?: boolean;
        async?: boolean;
      } = {},
    ): Promise<{ id: string; signingKey: string }> {
      const reply = await rest("POST", "/resources/v3alpha/targets", {
        json: {
          name,
          [options.type ?? "rest_webhook"]: { url },
          timeout: options.timeout ?? "5s",
          ...(options.async ? { is_async: true } : { interrupt_on_error: options.interrupt ?? true }),
        },
      });
      if (reply.status !== 201) throw new Error(`CreateTarget: ${reply.status} ${reply.text}`);
      return { id: reply.json.details.id, signingKey: reply.json.signing_key };
    },
    async execution(condition: object, targets: string[], includes: string[] = []): Promise<string> {
      const reply = await rest("POST", "/resources/v3alpha/executions", {
        json: { condition, targets, includes },
      });
      if (reply.status !== 201 && reply.status !== 200)
        throw new Error(`PutExecution: ${reply.status} ${reply.text}`);
      return reply.json.details.id;
    },
  };
}
