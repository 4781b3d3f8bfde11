/**
 * The embedded database's one connection, served first come, first served by request, at most
 * PLATFORM_EMBEDDED_QUEUE_LIMIT units of work waiting (src/storage/fair-queue.ts), over HTTP/2: the streams
 * of one connection reach the server in the order they were opened, so the order of arrival is known. While
 * the requests arrive, the test holds the connection with a transaction of its own (as a slow statement
 * would), so that they all wait for it.
 */
import assert from "node:assert/strict";
import http2 from "node:http2";
import { after, before, describe, it } from "node:test";
import { addMachineUser, startPlatform, type TestPlatform, within } from "./helpers.ts";

const onPostgres = Boolean(process.env.DATABASE_URL);
const METRICS_TOKEN = "queue-test-metrics-token";

interface Answer {
  status: number;
  headers: http2.IncomingHttpHeaders;
  body: string;
}

/** REST calls on one HTTP/2 (h2c) connection, answered in whatever order the server finishes them. */
function h2Client(url: string, token: string) {
  const session = http2.connect(url);
  const call = (method: string, path: string, json?: unknown) =>
    new Promise<Answer>((resolve, reject) => {
      const stream = session.request({
        ":method": method,
        ":path": path,
        authorization: `Bearer ${token}`,
        ...(json === undefined ? {} : { "content-type": "application/json" }),
      });
      let headers: http2.IncomingHttpHeaders = {};
      let body = "";
      stream.setEncoding("utf8");
      stream.on("response", (h) => {
        headers = h;
      });
      stream.on("data", (chunk: string) => {
        body += chunk;
      });
      stream.on("end", () => resolve({ status: Number(headers[":status"]), headers, body }));
      stream.on("error", reject);
      stream.end(json === undefined ? undefined : JSON.stringify(json));
    });
  return { call, close: () => session.close() };
}

/** Resolves once `condition` holds (checked every 10 ms). */
async function until(condition: () => boolean, what: string): Promise<void> {
  await within(
    (async () => {
      while (!condition()) await new Promise((resolve) => setTimeout(resolve, 10));
    })(),
    30_000,
    what,
  );
}

/** Holds the database's connection with a transaction until the returned function is called. */
async function holdConnection(platform: TestPlatform): Promise<() => Promise<void>> {
  let release!: () => void;
  const gate = new Promise<void>((resolve) => {
    release = resolve;
  });
  const held = platform.db.transaction(async (tx) => {
    await tx.query("SELECT 1");
    await gate;
  });
  await until(() => platform.db.poolStats?.().inUse === 1, "the connection held");
  return async () => {
    release();
    await held;
  };
}

const human = (username: string) => ({
  username,
  human: {
    profile: { given_name: "Queue", family_name: "Test" },
    email: { address: `${username}@example.com` },
  },
});

describe("the embedded database's queue", { skip: onPostgres && "PostgreSQL has a pool, no queue" }, () => {
  let platform: TestPlatform;
  let token: string;
  before(async () => {
    platform = await startPlatform({ listen: true });
    ({ token } = await addMachineUser(platform, {
      username: "queue-admin",
      membership: { contextType: "instance", roles: ["IAM_OWNER"] },
    }));
  });
  after(async () => platform?.stop());

  it("serves the requests of a burst in the order they came, not each statement in turn", async () => {
    const client = h2Client(platform.url, token);
    try {
      const ids: string[] = [];
      for (let i = 0; i < 8; i++) {
        const created = await client.call("POST", "/resources/v3alpha/users", human(`early-${i}`));
        assert.equal(created.status, 201, created.body);
        ids.push(JSON.parse(created.body).details.id);
      }
      // 8 changes of a user (several statements each), then 60 creates (a transaction each), all arriving
      // while the connection is busy. Served a statement at a time in the order they ask, each change's
      // later statements wait behind every create that came after it; served by request, the changes,
      // which came first, are answered first.
      const release = await holdConnection(platform);
      const finished: string[] = [];
      const changes = ids.map((id, i) =>
        client
          .call("PATCH", `/resources/v3alpha/users/${id}`, {
            human: { profile: { given_name: `Changed ${i}` } },
          })
          .then((answer) => {
            assert.equal(answer.status, 200, answer.body);
            finished.push(`change ${i}`);
          }),
      );
      const creates = Array.from({ length: 60 }, (_, i) =>
        client.call("POST", "/resources/v3alpha/users", human(`late-${i}`)).then((answer) => {
          assert.equal(answer.status, 201, answer.body);
          finished.push(`create ${i}`);
        }),
      );
      // every request waits for the connection (the creates with their one transaction)
      try {
        await until(() => (platform.db.poolStats?.().waiting ?? 0) >= 68, "every request waiting");
      } finally {
        await release();
      }
      await Promise.all([...changes, ...creates]);
      const lastChange = Math.max(...ids.map((_, i) => finished.indexOf(`change ${i}`)));
      const createsBefore = finished.slice(0, lastChange).filter((name) => name.startsWith("create")).length;
      assert.ok(
        createsBefore < 30,
        `${createsBefore} of the 60 later creates were answered before the last of the earlier changes: ${finished.join(", ")}`,
      );
      // and the creates among themselves in the order they came, give or take a few
      const createOrder = finished
        .filter((name) => name.startsWith("create"))
        .map((name) => Number(name.slice(7)));
      const displaced = createOrder.filter((n, at) => Math.abs(n - at) > 5);
      assert.deepEqual(displaced, [], `creates answered in the order ${createOrder.join(", ")}`);
    } finally {
      client.close();
    }
  });
});

