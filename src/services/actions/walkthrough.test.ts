import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";
import { type Json, restClient, startPlatform, type TestPlatform } from "../../../test/helpers.ts";
import { addCallers } from "./testing.ts";

const CREATE_USER = "/platform.resources.user.v3alpha.PlatformUsers/CreateUser";

/** The walkthrough of docs/actions.md (interface.md §6 "Walkthrough of a local target"), call by call. */
describe("actions: the walkthrough of docs/actions.md", () => {
  let platform: TestPlatform;
  let rest: ReturnType<typeof restClient>;
  let webhook: Server;
  let webhookUrl: string;

  before(async () => {
    platform = await startPlatform({ listen: true });
    const callers = await addCallers(platform);
    rest = restClient(platform, () => callers.owner);
    // step 1: a local server that accepts what is POSTed to /webhook
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

  it("creates the target, sets the execution on CreateUser, creates a user, and runs the further calls", async () => {
    // step 2: the target
    const target = await rest("POST", "/resources/v3alpha/targets", {
      json: {
        name: "local-webhook",
        rest_webhook: { url: webhookUrl },
        timeout: "10s",
        interrupt_on_error: true,
      },
    });
    assert.equal(target.status, 201, JSON.stringify(target.json));
    const id = target.json.details.id as string;
    assert.equal(target.json.details.sequence, "1");
    assert.ok(target.json.signing_key.length >= 32);

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

    // "More calls"
    const read = await rest("GET", `/resources/v3alpha/targets/${id}`);
    assert.equal(read.status, 200);
    assert.deepEqual(read.json.target.target, {
      name: "local-webhook",
      rest_webhook: { url: webhookUrl },
      timeout: "10s",
      interrupt_on_error: true,
      signing_key: target.json.signing_key,
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
  });

  it("accepts the lowerCamelCase names of interface.md's walkthrough", async () => {
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
