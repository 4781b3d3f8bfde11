import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { type Json, restClient, startPlatform, type TestPlatform, tempDir } from "../../../test/helpers.ts";
import { freePort } from "../../../test/process.ts";
import { addCallers } from "./testing.ts";

/** The `verify.mjs` of docs/actions.md ("Verifying the signature"), as printed there. */
function verifierFromDocs(): string {
  const doc = readFileSync(new URL("../../../docs/actions.md", import.meta.url), "utf8");
  const section = doc.slice(doc.indexOf("## Verifying the signature"));
  const code = /```js\n([\s\S]*?)```/.exec(section)?.[1];
  assert.ok(code, "docs/actions.md has the verify.mjs example");
  return code;
}

/** Runs the docs' verifier with a signing key; resolves with what it prints and how to stop it. */
async function startVerifier(signingKey: string, port: number) {
  const file = path.join(tempDir("verify-"), "verify.mjs");
  writeFileSync(file, verifierFromDocs());
  const child: ChildProcess = spawn(process.execPath, [file], {
    env: { PATH: process.env.PATH, SIGNING_KEY: signingKey, PORT: String(port) },
    stdio: ["ignore", "pipe", "inherit"],
  });
  let printed = "";
  child.stdout!.on("data", (d) => (printed += d));
  const url = `http://127.0.0.1:${port}/webhook`;
  for (let i = 0; ; i++) {
    try {
      await fetch(url, { method: "POST", body: "{}" });
      break;
    } catch (error) {
      if (i > 100) throw error;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  return {
    url,
    printed: () => printed,
    stop: async () => {
      child.kill();
      await new Promise((r) => child.once("exit", r));
    },
  };
}

const CREATE_USER = "/platform.resources.user.v3alpha.PlatformUsers/CreateUser";

/** The walkthrough of docs/actions.md, call by call. */
describe("actions: the walkthrough of docs/actions.md", () => {
  let platform: TestPlatform;
  let rest: ReturnType<typeof restClient>;
  let webhook: Server;
  let webhookUrl: string;

  before(async () => {
    platform = await startPlatform({ listen: true });
    const callers = await addCallers(platform);
    rest = restClient(platform, () => callers.owner);
    // a local server that accepts what is POSTed to /webhook (for the lowerCamelCase walkthrough)
    webhook = createServer((req, res) => {
      req.resume();
      req.on("end", () => res.end());
    });
    await new Promise<void>((resolve) => webhook.listen(0, "127.0.0.1", resolve));
    webhookUrl = `http://127.0.0.1:${(webhook.address() as AddressInfo).port}/webhook`;
  });
  after(async () => {
    await platform.stop();
    await new Promise((resolve) => webhook.close(resolve));
  });

  it("lists the user API's CreateUser method and service", async () => {
    const methods = await rest("GET", "/resources/v3alpha/executions/methods");
    assert.equal(methods.status, 200);
    assert.ok(methods.json.methods.includes(CREATE_USER), "CreateUser is a condition method");
    const services = await rest("GET", "/resources/v3alpha/executions/services");
    assert.ok(services.json.services.includes("platform.resources.user.v3alpha.PlatformUsers"));
  });

  it("creates the target, runs the verifying server, sets the execution on CreateUser, creates a user, and runs the further calls", async () => {
    // step 1: the target
    const port = await freePort();
    const target = await rest("POST", "/resources/v3alpha/targets", {
      json: {
        name: "local-webhook",
        rest_webhook: { url: `http://127.0.0.1:${port}/webhook` },
        timeout: "10s",
        interrupt_on_error: true,
      },
    });
    assert.equal(target.status, 201, JSON.stringify(target.json));
    const id = target.json.details.id as string;
    assert.equal(target.json.details.sequence, "1");
    assert.ok(target.json.signing_key.length >= 32);

    // step 2: the verifying server of the docs
    const verifier = await startVerifier(target.json.signing_key, port);
    try {
      const forged = await fetch(verifier.url, {
        method: "POST",
        headers: { "platform-signature": `t=${Math.floor(Date.now() / 1000)},v1=${"0".repeat(64)}` },
        body: "{}",
      });
      assert.equal(forged.status, 401, "a forged signature is refused");
      await walkthrough(id, target.json.signing_key, verifier);
    } finally {
      await verifier.stop();
    }
  });

  async function walkthrough(
    id: string,
    signingKey: string,
    verifier: Awaited<ReturnType<typeof startVerifier>>,
  ) {
    const webhookUrl = verifier.url;

    // step 3: the execution for user creation
    const execution = await rest("POST", "/resources/v3alpha/executions", {
      json: { condition: { request: { method: CREATE_USER } }, targets: [id] },
    });
    assert.equal(execution.status, 201, JSON.stringify(execution.json));
    assert.equal(execution.json.details.id, `request.${CREATE_USER}`);

    // step 4: a user through the user API
    const user = await rest("POST", "/resources/v3alpha/users", {
      json: {
        username: "walkthrough",
        human: {
          profile: { given_name: "Walk", family_name: "Through" },
          email: { address: "walkthrough@example.com", is_verified: true },
        },
      },
    });
    assert.equal(user.status, 201, JSON.stringify(user.json));
    const got = await rest("GET", `/resources/v3alpha/users/${user.json.details.id}`);
    assert.equal(got.status, 200, JSON.stringify(got.json));
    // the verifier accepted exactly one call (the interrupting target answered 200) and printed it
    const printed = verifier.printed().trim().split("\n");
    assert.equal(printed.length, 1, verifier.printed());
    const payload = JSON.parse(printed[0]);
    assert.equal(payload.fullMethod, CREATE_USER);
    assert.equal(payload.request.user.username, "walkthrough");
    assert.equal(payload.request.user.human.profile.given_name, "Walk");

    // "More calls"
    const read = await rest("GET", `/resources/v3alpha/targets/${id}`);
    assert.equal(read.status, 200);
    assert.deepEqual(read.json.target.target, {
      name: "local-webhook",
      rest_webhook: { url: webhookUrl },
      timeout: "10s",
      interrupt_on_error: true,
      signing_key: signingKey,
    });
    const patched = await rest("PATCH", `/resources/v3alpha/targets/${id}`, {
      json: { timeout: "5s", is_async: true },
    });
    assert.equal(patched.status, 200, JSON.stringify(patched.json));
    const found = await rest(
      "POST",
      "/resources/v3alpha/targets/_search?sorting_column=TARGET_FIELD_NAME_NAME&query.asc=true&query.limit=10",
      { json: [{ name: { name: "local", method: "TEXT_FILTER_METHOD_STARTS_WITH" } }] },
    );
    assert.equal(found.status, 200);
    assert.deepEqual(
      found.json.result.map((r: Json) => [r.details.id, r.target.timeout, r.target.is_async]),
      [[id, "5s", true]],
    );
    const uses = await rest("POST", "/resources/v3alpha/executions/_search", { json: [{ target: { id } }] });
    assert.deepEqual(
      uses.json.result.map((r: Json) => r.execution),
      [{ condition: { request: { method: CREATE_USER } }, targets: [id], includes: [] }],
    );
    const deleted = await rest(
      "DELETE",
      "/resources/v3alpha/executions/request.%2Fplatform.resources.user.v3alpha.PlatformUsers%2FCreateUser",
    );
    assert.equal(deleted.status, 200, JSON.stringify(deleted.json));
    assert.equal(deleted.json.details.id, `request.${CREATE_USER}`);
    const none = await rest("POST", "/resources/v3alpha/executions/_search", { json: [{ target: { id } }] });
    assert.equal(none.json.details.total_result, "0");
  }

  it("accepts the lowerCamelCase names of the walkthrough", async () => {
    const target = await rest("POST", "/resources/v3alpha/targets", {
      json: {
        name: "camel-webhook",
        restWebhook: { url: webhookUrl },
        timeout: "10s",
        interruptOnError: true,
      },
    });
    assert.equal(target.status, 201, JSON.stringify(target.json));
    const execution = await rest("POST", "/resources/v3alpha/executions", {
      json: { condition: { request: { method: CREATE_USER } }, targets: [target.json.details.id] },
    });
    assert.equal(execution.status, 201, JSON.stringify(execution.json));
    const user = await rest("POST", "/resources/v3alpha/users", {
      json: {
        username: "camel",
        human: {
          profile: { givenName: "Camel", familyName: "Case" },
          email: { address: "camel@example.com", isVerified: true },
        },
      },
    });
    assert.equal(user.status, 201, JSON.stringify(user.json));
  });
});
