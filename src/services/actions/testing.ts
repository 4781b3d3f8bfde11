import assert from "node:assert/strict";
import { addMachineUser, type TestPlatform } from "../../../test/helpers.ts";

/** Test support of the actions tests: REST calls with a bearer token, and the callers of each kind. */
export interface Reply {
  status: number;
  // biome-ignore lint/suspicious/noExplicitAny: JSON answers are checked field by field
  body: any;
}

export function restClient(platform: TestPlatform, defaultToken: () => string) {
  return async (
    method: string,
    path: string,
    options: { token?: string; json?: unknown } = {},
  ): Promise<Reply> => {
    const headers: Record<string, string> = { authorization: `Bearer ${options.token ?? defaultToken()}` };
    if (options.json !== undefined) headers["content-type"] = "application/json";
    const response = await fetch(`${platform.url}${path}`, {
      method,
      headers,
      body: options.json !== undefined ? JSON.stringify(options.json) : undefined,
    });
    const text = await response.text();
    return { status: response.status, body: text ? JSON.parse(text) : undefined };
  };
}

/** IAM_OWNER, IAM_OWNER_VIEWER, ORG_OWNER and a user without any role. */
export async function addCallers(platform: TestPlatform) {
  const role = async (username: string, membership?: Parameters<typeof addMachineUser>[1]["membership"]) =>
    (await addMachineUser(platform, { username, membership })).token;
  return {
    owner: await role("owner", { contextType: "instance", roles: ["IAM_OWNER"] }),
    viewer: await role("viewer", { contextType: "instance", roles: ["IAM_OWNER_VIEWER"] }),
    orgOwner: await role("org-owner", { contextType: "org", roles: ["ORG_OWNER"] }),
    nobody: await role("nobody"),
  };
}

/** Asserts an rpcStatus error: HTTP status, gRPC code and the start of the message (usually the field). */
export function assertError(reply: Reply, status: number, code: number, message?: RegExp | string): void {
  assert.equal(reply.status, status, JSON.stringify(reply.body));
  assert.equal(reply.body.code, code, JSON.stringify(reply.body));
  if (typeof message === "string") assert.ok(reply.body.message.startsWith(message), reply.body.message);
  else if (message) assert.match(reply.body.message, message);
}

/** A JSON value of an answer (an alias of the `any` of Reply.body). */
export type Json = Reply["body"];
