/**
 * A user schema's `pattern` cannot block the server: patterns run on a linear-time engine (RE2), so a
 * catastrophic pattern such as `^(a+)+$`, which a backtracking engine takes 2^n steps on, is answered at
 * once. Platform runs as a process of its own: were the pattern to block it, this test's requests would
 * time out (and fail) instead of this test process hanging with it.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { ADMIN_PASSWORD, freshBackend, type Json, type TestBackend, tempDir, testTime } from "./helpers.ts";
import { freePort, type RunningProcess, startProcess } from "./process.ts";

const SCHEMAS = "/resources/v3alpha/user_schemas";
const USERS = "/resources/v3alpha/users";
/**
 * The limit on each answer: far above what a linear-time match of 41 characters needs, far below what 2^40
 * backtracking steps take (hours), scaled for a loaded machine (at most 8 × 5 s).
 */
const answerWithinMs = () => testTime(5_000);

describe("user schema patterns run in linear time", () => {
  let backend: TestBackend;
  let platform: RunningProcess;
  let pat: string;
  const call = async (method: string, pathname: string, json?: unknown) => {
    const response = await fetch(`${platform.url}${pathname}`, {
      method,
      headers: {
        authorization: `Bearer ${pat}`,
        ...(json === undefined ? {} : { "content-type": "application/json" }),
      },
      body: json === undefined ? undefined : JSON.stringify(json),
      signal: AbortSignal.timeout(answerWithinMs()),
    });
    return { status: response.status, json: (await response.json()) as Json };
  };

  before(async () => {
    const dir = tempDir("patterns-");
    backend = await freshBackend();
    const patPath = path.join(dir, "admin.pat");
    platform = await startProcess(
      {
        ...backend.env,
        PLATFORM_PORT: String(await freePort()),
        PLATFORM_FIRSTINSTANCE_PAT_PATH: patPath,
        PLATFORM_FIRSTINSTANCE_ADMIN_PASSWORD: ADMIN_PASSWORD,
      },
      60_000,
    );
    pat = readFileSync(patPath, "utf8").trim();
  });
  after(async () => {
    // a blocked process would not act on SIGTERM: it is killed after a while
    const killer = setTimeout(() => platform?.child.kill("SIGKILL"), testTime(10_000));
    await platform?.stop();
    clearTimeout(killer);
    await backend?.cleanup();
  });

  it("a catastrophic pattern answers at once, and the server answers another request meanwhile", async () => {
    const created = await call("POST", SCHEMAS, {
      type: "catastrophic",
      schema: { type: "object", properties: { code: { type: "string", pattern: "^(a+)+$" } } },
    });
    assert.equal(created.status, 201, JSON.stringify(created.json));
    const schemaId = created.json.details.id;
    const user = (username: string, code: string) => ({
      username,
      human: {
        profile: { given_name: "Ada", family_name: "Lovelace" },
        email: { address: `${username}@example.com`, is_verified: true },
      },
      schema_id: schemaId,
      data: { code },
    });
    // each call gives up after answerWithinMs(): a blocked server fails the test
    const [refused, meanwhile] = await Promise.all([
      call("POST", USERS, user("evil", `${"a".repeat(40)}!`)),
      call("GET", `${SCHEMAS}/${schemaId}`),
    ]);
    assert.equal(refused.status, 400, JSON.stringify(refused.json));
    assert.equal(refused.json.code, 3);
    assert.equal(refused.json.message, 'user.data: at /code: must match pattern "^(a+)+$"');
    assert.equal(meanwhile.status, 200);
    assert.equal(meanwhile.json.user_schema.type, "catastrophic");
    // a matching value is taken
    const taken = await call("POST", USERS, user("fine", "a".repeat(40)));
    assert.equal(taken.status, 201, JSON.stringify(taken.json));
  });
});
