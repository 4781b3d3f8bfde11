// Helpers of the OIDC provider tests: machine-user clients made through the public API, relying-party
// configurations of openid-client (a certified RP library), and raw form posts for the error cases.
import assert from "node:assert/strict";
import { createPrivateKey, type KeyObject } from "node:crypto";
import * as client from "openid-client";
import type { OidcClient } from "../src/oidc/clients.ts";
import type { Platform } from "../src/platform.ts";
import { addMachineUser, type Json, restClient } from "./helpers.ts";

export { client };

export interface MachineClient {
  userId: string;
  clientId: string;
  clientSecret: string;
  /** A key the server generated (jwt-bearer, private_key_jwt), when asked for. */
  key?: { keyId: string; privateKey: KeyObject; pem: string };
}

/**
 * A machine user created through the users API by an IAM_OWNER, with `_generate_secret` credentials and,
 * when `withKey`, a server-generated key.
 */
export async function machineClient(
  platform: Platform & { url: string },
  owner: string,
  username: string,
  options: { accessTokenType?: "BEARER" | "JWT"; withKey?: boolean; host?: string } = {},
): Promise<MachineClient> {
  const rest = restClient(platform, () => owner);
  const created = await rest("POST", "/resources/v3alpha/users", {
    host: options.host,
    json: {
      username,
      machine: {
        name: `${username} service`,
        access_token_type: `ACCESS_TOKEN_TYPE_${options.accessTokenType ?? "BEARER"}`,
      },
    },
  });
  assert.equal(created.status, 201, created.text);
  const userId = created.json.details.id as string;
  const secret = await rest("POST", `/resources/v3alpha/users/${userId}/_generate_secret`, {
    host: options.host,
    json: {},
  });
  assert.equal(secret.status, 200, secret.text);
  const result: MachineClient = {
    userId,
    clientId: secret.json.client_id,
    clientSecret: secret.json.client_secret,
  };
  if (options.withKey) {
    const key = await rest("POST", `/resources/v3alpha/users/${userId}/keys`, {
      host: options.host,
      json: {},
    });
    assert.equal(key.status, 201, key.text);
    const file: Json = JSON.parse(Buffer.from(key.json.key_content, "base64").toString("utf8"));
    assert.equal(file.keyId, key.json.key_id);
    result.key = { keyId: file.keyId, privateKey: createPrivateKey(file.key), pem: file.key };
  }
  return result;
}

/** An IAM_OWNER machine user's PAT in the first instance (the tests' admin caller). */
export async function ownerToken(platform: Platform, username = "owner"): Promise<string> {
  const { token } = await addMachineUser(platform, {
    username,
    membership: { contextType: "instance", roles: ["IAM_OWNER"] },
  });
  return token;
}

/** openid-client's configuration of a relying party against the platform (http allowed in tests). */
export async function discover(
  issuer: string,
  clientId: string,
  auth: client.ClientAuth,
  metadata: Partial<client.ClientMetadata> = {},
): Promise<client.Configuration> {
  return client.discovery(new URL(issuer), clientId, metadata, auth, {
    execute: [client.allowInsecureRequests],
  });
}

export interface FormReply {
  status: number;
  json: Json;
  text: string;
  headers: Headers;
}

/** A form-encoded POST (or any body / headers) for the cases a certified client refuses to send. */
export async function postForm(
  url: string,
  body: string | Record<string, string>,
  headers: Record<string, string> = {},
): Promise<FormReply> {
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", ...headers },
    body: typeof body === "string" ? body : new URLSearchParams(body).toString(),
  });
  const text = await response.text();
  let json: Json;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  return { status: response.status, json, text, headers: response.headers };
}

export function basic(clientId: string, secret: string): Record<string, string> {
  const enc = (s: string) => encodeURIComponent(s).replace(/%20/g, "+");
  return { authorization: `Basic ${Buffer.from(`${enc(clientId)}:${enc(secret)}`).toString("base64")}` };
}

/** Asserts an OAuth error answer: status, `error`, no-store. */
export function assertOAuthError(
  reply: FormReply,
  status: number,
  error: string,
  description?: RegExp,
): void {
  assert.equal(reply.status, status, reply.text);
  assert.equal(reply.json?.error, error, reply.text);
  assert.equal(typeof reply.json.error_description, "string");
  if (description) assert.match(reply.json.error_description, description);
  assert.equal(reply.headers.get("cache-control"), "no-store");
}

/**
 * A client registered through the registry's extension point (ClientRegistry.addSource), for client
 * configurations the apps API would make tedious to set up one by one (public clients, assertions, grants).
 */
export function fixtureClient(
  platform: Platform,
  overrides: Partial<OidcClient> & { clientId: string },
): OidcClient {
  const instanceId = platform.bootstrapResult!.instanceId;
  return {
    kind: "app",
    id: `app-${overrides.clientId}`,
    instanceId,
    orgId: platform.bootstrapResult!.orgId,
    active: true,
    authMethods: new Set(["client_secret_basic"]),
    publicKeys: async () => [],
    grantTypes: new Set(["authorization_code", "refresh_token"]),
    responseTypes: ["code"],
    redirectUris: ["https://app.example/callback"],
    postLogoutRedirectUris: [],
    accessTokenType: "opaque",
    idTokenUserinfoAssertion: false,
    accessTokenRoleAssertion: false,
    idTokenRoleAssertion: false,
    clockSkewSeconds: 0,
    ...overrides,
  };
}

/** Registers fixture clients (by client ID, in the first instance) with the provider's registry. */
export function registerFixtures(platform: Platform, clients: OidcClient[]): void {
  platform.oidc.clients.addSource(async (instanceId, clientId) =>
    clients.find((c) => c.instanceId === instanceId && c.clientId === clientId),
  );
}
