import assert from "node:assert/strict";
import { after, before } from "node:test";
import {
  assertRejected,
  type RestCall,
  type RestReply,
  restClient,
  startPlatform,
  type TestPlatform,
} from "../../../test/helpers.ts";
import { client, discover, fixtureClient, registerFixtures } from "../../../test/oidc.ts";
import { sha256 } from "../../crypto/tokens.ts";
import { addCallers } from "../actions/testing.ts";

/** Test support of the users tests of custom data: a platform, a schema with every kind of field permission, callers. */

export const USERS = "/resources/v3alpha/users";
export const SCHEMAS = "/resources/v3alpha/user_schemas";
const REDIRECT = "https://app.example/callback";
const SECRET = "web-app-secret-0123456789";
export const DATA_SCOPE = "urn:platform:iam:user:data";
export const PERMISSION = "urn:platform:schema:permission";

/** Every kind of field permission: explicit, default, owner-only, self-writable, nested. */
export const schema = {
  type: "object",
  properties: {
    customer_number: { type: "string", title: "Customer number", [PERMISSION]: { owner: "rw", self: "r" } },
    tier: { type: "string", enum: ["basic", "gold"] },
    newsletter: { type: "boolean", [PERMISSION]: { owner: "r", self: "rw" } },
    internal_note: { type: "string", [PERMISSION]: { owner: "rw", self: "" } },
    age: { type: "integer", minimum: 0 },
    address: {
      type: "object",
      [PERMISSION]: { owner: "rw", self: "rw" },
      properties: {
        street: { type: "string" },
        zip: { type: "string", pattern: "^[0-9]{4}$" },
        verified: { type: "boolean", [PERMISSION]: { owner: "rw", self: "r" } },
      },
      additionalProperties: false,
    },
    blob: { type: "string" },
  },
  required: ["customer_number"],
  additionalProperties: false,
};

/**
 * Registers the suite's before/after hooks in the calling `describe` and returns its fixture (filled when
 * the hooks ran) and helpers: `rest` calls as ORG_OWNER of the default organization (an administrator of
 * the users' organization), `owner` as IAM_OWNER; `schemaId` is a schema `customer` of `schema`.
 */
export function customDataSuite() {
  const s = {} as {
    platform: TestPlatform;
    callers: Awaited<ReturnType<typeof addCallers>>;
    rest: RestCall;
    owner: RestCall;
    schemaId: string;
  };
  const rejects = (call: () => Promise<RestReply>, status: number, code: number, message?: RegExp | string) =>
    assertRejected(s.platform, call, status, code, message);
  let seq = 0;
  const human = (extra: Record<string, unknown> = {}) => ({
    username: `person-${++seq}`,
    human: {
      profile: { given_name: "Ada", family_name: "Lovelace" },
      email: { address: `person-${seq}@example.com`, is_verified: true },
    },
    ...extra,
  });
  const createUser = async (body: unknown) => {
    const r = await s.rest("POST", USERS, { json: body });
    assert.equal(r.status, 201, r.text);
    return r.json.details.id as string;
  };
  const createSchema = async (type: string, body: Record<string, unknown> = schema) => {
    const r = await s.owner("POST", SCHEMAS, { json: { type, schema: body } });
    assert.equal(r.status, 201, r.text);
    return r.json.details.id as string;
  };
  /** The user's own tokens through the token endpoint (a code as the authorization endpoint issues it). */
  const tokensOf = async (userId: string, scope: string, clientId = "web-app") => {
    const verifier = client.randomPKCECodeVerifier();
    const code = await s.platform.oidc.issueAuthorizationCode({
      instanceId: s.platform.bootstrapResult!.instanceId,
      issuer: s.platform.url,
      clientId,
      redirectUri: REDIRECT,
      scope: scope.split(" "),
      codeChallenge: await client.calculatePKCECodeChallenge(verifier),
      codeChallengeMethod: "S256",
      userId,
      sessionId: `session-${userId}`,
      authTime: new Date(Date.now() - 5000),
      amr: ["pwd"],
    });
    const config = await discover(s.platform.url, clientId, client.ClientSecretBasic(SECRET));
    const callback = new URL(
      `${REDIRECT}?code=${encodeURIComponent(code)}&iss=${encodeURIComponent(s.platform.url)}`,
    );
    const tokens = await client.authorizationCodeGrant(config, callback, {
      pkceCodeVerifier: verifier,
      idTokenExpected: scope.includes("openid"),
    });
    return { tokens, config };
  };
  /** A REST client calling with the user's own access token (management audience). */
  const selfClient = async (userId: string) => {
    const { tokens } = await tokensOf(userId, "openid urn:platform:iam:org:project:id:platform:aud");
    return restClient(s.platform, () => tokens.access_token);
  };

  before(async () => {
    s.platform = await startPlatform({ listen: true });
    s.callers = await addCallers(s.platform);
    s.rest = restClient(s.platform, () => s.callers.orgOwner);
    s.owner = restClient(s.platform, () => s.callers.owner);
    registerFixtures(s.platform, [
      fixtureClient(s.platform, { clientId: "web-app", secretHash: sha256(SECRET) }),
      fixtureClient(s.platform, {
        clientId: "web-app-jwt",
        secretHash: sha256(SECRET),
        accessTokenType: "jwt",
      }),
    ]);
    s.schemaId = await createSchema("customer");
  });
  after(() => s.platform?.stop());
  return { s, rejects, human, createUser, createSchema, tokensOf, selfClient };
}