describe("PLATFORM_EMBEDDED_QUEUE_LIMIT", () => {
  let platform: TestPlatform;
  let token: string;
  before(async () => {
    platform = await startPlatform({
      listen: true,
      env: { PLATFORM_EMBEDDED_QUEUE_LIMIT: "2", PLATFORM_METRICS_TOKEN: METRICS_TOKEN },
    });
    ({ token } = await addMachineUser(platform, {
      username: "queue-admin",
      membership: { contextType: "instance", roles: ["IAM_OWNER"] },
    }));
  });
  after(async () => platform?.stop());

  it("refuses the latest requests with 503 and Retry-After beyond it, and stores nothing of theirs (PostgreSQL: no such bound)", async () => {
    const client = h2Client(platform.url, token);
    try {
      const warm = await client.call("POST", "/resources/v3alpha/users", human("bound-warm"));
      assert.equal(warm.status, 201, warm.body);
      const names = Array.from({ length: 30 }, (_, i) => `bound-${i}`);
      // the requests arrive while the connection is busy: two may wait, the later ones are refused at once
      const release = onPostgres ? async () => {} : await holdConnection(platform);
      let answered = 0;
      const calls = names.map((name) =>
        client.call("POST", "/resources/v3alpha/users", human(name)).then((answer) => {
          answered++;
          return answer;
        }),
      );
      try {
        if (!onPostgres) await until(() => answered === names.length - 2, "the refusals");
      } finally {
        await release();
      }
      const answers = await Promise.all(calls);
      const created = names.filter((_, i) => answers[i].status === 201);
      const refused = names.filter((_, i) => answers[i].status === 503);
      assert.equal(created.length + refused.length, names.length, answers.map((a) => a.status).join(", "));
      if (onPostgres) {
        assert.deepEqual(refused, [], "the bound is the embedded database's");
        return;
      }
      // the first two to come waited and were served
      assert.deepEqual(created, names.slice(0, 2));
      for (const [i, answer] of answers.entries()) {
        if (answer.status !== 503) continue;
        assert.equal(answer.headers["retry-after"], "5", names[i]);
        assert.equal(JSON.parse(answer.body).code, 14, answer.body); // UNAVAILABLE
      }
      // nothing of a refused request was stored: its username is free; those created are taken
      for (const name of refused) {
        const again = await client.call("POST", "/resources/v3alpha/users", human(name));
        assert.equal(again.status, 201, `${name}: ${again.body}`);
      }
      for (const name of created) {
        const again = await client.call("POST", "/resources/v3alpha/users", human(name));
        assert.equal(again.status, 409, `${name}: ${again.body}`);
      }
      const metrics = await fetch(`${platform.url}/metrics`, {
        headers: { authorization: `Bearer ${METRICS_TOKEN}` },
      });
      const text = await metrics.text();
      assert.match(text, new RegExp(`^platform_db_queue_refused_total ${refused.length}$`, "m"));
      assert.match(text, /^platform_db_waiting 0$/m);
    } finally {
      client.close();
    }
  });
});
